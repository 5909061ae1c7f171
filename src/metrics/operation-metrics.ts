import { Injectable, OnModuleInit } from '@nestjs/common';
import { DiscoveryService, HttpAdapterHost, MetadataScanner, Reflector } from '@nestjs/core';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { operationRoutes } from '../common/operation-routes.js';
import { MetricsService } from './metrics.service.js';

/**
 * Counts and times every queue operation (the handlers of controllers marked
 * `@CountedOperations()`) by its handler name and outcome: `ok`, or the error_code of the answer.
 *
 * Observed from Fastify's own response hooks rather than a Nest interceptor: an interceptor
 * wraps every request in rxjs observables, which measured about a tenth of the service's CPU
 * per push. The routes are mapped to operation names once, from the controllers' metadata.
 */
@Injectable()
export class OperationMetrics implements OnModuleInit {
  /** `METHOD /route/pattern` → operation name. */
  private readonly operations = new Map<string, string>();
  /** The error_code of error answers, read from their body on the way out. */
  private readonly errorCodes = new WeakMap<FastifyRequest, string>();

  constructor(
    private readonly metrics: MetricsService,
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    private readonly adapter: HttpAdapterHost,
  ) {}

  onModuleInit(): void {
    for (const [route, name] of operationRoutes(this.discovery, this.scanner, this.reflector)) this.operations.set(route, name);
    const fastify = this.adapter.httpAdapter?.getInstance<FastifyInstance>();
    // Absent in preview mode (writing openapi.json), where nothing serves requests.
    if (!fastify) return;
    // Callback hooks (not async ones): no promise per request.
    fastify.addHook('onSend', (request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (error: null, payload: unknown) => void) => {
      if (reply.statusCode >= 400 && typeof payload === 'string') this.rememberErrorCode(request, payload);
      done(null, payload);
    });
    fastify.addHook('onResponse', (request: FastifyRequest, reply: FastifyReply, done: () => void) => {
      this.observe(request, reply);
      done();
    });
  }

  private rememberErrorCode(request: FastifyRequest, body: string): void {
    try {
      const code = (JSON.parse(body) as { error_code?: unknown }).error_code;
      if (typeof code === 'string') this.errorCodes.set(request, code);
    } catch {
      // not an error body of ours
    }
  }

  private observe(request: FastifyRequest, reply: FastifyReply): void {
    const operation = this.operations.get(`${request.routeOptions.method as string} ${request.routeOptions.url}`);
    if (!operation) return;
    const outcome = reply.statusCode < 400 ? 'ok' : (this.errorCodes.get(request) ?? (reply.statusCode < 500 ? 'CLIENT_ERROR' : 'INTERNAL_ERROR'));
    this.metrics.operations.inc({ operation, outcome });
    this.metrics.operationDuration.observe({ operation }, reply.elapsedTime / 1000);
  }
}
