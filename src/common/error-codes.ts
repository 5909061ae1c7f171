/** Response headers an error answer may carry; the OpenAPI document describes each. */
export type ErrorHeader = 'Retry-After' | 'WWW-Authenticate' | 'RateLimit-Limit' | 'RateLimit-Remaining' | 'RateLimit-Reset' | 'Allow' | 'Accept-Encoding';

/** What the service says about one `error_code`. */
export interface ErrorCodeInfo {
  /** The HTTP statuses it is answered with. */
  readonly statuses: readonly number[];
  /** When the service answers it, in one line (markdown). */
  readonly meaning: string;
  /** A message the service sends with it: the documentation's examples show it. */
  readonly message: string;
  /** Fields the body carries besides `statusCode`, `error_code` and `message`, with example values. */
  readonly extra?: Readonly<Record<string, unknown>>;
  /** Headers that come with it. */
  readonly headers?: readonly ErrorHeader[];
}

/** An example unix time in seconds, for the documentation. */
const EXAMPLE_EXPIRY = 1767225630.25;

/**
 * Every `error_code` the service can answer, with its statuses and meaning: the one list that
 * the OpenAPI document's shared `ErrorCode` schema, each operation's documented errors and the
 * README's table are checked against (`error-codes.spec.ts`, `test/e2e/openapi.test.ts`).
 * Codes are stable: clients branch on them. Ordered by status.
 */
