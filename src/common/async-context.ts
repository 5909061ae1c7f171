import { AsyncResource } from 'node:async_hooks';

/** Runs a function in the async context captured by {@link captureAsyncContext}. */
export type AsyncContext = <R>(fn: () => R) => R;

/**
 * The caller's async context (every `AsyncLocalStorage` store: a request's trace span, say), to
 * run a function in later from another context: an operation that waited in a queue's line runs
 * its turn in its own caller's context.
 *
 * An `AsyncResource` of its own, not `AsyncLocalStorage.snapshot()`: on Node 20 a snapshot binds
 * a function and defines a deprecated property on it each time, which cost 2–4% of the service's
 * CPU on pushes that joined a busy queue's line.
 */
export function captureAsyncContext(): AsyncContext {
  const resource = new AsyncResource('PushpopQueueTurn');
  return (fn) => resource.runInAsyncScope(fn);
}
