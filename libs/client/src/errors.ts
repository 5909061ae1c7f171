/**
 * What the service answered instead of a 2xx, or why no answer came: one class for every
 * failure of a {@link PushpopClient} call, so callers branch on `errorCode` (the contract's
 * stable `error_code`) or `status` rather than on messages.
 */
export class PushpopError extends Error {
  override readonly name = 'PushpopError';
  /**
   * @param status - the HTTP status, or 0 when no answer came (network failure, timeout)
   * @param errorCode - the service's `error_code` (`QUEUE_LOCKED`, `LOCK_EXPIRED`, ...), or
   *   `NETWORK_ERROR` / `TIMEOUT` / `ABORTED` when no answer came
   * @param body - the whole error body, with endpoint-specific fields such as `lock_expires_at`
   */
  constructor(
    message: string,
    readonly status: number,
    readonly errorCode: string,
    readonly body?: Record<string, unknown>,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  /** The contract's snake_case name for {@link errorCode}. */
  get error_code(): string {
    return this.errorCode;
  }
}

/** The longest delay a release takes (`delay_seconds` of the contract's release: 0–900). */
export const MAX_RETRY_DELAY_SECONDS = 900;

/** Whether `seconds` is a delay the service takes on a release: an integer 0–900. */
export function isRetryDelay(seconds: unknown): seconds is number {
  return typeof seconds === 'number' && Number.isInteger(seconds) && seconds >= 0 && seconds <= MAX_RETRY_DELAY_SECONDS;
}

/**
 * Thrown by a consumer's handler to have its item given back after `delaySeconds` (the
 * release's `delay_seconds`, replacing the queue's retry delay and the consumer's backoff for
 * that release). Like any failure it counts as an attempt.
 *
 * @throws RangeError where it is made, when `delaySeconds` is not a whole number of seconds
 *   from 0 to 900 (the contract's range: `RetryLater(1.5)`, `RetryLater(60_000)` in
 *   milliseconds, `RetryLater(3600)` are refused there rather than becoming another delay).
 */
export class RetryLater extends Error {
  override readonly name = 'RetryLater';
  constructor(
    readonly delaySeconds: number,
    message?: string,
  ) {
    super(checkedRetryMessage(delaySeconds, message));
  }
}

function checkedRetryMessage(delaySeconds: number, message: string | undefined): string {
  if (!isRetryDelay(delaySeconds)) {
    throw new RangeError(
      `RetryLater(${String(delaySeconds)}): the delay is a whole number of seconds from 0 to ${MAX_RETRY_DELAY_SECONDS} (not milliseconds); for a longer wait, push the item again with delaySeconds`,
    );
  }
  return message ?? `retry in ${delaySeconds} s`;
}

/**
 * Thrown by a consumer's handler for an item that no retry will fix (bad data, a permanent
 * refusal downstream): the consumer dead-letters it at once instead of retrying it, when the
 * queue has a dead-letter queue (see the Consumer's failure rules).
 */
export class UnrecoverableError extends Error {
  override readonly name = 'UnrecoverableError';
}

/** True for an error the service answered with `errorCode` (or one of `codes`). */
export function isPushpopError(error: unknown, ...codes: string[]): error is PushpopError {
  return error instanceof PushpopError && (codes.length === 0 || codes.includes(error.errorCode));
}