export const ERROR_CODES = {
  VALIDATION_FAILED: {
    statuses: [400],
    meaning: 'A field or query parameter breaks its documented rule, an unknown body field, an item that is not a JSON object, or a `null` body',
    message: 'priority must not be less than 0',
  },
  INVALID_QUEUE_ID: {
    statuses: [400],
    meaning: 'The queue id is not 1-200 characters of `A-Z a-z 0-9 . _ : @ -`, or is `.` or `..`',
    message: 'queue id must be 1-200 characters of A-Z a-z 0-9 . _ : @ -, and not . or ..',
  },
  INVALID_SCHEDULE_ID: {
    statuses: [400],
    meaning: 'The schedule id is not 1-200 characters of `A-Z a-z 0-9 . _ : @ -`, or is `.` or `..` (the rules of a queue id)',
    message: 'schedule id must be 1-200 characters of A-Z a-z 0-9 . _ : @ -, and not . or ..',
  },
  ITEM_TOO_DEEP: {
    statuses: [400],
    meaning: 'An item nests deeper than 64 levels',
    message: 'item nests deeper than 64 levels',
  },
  MALFORMED_JSON: {
    statuses: [400],
    meaning: 'The body is not JSON, or is a bare string, number or boolean',
    message: 'request body is not valid JSON',
  },
  LOCK_ID_REQUIRED: {
    statuses: [400],
    meaning: 'Acknowledge, extend-lock or release without a `lock_id` (missing, empty or not a string)',
    message: 'lock_id is required',
    extra: { success: false },
  },
  INVALID_LOCK_ID: {
    statuses: [400],
    meaning: "The `lock_id` is not the queue's current lock; the lock stays",
    message: 'Invalid lock_id',
    extra: { success: false },
  },
  BAD_REQUEST: {
    statuses: [400],
    meaning:
      'A request refused before it reaches an operation, such as a URL that cannot be decoded; also any other 4xx status the service has no code of its own for',
    message: "'/queue/%E0%A4%A/push' is not a valid url component",
  },
  UNAUTHORIZED: {
    statuses: [401],
    meaning: 'API keys are configured and the request carries none, or an unknown one; `WWW-Authenticate: Bearer` says how to send one',
    message: 'An API key is required: send Authorization: Bearer <key> or X-API-Key: <key>',
    headers: ['WWW-Authenticate'],
  },
  FORBIDDEN: {
    statuses: [403],
    meaning: "API keys are configured and the request's key lacks the scope the operation needs",
    message: 'API key billing may not do this: it needs the scope consume or admin',
  },
  QUEUE_NOT_FOUND: {
    statuses: [404],
    meaning: 'The queue does not exist',
    message: 'Queue orders not found',
  },
  STATE_KEY_NOT_FOUND: {
    statuses: [404],
    meaning: 'Nothing is stored under that state key',
    message: 'Nothing is stored under state key queue_0_seg_7',
  },
  SCHEDULE_NOT_FOUND: {
    statuses: [404],
    meaning: 'No schedule with that id',
    message: 'Schedule nightly-report not found',
  },
  LOCK_NOT_FOUND: {
    statuses: [404],
    meaning: 'The queue has no lock; in shared lock mode, no lock with that id (also once it was acknowledged or released)',
    message: 'No active lock found',
    extra: { success: false },
  },
  NOT_FOUND: {
    statuses: [404],
    meaning: 'No such path',
    message: 'Cannot GET /queue/orders/peek',
  },
  METHOD_NOT_ALLOWED: {
    statuses: [405],
    meaning: 'A known path asked with a method it does not take; `Allow` lists the methods it does',
    message: 'GET is not allowed here; use POST',
    headers: ['Allow'],
  },
  LOCK_EXPIRED: {
    statuses: [410],
    meaning: 'The lock has expired; its items are back in the queue',
    message: 'Lock has expired',
    extra: { success: false },
  },
  ITEM_TOO_LARGE: {
    statuses: [413],
    meaning: 'An item is more than `MAX_ITEM_BYTES` of JSON',
    message: 'item is 300000 bytes of JSON, more than the limit of 262144',
  },
  PAYLOAD_TOO_LARGE: {
    statuses: [413],
    meaning: 'The request body is more than `MAX_BODY_BYTES` (decompressed)',
    message: 'request body is larger than the limit',
  },
  UNSUPPORTED_MEDIA_TYPE: {
    statuses: [415],
    meaning: 'A body that is not JSON in UTF-8, or in a content coding other than gzip, deflate or br, on an operation that takes one',
    message: 'content type text/plain is not supported; send application/json',
    headers: ['Accept-Encoding'],
  },
  QUEUE_NOT_EMPTY: {
    statuses: [409],
    meaning: 'A change of `segment_size` or `buffer_segments` while the queue holds items, delayed items or a lock',
    message: 'segment_size and buffer_segments of queue orders change only while it holds no items and no lock',
  },
  NO_DEAD_LETTER_QUEUE: {
    statuses: [409],
    meaning: 'A release with `dead_letter: true` on a queue without a `dead_letter_queue`; the lock stays',
    message: 'The queue has no dead_letter_queue; the lock stays',
    extra: { success: false },
  },
  QUEUE_LOCKED: {
    statuses: [409, 423],
    meaning:
      'A pop on an exclusive queue while an unexpired lock holds it (423, `lock_expires_at` says until when); a change of `lock_mode` while a lock lives (409)',
    message: 'Queue is locked pending acknowledgement',
    extra: { lock_expires_at: EXAMPLE_EXPIRY },
  },
  QUEUE_BUSY: {
    statuses: [429],
    meaning:
      'More than `MAX_PENDING_PER_QUEUE` operations wait on the queue, or a pop with ack on a shared queue with `MAX_LOCKS_PER_QUEUE` live locks; retry after `Retry-After`',
    message: 'Too many operations are waiting on queue orders; retry shortly',
    headers: ['Retry-After'],
  },
  RATE_LIMITED: {
    statuses: [429],
    meaning: 'Rate limiting is configured and the API key (or, without keys, the client address) is over its limit; retry after `Retry-After`',
    message: 'Rate limit exceeded (10 requests per second, bursts of 20); retry in 1 s',
    headers: ['Retry-After', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'],
  },
  INTERNAL_ERROR: {
    statuses: [500],
    meaning: 'An unexpected fault of the service; it is logged, and the answer carries no detail',
    message: 'Internal server error',
  },
  STORE_UNAVAILABLE: {
    statuses: [503],
    meaning: 'The database, or a segment in the offload store, cannot be reached now; retry after `Retry-After`',
    message: 'The database is unavailable; retry shortly',
    headers: ['Retry-After'],
  },
  SERVICE_UNAVAILABLE: {
    statuses: [503],
    meaning: '`GET /health/ready`: the database does not answer; `details` holds the health check',
    message: 'Service unavailable',
    extra: {
      details: {
        status: 'error',
        info: {},
        error: { database: { status: 'down', message: 'the database is starting' } },
        details: { database: { status: 'down', message: 'the database is starting' } },
      },
    },
  },
  ADMIN_NOT_BUILT: {
    statuses: [503],
    meaning: '`/admin/` was asked for, but the admin console has not been built (`npm run build`)',
    message: 'run npm run build',
  },
} as const satisfies Record<string, ErrorCodeInfo>;

/** A stable `error_code` of the service. */
export type ErrorCode = keyof typeof ERROR_CODES;

/** Every error code, in the order of {@link ERROR_CODES}. */
export const ERROR_CODE_NAMES = Object.keys(ERROR_CODES) as ErrorCode[];

export function isErrorCode(value: string): value is ErrorCode {
  return Object.hasOwn(ERROR_CODES, value);
}

/** What the service says about `code`. */
export function errorCodeInfo(code: ErrorCode): ErrorCodeInfo {
  return ERROR_CODES[code];
}
