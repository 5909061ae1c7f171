import { Logger } from '@nestjs/common';
import {
  context,
  defaultTextMapGetter,
  propagation,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Context,
  type Link,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, ConsoleSpanExporter, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { traceExporters, type Tracing, type TracingOptions, type TurnTrace } from './tracing.js';

type Env = Readonly<Record<string, string | undefined>>;

const W3C = new W3CTraceContextPropagator();
const logger = new Logger('Tracing');

/** The span processors `OTEL_TRACES_EXPORTER` names (default `otlp`): OTLP over HTTP/JSON, or the console. */
function processorsFor(env: Env): SpanProcessor[] {
  const names = traceExporters(env);
  const processors: SpanProcessor[] = [];
  for (const name of names.length > 0 ? names : ['otlp']) {
    if (name === 'otlp') {
      const protocol = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL;
      if (protocol !== undefined && protocol !== 'http/json') logger.warn(`OTLP protocol ${protocol} is not supported; traces are sent as http/json`);
      // The endpoint as the variables say (the exporter reads the headers, timeout and compression variables itself).
      const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
      const url = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || (base ? `${base.replace(/\/+$/, '')}/v1/traces` : undefined);
      processors.push(new BatchSpanProcessor(new OTLPTraceExporter(url ? { url } : {})));
    } else if (name === 'console') {
      processors.push(new BatchSpanProcessor(new ConsoleSpanExporter()));
    } else if (name !== 'none') {
      logger.warn(`Trace exporter ${name} is not supported (otlp, console or none); ignored`);
    }
  }
  return processors;
}

/** What a traced request carries from its first hook to its last. */
interface TracedRequest {
  readonly span: Span;
  readonly context: Context;
}

/**
 * {@link Tracing} with the OpenTelemetry SDK: a `NodeTracerProvider` whose resource is
 * `service.name=pushpop` unless `OTEL_SERVICE_NAME` / `OTEL_RESOURCE_ATTRIBUTES` say otherwise,
 * sampled as `OTEL_TRACES_SAMPLER` says (default: parent-based, always on), exporting in
 * batches (`OTEL_BSP_*`). Its spans are made by hand rather than by instrumentation libraries:
 * a server span per request of an operation, and per operation its turn and the turn's
 * statement, recorded when the turn ended (a turn may carry several requests' operations).
 */
export class OtelTracing implements Tracing {
  private readonly requests = new WeakMap<FastifyRequest, TracedRequest>();

  private constructor(
    private readonly provider: NodeTracerProvider,
    private readonly tracer: Tracer,
    /** Whether this provider became the process's global one (the first start in the process). */
    private readonly global: boolean,
  ) {}

  static start(env: Env, options: TracingOptions = {}): OtelTracing {
    const spanProcessors = options.spanProcessors ? (options.spanProcessors as SpanProcessor[]) : processorsFor(env);
    const resource = defaultResource()
      .merge(resourceFromAttributes({ 'service.name': 'pushpop' }))
      .merge(detectResources({ detectors: [envDetector] }));
    const provider = new NodeTracerProvider({ resource, spanProcessors });
    // Global: the context manager (AsyncLocalStorage) that carries a request's span into its
    // handler, the W3C propagators, and the provider for code of the same process that uses the
    // API (the pushpop client). A second start in one process (tests) leaves the first in place;
    // the first's shutdown gives the globals up, so a start after it registers its own.
    provider.register();
    const registered = trace.getTracerProvider();
    const global = (registered instanceof ProxyTracerProvider ? registered.getDelegate() : registered) === provider;
    logger.log(`Tracing on: ${spanProcessors.length} span processor(s)`);
    return new OtelTracing(provider, provider.getTracer('pushpop'), global);
  }

  currentContext(): unknown {
    return context.active();
  }

  turnFinished(turn: TurnTrace): void {
    for (const parent of turn.contexts as readonly (Context | undefined)[]) {
      // Operations asked for outside any trace (sweeps) get no spans of their own.
      if (!parent || !trace.getSpan(parent)) continue;
      const span = this.tracer.startSpan(
        'pushpop.turn',
        {
          startTime: turn.start,
          attributes: { 'pushpop.queue_id': turn.queueId, 'pushpop.turn.operations': turn.contexts.length, 'pushpop.turn.attempts': turn.attempts },
        },
        parent,
      );
      if (turn.statement) {
        this.tracer
          .startSpan(
            'SELECT pushpop_write_turn',
            {
              kind: SpanKind.CLIENT,
              startTime: turn.statement.start,
              attributes: {
                'db.system.name': 'postgresql',
                'db.operation.name': 'SELECT',
                'db.stored_procedure.name': 'pushpop_write_turn',
                'db.query.summary': 'SELECT pushpop_write_turn',
              },
            },
            trace.setSpan(parent, span),
          )
          .end(turn.statement.end);
      }
      if (!turn.ok) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end(turn.end);
    }
  }

  linkItems(headers: readonly (string | undefined)[]): void {
    const span = trace.getActiveSpan();
    if (!span) return;
    const links: Link[] = [];
    for (const text of headers) {
      if (text === undefined) continue;
      let traceparent: unknown;
      try {
        traceparent = (JSON.parse(text) as Record<string, unknown>).traceparent;
      } catch {
        continue;
      }
      if (typeof traceparent !== 'string') continue;
      const linked = trace.getSpanContext(W3C.extract(ROOT_CONTEXT, { traceparent }, defaultTextMapGetter));
      if (linked) links.push({ context: linked });
    }
    span.setAttribute('messaging.batch.message_count', headers.length);
    if (links.length > 0) span.addLinks(links);
  }

  traceRequests(fastify: FastifyInstance, operations: ReadonlyMap<string, string>): void {
    fastify.addHook('onRequest', (request: FastifyRequest, _reply: FastifyReply, done: () => void) => {
      const route = request.routeOptions.url;
      const operation = operations.get(`${request.routeOptions.method as string} ${route}`);
      if (!operation || route === undefined) return done();
      const parent = W3C.extract(ROOT_CONTEXT, request.headers, defaultTextMapGetter);
      const queueId = (request.params as Record<string, unknown> | undefined)?.queue_id;
      const span = this.tracer.startSpan(
        `${request.method} ${route}`,
        {
          kind: SpanKind.SERVER,
          attributes: {
            'http.request.method': request.method,
            'http.route': route,
            'pushpop.operation': operation,
            ...(typeof queueId === 'string' ? { 'pushpop.queue_id': queueId } : {}),
          },
        },
        parent,
      );
      this.requests.set(request, { span, context: trace.setSpan(parent, span) });
      done();
    });
    // The handler and everything it awaits run in the request's context: the last hook before it hands over within it.
    fastify.addHook('preHandler', (request: FastifyRequest, _reply: FastifyReply, done: () => void) => {
      const traced = this.requests.get(request);
      if (!traced) return done();
      context.with(traced.context, done);
    });
    fastify.addHook('onResponse', (request: FastifyRequest, reply: FastifyReply, done: () => void) => {
      this.endRequest(request, reply.statusCode);
      done();
    });
    fastify.addHook('onRequestAbort', (request: FastifyRequest, done: () => void) => {
      this.endRequest(request, undefined);
      done();
    });
  }

  private endRequest(request: FastifyRequest, status: number | undefined): void {
    const traced = this.requests.get(request);
    if (!traced) return;
    this.requests.delete(request);
    if (status === undefined) traced.span.setStatus({ code: SpanStatusCode.ERROR, message: 'client went away' });
    else {
      traced.span.setAttribute('http.response.status_code', status);
      if (status >= 500) traced.span.setStatus({ code: SpanStatusCode.ERROR });
    }
    traced.span.end();
  }

  async shutdown(): Promise<void> {
    await this.provider.shutdown();
    if (this.global) {
      trace.disable();
      context.disable();
      propagation.disable();
    }
  }
}
