import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';

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
