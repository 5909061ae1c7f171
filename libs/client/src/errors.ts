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

/**
 * Thrown by a consumer's handler to have its item given back after `delaySeconds` (the
 * release's `delay_seconds`, replacing the queue's retry delay for that release). Any error with
 * a numeric `delaySeconds` property does the same.
 */
export class RetryLater extends Error {
  override readonly name = 'RetryLater';
  constructor(
    readonly delaySeconds: number,
    message = `retry in ${delaySeconds} s`,
  ) {
    super(message);
  }
}

/** True for an error the service answered with `errorCode` (or one of `codes`). */
export function isPushpopError(error: unknown, ...codes: string[]): error is PushpopError {
  return error instanceof PushpopError && (codes.length === 0 || codes.includes(error.errorCode));
}
