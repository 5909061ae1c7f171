import { context, type Context, type ContextManager, propagation, ROOT_CONTEXT, trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import { handleItem } from './tracing.js';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const headers = { traceparent: `00-${TRACE_ID}-00f067aa0ba902b7-01` };

/** A context manager for synchronous code: enough for a handler that reads its context before it returns. */
class StackContextManager implements ContextManager {
  private stack: Context[] = [];
  active(): Context {
    return this.stack.at(-1) ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(ctx: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F> {
    this.stack.push(ctx);
    try {
      return fn.call(thisArg, ...args);
    } finally {
      this.stack.pop();
    }
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.stack = [];
    return this;
  }
}

describe('handleItem', () => {
  // Not `trace.disable()`: it replaces the API's proxy provider, and the client's tracer (taken
  // from the first one when the module loaded) would never see a provider registered after it.
  afterEach(() => {
    context.disable();
    propagation.disable();
  });

  it('without a tracer provider or a context manager: calls the handler directly, and returns or throws what it did', () => {
    const answer = { sync: true };
    expect(handleItem('q', headers, 1, () => answer, undefined)).toBe(answer);
    const boom = new Error('boom');
    expect(() =>
      handleItem(
        'q',
        headers,
        1,
        () => {
          throw boom;
        },
        undefined,
      ),
    ).toThrow(boom);
  });

  it("with a context manager alone: the handler runs in the span of the item's traceparent", async () => {
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    context.setGlobalContextManager(new StackContextManager());
    let traceId: string | undefined;
    await handleItem('q', headers, 1, () => void (traceId = trace.getActiveSpan()?.spanContext().traceId), undefined);
    expect(traceId).toBe(TRACE_ID);
  });

  // Last: it registers a tracer provider, which only `trace.disable()` removes.
  it('with a tracer provider registered after the first item: the next item gets its recorded `process` span', async () => {
    await handleItem('q', headers, 1, () => undefined, undefined);
    const exporter = new InMemorySpanExporter();
    trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
    try {
      await handleItem('q', headers, 2, () => undefined, undefined);
      expect(exporter.getFinishedSpans().map((s) => [s.name, s.attributes['pushpop.delivery_count']])).toEqual([['process q', 2]]);
    } finally {
      trace.disable();
    }
  });
});
