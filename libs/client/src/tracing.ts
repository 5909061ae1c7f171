import { context, createContextKey, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';

/**
 * Trace context for the client, through the OpenTelemetry API only: without an SDK registered
 * in the process, every call here is a no-op (nothing is injected, the handler's span does not
 * record). With one (and its W3C propagator), a push carries the caller's trace and a
 * consumer's handler continues it.
 */
const tracer = trace.getTracer('@pushpop/client');

/** The active context's W3C `traceparent`, or undefined (no active span, or no SDK). */
export function activeTraceparent(): string | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent;
}

/** `headers` with the active context's `traceparent` added, unless they hold one or there is none. */
export function withActiveTraceparent(headers: Record<string, string> | undefined): Record<string, string> | undefined {
  if (headers?.traceparent !== undefined) return headers;
  const traceparent = activeTraceparent();
  return traceparent === undefined ? headers : { ...headers, traceparent };
}

/** A context that only a registered context manager makes active (the no-op one keeps the root context). */
const PROBE = ROOT_CONTEXT.setValue(createContextKey('@pushpop/client context probe'), true);
const probeIsActive = (): boolean => context.active() === PROBE;

/**
 * Whether an item's span could be seen: a tracer provider is registered (the span records), or a
 * context manager is (the handler would find the span, and the item's trace, in its context).
 * Without either, the span is a non-recording one that nothing can reach: it is not made.
 * Asked per item, so that an SDK registered after the consumer started is followed.
 */
function itemSpansSeen(): boolean {
  const provider = trace.getTracerProvider() as { getDelegateTracer?(name: string): unknown };
  // Not the API's proxy (another copy registered something else): assume it records.
  if (typeof provider.getDelegateTracer !== 'function') return true;
  return provider.getDelegateTracer('@pushpop/client') !== undefined || context.with(PROBE, probeIsActive);
}

/**
 * Runs a consumer's handler for one item, as {@link inItemSpan} does when a span could be seen;
 * otherwise calls it directly, and returns what it returned (a promise, or a value), or throws
 * what it threw.
 */
export function handleItem<M, R>(
  queueId: string,
  headers: Record<string, string>,
  deliveryCount: number,
  handler: (message: M) => R,
  message: M,
): R | Promise<R> {
  if (!itemSpansSeen()) return handler(message);
  return inItemSpan(queueId, headers, deliveryCount, async () => handler(message));
}

/**
 * Runs a consumer's handler for one item in a `process <queue>` span (kind consumer) whose
 * parent is the trace context of the item's `traceparent` header (the span that pushed it),
 * or the active context when it has none. A handler that throws marks the span as failed.
 */
export function inItemSpan<R>(queueId: string, headers: Record<string, string>, deliveryCount: number, handle: () => Promise<R>): Promise<R> {
  const parent = headers.traceparent !== undefined ? propagation.extract(context.active(), { traceparent: headers.traceparent }) : context.active();
  const attributes = {
    'messaging.system': 'pushpop',
    'messaging.operation.type': 'process',
    'messaging.destination.name': queueId,
    'pushpop.delivery_count': deliveryCount,
  };
  return tracer.startActiveSpan(`process ${queueId}`, { kind: SpanKind.CONSUMER, attributes }, parent, async (span) => {
    try {
      return await handle();
    } catch (error) {
      span.recordException(error instanceof Error ? error : String(error));
      span.setStatus({ code: SpanStatusCode.ERROR });
      throw error;
    } finally {
      span.end();
    }
  });
}
