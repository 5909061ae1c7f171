/**
 * Thrown (as a rejection of {@link KeyedMutex.run}) when a key already has
 * `maxWaiters` callers waiting behind its current holder. The call is rejected
 * immediately and never enqueued, so it has no side effects on the key.
 *
 * The service maps this error to HTTP 429 `QUEUE_BUSY`.
 */
export class KeyedMutexBusyError extends Error {
  override readonly name = 'KeyedMutexBusyError';

  /**
   * @param key - The key whose waiter queue is full.
   * @param maxWaiters - The configured `maxWaitersPerKey` bound that was hit.
   */
  constructor(
    /** The key whose waiter queue is full. */
    readonly key: string,
    /** The configured `maxWaitersPerKey` bound that was hit. */
    readonly maxWaiters: number,
  ) {
    super(`Key "${key}" is busy: ${maxWaiters} caller(s) already waiting`);
  }
}
