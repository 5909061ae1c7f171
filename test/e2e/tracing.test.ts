import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { SpanKind, trace } from '@opentelemetry/api';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTracing, tracingWanted } from '../../src/telemetry/tracing.js';
import { closeWithin } from '../support/lock-helpers.js';
import { answer, until } from '../support/queue-helpers.js';
import { databaseKind, removeDataDir, startService, type TestService, uniqueQueueId } from '../support/service.js';

/**
 * Tracing with the OpenTelemetry SDK, its spans kept in memory: a server span per request of a
 * queue operation (queue id and operation as attributes, the request's `traceparent` its
 * parent), a turn span and its statement's span below it, and a pop's span linked to the spans
 * that pushed its items.
 */
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PUSH_SPAN = '00f067aa0ba902b7';
const TRACEPARENT = `00-${TRACE_ID}-${PUSH_SPAN}-01`;

describe(`tracing (${databaseKind})`, () => {
  const exporter = new InMemorySpanExporter();
  let svc: TestService;

  beforeAll(async () => {
    const tracing = await startTracing({}, { spanProcessors: [new SimpleSpanProcessor(exporter)] });
    svc = await startService({ tracing });
  });
  beforeEach(() => exporter.reset());
  afterAll(async () => {
    if (svc) await closeWithin(() => svc.close());
    if (svc) removeDataDir(svc.dataDir);
  });

  const spans = (): ReadableSpan[] => exporter.getFinishedSpans();
  const named = (name: string): ReadableSpan[] => spans().filter((s) => s.name === name);
  const childrenOf = (parent: ReadableSpan): ReadableSpan[] => spans().filter((s) => s.parentSpanContext?.spanId === parent.spanContext().spanId);

  it('is wanted only when the standard variables ask for it', () => {
    expect(tracingWanted({})).toBe(false);
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(true);
    expect(tracingWanted({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toBe(true);
    expect(tracingWanted({ OTEL_TRACES_EXPORTER: 'console' })).toBe(true);
    expect(tracingWanted({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(false);
    expect(tracingWanted({ OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(false);
  });

  it('a push: a server span (child of the request traceparent) with queue id and operation, a turn span below it and its statement below that', async () => {
    const q = uniqueQueueId('tr-push');
    const res = await answer(
      svc.http
        .post(`/queue/${q}/push`)
        .set('traceparent', TRACEPARENT)
        .send({ item: { n: 1 } }),
    );
    expect(res.status).toBe(200);
    await until(() => named('POST /queue/:queue_id/push').length > 0, 5000);
    const [server] = named('POST /queue/:queue_id/push');
    expect(server.kind).toBe(SpanKind.SERVER);
    expect(server.spanContext().traceId).toBe(TRACE_ID);
    expect(server.parentSpanContext?.spanId).toBe(PUSH_SPAN);
    expect(server.attributes).toMatchObject({
      'pushpop.queue_id': q,
      'pushpop.operation': 'push',
      'http.request.method': 'POST',
      'http.response.status_code': 200,
    });
    const [turn] = childrenOf(server);
    expect(turn.name).toBe('pushpop.turn');
    expect(turn.attributes).toMatchObject({ 'pushpop.queue_id': q, 'pushpop.turn.attempts': 1 });
    const [statement] = childrenOf(turn);
    expect(statement).toMatchObject({ name: 'SELECT pushpop_write_turn', kind: SpanKind.CLIENT });
    expect(statement.attributes).toMatchObject({ 'db.system.name': 'postgresql' });
  });

  it('a request without traceparent starts a trace of its own; routes that are not queue operations are not traced', async () => {
    const q = uniqueQueueId('tr-root');
    expect((await answer(svc.http.post(`/queue/${q}/pop`))).status).toBe(200);
    expect((await answer(svc.http.get('/health'))).status).toBe(200);
    await until(() => named('POST /queue/:queue_id/pop').length > 0, 5000);
    const [server] = named('POST /queue/:queue_id/pop');
    expect(server.parentSpanContext).toBeUndefined();
    expect(server.attributes).toMatchObject({ 'pushpop.operation': 'pop', 'pushpop.queue_id': q });
    expect(spans().filter((s) => String(s.attributes['http.route']).startsWith('/health'))).toEqual([]);
  });

  it("a pop's span links to the span contexts in the traceparent headers of the items it hands out", async () => {
    const q = uniqueQueueId('tr-pop');
    const other = `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`;
    await answer(
      svc.http
        .post(`/queue/${q}/push`)
        .set('traceparent', TRACEPARENT)
        .send({ item: { n: 1 } }),
    );
    await answer(svc.http.post(`/queue/${q}/push`).send({ item: { n: 2 } }));
    await answer(svc.http.post(`/queue/${q}/push`).send({ item: { n: 3 }, headers: { traceparent: other } }));
    exporter.reset();
    const res = await answer(svc.http.post(`/queue/${q}/pop?depth=10&require_ack=true`));
    expect(res.status).toBe(200);
    await until(() => named('POST /queue/:queue_id/pop').length > 0, 5000);
    const [server] = named('POST /queue/:queue_id/pop');
    expect(server.links.map((l) => [l.context.traceId, l.context.spanId])).toEqual([
      [TRACE_ID, PUSH_SPAN],
      ['a'.repeat(32), 'b'.repeat(16)],
    ]);
    expect(server.attributes).toMatchObject({ 'messaging.batch.message_count': 3 });
    // The pop's own trace is not the push's.
    expect(server.spanContext().traceId).not.toBe(TRACE_ID);
  });

  it('operations gathered into one turn each get a turn span in their own trace', async () => {
    const q = uniqueQueueId('tr-group');
    const parents = Array.from({ length: 8 }, (_, i) => `00-${String(i + 1).padStart(32, '0')}-${String(i + 1).padStart(16, '0')}-01`);
    const results = await Promise.all(parents.map((tp, i) => answer(svc.http.post(`/queue/${q}/push`).set('traceparent', tp).send({ item: { i } }))));
    expect(results.map((r) => r.status)).toEqual(parents.map(() => 200));
    await until(() => named('pushpop.turn').length >= parents.length, 5000);
    const servers = named('POST /queue/:queue_id/push');
    expect(servers.map((s) => s.spanContext().traceId).sort()).toEqual(parents.map((tp) => tp.split('-')[1]).sort());
    for (const server of servers) expect(childrenOf(server).map((s) => s.name)).toEqual(['pushpop.turn']);
  });
});

describe("tracing's process-wide registration", () => {
  it('a tracing that shut down gives up the globals (tracer provider, context, propagation), so the next one started takes them', async () => {
    const names = (exporter: InMemorySpanExporter) => exporter.getFinishedSpans().map((s) => s.name);
    const first = new InMemorySpanExporter();
    const second = new InMemorySpanExporter();
    const a = await startTracing({}, { spanProcessors: [new SimpleSpanProcessor(first)] });
    trace.getTracer('app').startSpan('one').end();
    expect(names(first)).toEqual(['one']);
    await a!.shutdown();
    const b = await startTracing({}, { spanProcessors: [new SimpleSpanProcessor(second)] });
    trace.getTracer('app').startSpan('two').end();
    expect(names(second)).toEqual(['two']);
    await b!.shutdown();
  });
});
