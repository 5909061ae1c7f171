import type { ErrorCode } from './error-codes.js';

/**
 * Domain errors: services throw these, one global filter turns them into the contract's error
 * body (`statusCode`, `error_code`, `message`, plus `extra` fields). `error_code` values are
 * stable: clients branch on them, and each one is listed, with its statuses, in `ERROR_CODES`.
 */
export class PushpopError extends Error {
  constructor(
    readonly status: number,
    readonly errorCode: ErrorCode,
    message: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export class ValidationFailedError extends PushpopError {
  constructor(message: string) {
    super(400, 'VALIDATION_FAILED', message);
  }
}

export class InvalidQueueIdError extends PushpopError {
  constructor() {
    super(400, 'INVALID_QUEUE_ID', 'queue id must be 1-200 characters of A-Z a-z 0-9 . _ : @ -, and not . or ..');
  }
}

export class InvalidScheduleIdError extends PushpopError {
  constructor() {
    super(400, 'INVALID_SCHEDULE_ID', 'schedule id must be 1-200 characters of A-Z a-z 0-9 . _ : @ -, and not . or ..');
  }
}

export class ScheduleNotFoundError extends PushpopError {
  constructor(scheduleId: string) {
    super(404, 'SCHEDULE_NOT_FOUND', `Schedule ${scheduleId} not found`);
  }
}

export class ItemTooLargeError extends PushpopError {
  constructor(size: number, limit: number) {
    super(413, 'ITEM_TOO_LARGE', `item is ${size} bytes of JSON, more than the limit of ${limit}`);
  }
}

export class ItemTooDeepError extends PushpopError {
  constructor(limit: number) {
    super(400, 'ITEM_TOO_DEEP', `item nests deeper than ${limit} levels`);
  }
}

export class QueueNotFoundError extends PushpopError {
  constructor(queueId: string) {
    super(404, 'QUEUE_NOT_FOUND', `Queue ${queueId} not found`);
  }
}

export class StateKeyNotFoundError extends PushpopError {
  constructor(key: string) {
    super(404, 'STATE_KEY_NOT_FOUND', `Nothing is stored under state key ${key}`);
  }
}

export class QueueBusyError extends PushpopError {
  constructor(queueId: string) {
    super(429, 'QUEUE_BUSY', `Too many operations are waiting on queue ${queueId}; retry shortly`, {}, { 'Retry-After': '1' });
  }
}

/** A pop with ack on a shared queue that already has `MAX_LOCKS_PER_QUEUE` live locks. */
export class TooManyLocksError extends PushpopError {
  constructor(queueId: string, max: number) {
    super(
      429,
      'QUEUE_BUSY',
      `Queue ${queueId} has ${max} live locks, the most it may have; acknowledge or release some, or retry shortly`,
      {},
      { 'Retry-After': '1' },
    );
  }
}

/** A change of the segment layout of a queue that holds items, delayed items or locks. */
export class QueueNotEmptyError extends PushpopError {
  constructor(queueId: string) {
    super(409, 'QUEUE_NOT_EMPTY', `segment_size and buffer_segments of queue ${queueId} change only while it holds no items and no lock`);
  }
}

/** A change of lock mode while a lock lives; `lock_expires_at`: when the (earliest) live lock expires at the latest. */
export class LockModeChangeError extends PushpopError {
  constructor(queueId: string, expiresAt: number | null) {
    super(409, 'QUEUE_LOCKED', `The lock mode of queue ${queueId} changes only while no lock lives`, {
      lock_expires_at: expiresAt === null ? null : expiresAt / 1000,
    });
  }
}

/** The client sent more than its rate limit allows (RATE_LIMIT_PER_SECOND, RATE_LIMIT_BURST); `Retry-After` says when the next request gets through. */
export class RateLimitedError extends PushpopError {
  constructor(retryAfterSeconds: number, ratePerSecond: number, burst: number) {
    super(
      429,
      'RATE_LIMITED',
      `Rate limit exceeded (${ratePerSecond} requests per second, bursts of ${burst}); retry in ${retryAfterSeconds} s`,
      {},
      { 'Retry-After': String(retryAfterSeconds) },
    );
  }
}

export class StoreUnavailableError extends PushpopError {
  /** @param cause - the driver's error, for the log (never shown to the client) */
  constructor(cause?: unknown) {
    super(503, 'STORE_UNAVAILABLE', 'The database is unavailable; retry shortly', {}, { 'Retry-After': '2' });
    if (cause !== undefined) this.cause = cause;
  }
}

/** A segment needed now could not be loaded back from the offload store; nothing was changed. */
export class SegmentUnavailableError extends PushpopError {
  constructor(queueId: string, priority: number, segment: number) {
    super(
      503,
      'STORE_UNAVAILABLE',
      `Segment ${segment} of priority ${priority} of queue ${queueId} is in the offload store, which is unavailable; retry shortly`,
      {},
      { 'Retry-After': '2' },
    );
  }
}

/** Errors of the lock endpoints carry `success: false`, as the contract's acknowledge table shows. */
export abstract class LockError extends PushpopError {
  constructor(status: number, errorCode: ErrorCode, message: string) {
    super(status, errorCode, message, { success: false });
  }
}

export class LockIdRequiredError extends LockError {
  constructor() {
    super(400, 'LOCK_ID_REQUIRED', 'lock_id is required');
  }
}

export class LockNotFoundError extends LockError {
  constructor() {
    super(404, 'LOCK_NOT_FOUND', 'No active lock found');
  }
}

export class LockExpiredError extends LockError {
  constructor() {
    super(410, 'LOCK_EXPIRED', 'Lock has expired');
  }
}

export class InvalidLockIdError extends LockError {
  constructor() {
    super(400, 'INVALID_LOCK_ID', 'Invalid lock_id');
  }
}

/** A release with `dead_letter` on a queue without a `dead_letter_queue`; the lock stays. */
export class NoDeadLetterQueueError extends LockError {
  constructor() {
    super(409, 'NO_DEAD_LETTER_QUEUE', 'The queue has no dead_letter_queue; the lock stays');
  }
}

export class QueueLockedError extends PushpopError {
  constructor(expiresAt: number) {
    super(423, 'QUEUE_LOCKED', 'Queue is locked pending acknowledgement', { lock_expires_at: expiresAt / 1000 });
  }
}

/** The request body is not JSON (or, outside an item, not a JSON object or array). */
export class MalformedJsonError extends PushpopError {
  constructor(message = 'request body is not valid JSON') {
    super(400, 'MALFORMED_JSON', message);
  }
}

export class PayloadTooLargeError extends PushpopError {
  constructor() {
    super(413, 'PAYLOAD_TOO_LARGE', 'request body is larger than the limit');
  }
}

export class UnsupportedMediaTypeError extends PushpopError {
  constructor(message: string, headers: Record<string, string> = {}) {
    super(415, 'UNSUPPORTED_MEDIA_TYPE', message, {}, headers);
  }
}

/** A known path asked with a method it does not take; `Allow` lists the ones it does. */
export class MethodNotAllowedError extends PushpopError {
  constructor(method: string, allowed: string[]) {
    super(405, 'METHOD_NOT_ALLOWED', `${method} is not allowed here; use ${allowed.join(' or ')}`, {}, { Allow: allowed.join(', ') });
  }
}

/** No API key, or one the service does not know (keys are configured). */
export class UnauthorizedError extends PushpopError {
  constructor(message: string) {
    super(401, 'UNAUTHORIZED', message, {}, { 'WWW-Authenticate': 'Bearer realm="pushpop"' });
  }
}

/** A known API key without the scope the route needs. */
export class ForbiddenError extends PushpopError {
  constructor(keyName: string, needs: readonly string[]) {
    super(
      403,
      'FORBIDDEN',
      `API key ${keyName} may not do this: it needs the scope ${[...needs, 'admin'].filter((s, i, all) => all.indexOf(s) === i).join(' or ')}`,
    );
  }
}
