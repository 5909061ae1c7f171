import { createServer, type Server } from 'node:http';
import { gunzipSync } from 'node:zlib';
import { trace, type SpanContext } from '@opentelemetry/api';
import { PushpopClient } from '@pushpop/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTracing, type Tracing } from '../../src/telemetry/tracing.js';
import { closeWithin } from '../support/lock-helpers.js';
import { databaseKind, removeDataDir, startService, type TestService, uniqueQueueId } from '../support/service.js';
import { waitFor } from './client-support.js';

/** A span as OTLP/HTTP JSON carries it (ids in hex). */
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  links?: { traceId: string; spanId: string }[];
  attributes?: { key: string; value: { stringValue?: string; intValue?: string | number } }[];
}

/**
 * A trace from a producer's span to a consumer's handler, through the service, as an OTLP
 * receiver sees it: the service exports over OTLP/HTTP (JSON) to a small receiver started here,
 * configured only by the standard variables (`OTEL_EXPORTER_OTLP_ENDPOINT`), and the client
 * (OpenTelemetry API only) sends and continues the trace.
 */
describe(`a trace from push to handler, exported over OTLP/HTTP (${databaseKind})`, () => {
  const received: { service: string; span: OtlpSpan }[] = [];
  const requests: { path: string; contentType: string }[] = [];
  let receiver: Server;
  let tracing: Tracing | undefined;
  let svc: TestService;
  const saved = process.env.OTEL_BSP_SCHEDULE_DELAY;

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const raw = Buffer.concat(chunks);
        const body = req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw;
        requests.push({ path: req.url ?? '', contentType: String(req.headers['content-type']) });
        const payload = JSON.parse(body.toString('utf8')) as {
          resourceSpans: { resource: { attributes: OtlpSpan['attributes'] }; scopeSpans: { spans: OtlpSpan[] }[] }[];
        };
        for (const rs of payload.resourceSpans) {
          const service = rs.resource.attributes?.find((a) => a.key === 'service.name')?.value.stringValue ?? '';
          for (const ss of rs.scopeSpans) for (const span of ss.spans) received.push({ service, span });
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const { port } = receiver.address() as { port: number };
    // Read by the SDK's batch processor: export every 100 ms instead of 5 s.
    process.env.OTEL_BSP_SCHEDULE_DELAY = '100';
    tracing = await startTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_TRACES_EXPORTER: 'otlp' });
    expect(tracing).toBeDefined();
    svc = await startService({ tracing });
  });
  afterAll(async () => {
    if (saved === undefined) delete process.env.OTEL_BSP_SCHEDULE_DELAY;
    else process.env.OTEL_BSP_SCHEDULE_DELAY = saved;
    if (svc) await closeWithin(() => svc.close());
    if (svc) removeDataDir(svc.dataDir);
    await new Promise((resolve) => receiver?.close(resolve));
  });

  it("a producer's span reaches the consumer's handler: the handler's span is its child, the push its child, the pop linked to it", async () => {
    const q = uniqueQueueId('otlp');
    const client = new PushpopClient({ baseUrl: svc.url });
    const tracer = trace.getTracer('checkout-service');
    let producer: SpanContext | undefined;
    await tracer.startActiveSpan('checkout', async (span) => {
      producer = span.spanContext();
      await client.queue(q).push({ order: 1 });
      span.end();
    });
    let handled: { span: SpanContext | undefined; headers: Record<string, string> } | undefined;
    const consumer = client.consume(
      q,
      (message) => {
        handled = { span: trace.getActiveSpan()?.spanContext(), headers: message.headers };
      },
      { waitSeconds: 1 },
    );
    try {
      await waitFor('the handler', () => handled !== undefined);
    } finally {
      await consumer.close();
    }
    const { traceId, spanId } = producer!;
    expect(handled!.headers.traceparent).toBe(`00-${traceId}-${spanId}-01`);
    expect(handled!.span?.traceId).toBe(traceId);

    const find = (name: string) => received.find((r) => r.span.name === name && r.span.traceId === traceId);
    await waitFor('the spans at the receiver', () => find(`process ${q}`) !== undefined && find('POST /queue/:queue_id/push') !== undefined, 10_000);
    // The handler's span: a child of the producer's span, in its trace.
    const processSpan = find(`process ${q}`)!.span;
    expect(processSpan.parentSpanId).toBe(spanId);
    expect(processSpan.spanId).toBe(handled!.span!.spanId);
    // The push's server span (exported by the service): a child of the producer's span, with its turn and statement below.
    const push = find('POST /queue/:queue_id/push')!;
    expect(push.service).toBe('pushpop');
    expect(push.span.parentSpanId).toBe(spanId);
    expect(push.span.attributes).toContainEqual({ key: 'pushpop.queue_id', value: { stringValue: q } });
    const turn = received.find((r) => r.span.parentSpanId === push.span.spanId && r.span.name === 'pushpop.turn');
    expect(turn).toBeDefined();
    expect(received.some((r) => r.span.parentSpanId === turn!.span.spanId && r.span.name === 'SELECT pushpop_write_turn')).toBe(true);
    // The pop that handed the item out, in a trace of its own, linked to the producer's span.
    await waitFor('the linked pop', () => received.some((r) => r.span.name === 'POST /queue/:queue_id/pop' && (r.span.links ?? []).length > 0), 10_000);
    const pop = received.find((r) => r.span.name === 'POST /queue/:queue_id/pop' && (r.span.links ?? []).length > 0)!;
    expect(pop.span.links).toEqual([expect.objectContaining({ traceId, spanId })]);
    expect(requests.every((r) => r.path === '/v1/traces' && r.contentType.startsWith('application/json'))).toBe(true);
  });

  it('a lingering producer sends each item with the traceparent of the span it was pushed in, in one batch', async () => {
    const q = uniqueQueueId('otlp-linger');
    const client = new PushpopClient({ baseUrl: svc.url });
    const producer = client.producer(q, { lingerMs: 50 });
    const tracer = trace.getTracer('checkout-service');
    const contexts: SpanContext[] = [];
    const start = client.requests;
    const pushes = [1, 2, 3].map((n) =>
      tracer.startActiveSpan(`order ${n}`, (span) => {
        contexts.push(span.spanContext());
        const pushed = producer.push({ n });
        span.end();
        return pushed;
      }),
    );
    await Promise.all(pushes);
    expect(client.requests - start).toBe(1);
    const popped = await client.queue(q).pop({ depth: 10, includeHeaders: true });
    expect(popped.headers).toEqual(contexts.map((c) => ({ traceparent: `00-${c.traceId}-${c.spanId}-01` })));
  });
});
