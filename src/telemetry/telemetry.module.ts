import { DynamicModule, Inject, Injectable, Module, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { DiscoveryModule, DiscoveryService, HttpAdapterHost, MetadataScanner, Reflector } from '@nestjs/core';
import type { FastifyInstance } from 'fastify';
import { operationRoutes } from '../common/operation-routes.js';
import { TRACING, type Tracing } from './tracing.js';

/** Opens a span per request of a queue operation (see {@link Tracing.traceRequests}); stops tracing with the app. */
@Injectable()
class RequestTracing implements OnModuleInit, OnApplicationShutdown {
  constructor(
    @Inject(TRACING) private readonly tracing: Tracing,
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    private readonly adapter: HttpAdapterHost,
  ) {}

  onModuleInit(): void {
    const fastify = this.adapter.httpAdapter?.getInstance<FastifyInstance>();
    // Absent in preview mode (writing openapi.json), where nothing serves requests.
    if (fastify) this.tracing.traceRequests(fastify, operationRoutes(this.discovery, this.scanner, this.reflector));
  }

  async onApplicationShutdown(): Promise<void> {
    await this.tracing.shutdown();
  }
}

/**
 * Tracing, when it is on: provides {@link TRACING} to the whole app (the turn runner and the
 * queue service take it as optional) and traces requests. Off, the module provides nothing.
 */
@Module({})
export class TelemetryModule {
  static forRoot(tracing: Tracing | undefined): DynamicModule {
    if (!tracing) return { module: TelemetryModule };
    return {
      module: TelemetryModule,
      global: true,
      imports: [DiscoveryModule],
      providers: [{ provide: TRACING, useValue: tracing }, RequestTracing],
      exports: [TRACING],
    };
  }
}
