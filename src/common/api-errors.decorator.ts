import { applyDecorators, Type } from '@nestjs/common';
import { ApiExtraModels, ApiResponse, getSchemaPath, type HeaderObject, type SchemaObject } from '@nestjs/swagger';
import { errorCodeInfo, type ErrorCode, type ErrorHeader } from './error-codes.js';
import { ErrorResponseDto, LockErrorResponseDto, QueueLockedResponseDto, ServiceUnavailableResponseDto } from './error-response.dto.js';

/** Error codes by HTTP status, as an operation can answer them. */
export type ErrorCodes = Partial<Record<number, readonly ErrorCode[]>>;

/**
 * What every operation behind an API key answers once keys or rate limits are configured:
 * 401 without a (known) key, 403 without the scope, 429 over the rate limit.
 */
export const AUTH_ERRORS = { 401: ['UNAUTHORIZED'], 403: ['FORBIDDEN'], 429: ['RATE_LIMITED'] } as const satisfies ErrorCodes;

/** Merges sets of error codes, status by status, each code once, in the order given. */
export function mergeErrors(...sets: ErrorCodes[]): ErrorCodes {
  const out: Record<number, ErrorCode[]> = {};
  for (const set of sets) {
    for (const [status, codes] of Object.entries(set)) out[Number(status)] = [...new Set([...(out[Number(status)] ?? []), ...(codes ?? [])])];
  }
  return out;
}

/** What every operation on one queue (`{queue_id}` in the path, run as a turn of the queue's actor) can answer besides its own errors. */
export const COMMON_QUEUE_ERRORS: ErrorCodes = mergeErrors(
  { 400: ['INVALID_QUEUE_ID', 'VALIDATION_FAILED'], 429: ['QUEUE_BUSY'], 503: ['STORE_UNAVAILABLE'] },
  AUTH_ERRORS,
);

/** What the operations that take a JSON body can answer about it. */
export const BODY_ERRORS: ErrorCodes = { 400: ['MALFORMED_JSON'], 413: ['PAYLOAD_TOO_LARGE'], 415: ['UNSUPPORTED_MEDIA_TYPE'] };

/** Response headers of error answers, as the OpenAPI document describes them. */
const HEADERS: Record<ErrorHeader, HeaderObject> = {
  'Retry-After': { description: 'Seconds to wait before retrying', schema: { type: 'integer', minimum: 1 } },
  'WWW-Authenticate': {
    description: 'How to authenticate: `Bearer` (send `Authorization: Bearer <key>`, or `X-API-Key: <key>`)',
    schema: { type: 'string', example: 'Bearer' },
  },
  'RateLimit-Limit': {
    description: "With `RATE_LIMITED` (and on every answer to a rate-limited client): the size of the client's quota (`RATE_LIMIT_BURST`)",
    schema: { type: 'integer' },
  },
  'RateLimit-Remaining': {
    description: 'With `RATE_LIMITED` (and on every answer to a rate-limited client): requests left in the quota now',
    schema: { type: 'integer' },
  },
  'RateLimit-Reset': {
    description: 'With `RATE_LIMITED` (and on every answer to a rate-limited client): seconds until the quota is full again',
    schema: { type: 'integer' },
  },
  Allow: { description: 'The methods the path takes', schema: { type: 'string', example: 'POST' } },
  'Accept-Encoding': {
    description: 'With a content coding the service does not read: the ones it does',
    schema: { type: 'string', example: 'gzip, deflate, br' },
  },
};

/** The codes whose body carries more than `statusCode`, `error_code` and `message`; the others have {@link ErrorResponseDto}. */
const BODIES: Partial<Record<ErrorCode, Type<ErrorResponseDto>>> = {
  LOCK_ID_REQUIRED: LockErrorResponseDto,
  INVALID_LOCK_ID: LockErrorResponseDto,
  LOCK_NOT_FOUND: LockErrorResponseDto,
  LOCK_EXPIRED: LockErrorResponseDto,
  QUEUE_LOCKED: QueueLockedResponseDto,
  SERVICE_UNAVAILABLE: ServiceUnavailableResponseDto,
};

/** The error body of `codes` answered with one status: the body's schema with `error_code` restricted to them. */
function restricted(body: Type<ErrorResponseDto>, codes: ErrorCode[]): SchemaObject {
  return { allOf: [{ $ref: getSchemaPath(body) }, { type: 'object', properties: { error_code: { type: 'string', enum: codes } } }] };
}

/**
 * The schema of one status's error answers: a single restricted body, or, where codes with
 * different bodies share the status (acknowledge's 400: `INVALID_LOCK_ID` carries `success`,
 * `VALIDATION_FAILED` does not), one of them per body, told apart by `error_code`.
 */
function schemaOf(codes: readonly ErrorCode[]): SchemaObject {
  const byBody = new Map<Type<ErrorResponseDto>, ErrorCode[]>();
  for (const code of codes) {
    const body = BODIES[code] ?? ErrorResponseDto;
    byBody.set(body, [...(byBody.get(body) ?? []), code]);
  }
  const schemas = [...byBody].map(([body, list]) => restricted(body, list));
  return schemas.length === 1 ? schemas[0] : { oneOf: schemas };
}

/** The example answer of `code` with `status`, as the service sends it. */
export function errorExample(status: number, code: ErrorCode): Record<string, unknown> {
  const info = errorCodeInfo(code);
  return { statusCode: status, error_code: code, message: info.message, ...info.extra };
}

/**
 * Documents an operation's error answers from sets of codes by status (merged): per status,
 * the error body with `error_code` restricted to the codes it can carry, a description listing
 * them with their meaning, one named example per code, and the headers they come with
 * (`Retry-After`, `WWW-Authenticate`, `RateLimit-*`).
 *
 * @throws Error at startup when a code is listed under a status `ERROR_CODES` does not give it
 */
export function ApiErrors(...sets: ErrorCodes[]): MethodDecorator {
  const all = mergeErrors(...sets);
  return applyDecorators(
    ApiExtraModels(ErrorResponseDto, ...new Set(Object.values(BODIES))),
    ...Object.entries(all).map(([key, codes = []]) => {
      const status = Number(key);
      for (const code of codes) {
        if (!errorCodeInfo(code).statuses.includes(status)) throw new Error(`ApiErrors: ${code} is not answered with ${status}`);
      }
      const headers = [...new Set(codes.flatMap((code) => errorCodeInfo(code).headers ?? []))];
      return ApiResponse({
        status,
        description: codes.map((code) => `- \`${code}\`: ${errorCodeInfo(code).meaning}`).join('\n'),
        // Replaces a schema another decorator gave the status (terminus documents its own 503 body).
        schema: undefined,
        // Error bodies are JSON whatever the operation produces (`/metrics` answers text).
        content: {
          'application/json': {
            schema: schemaOf(codes),
            examples: Object.fromEntries(codes.map((code) => [code, { summary: code, value: errorExample(status, code) }])),
          },
        },
        ...(headers.length > 0 ? { headers: Object.fromEntries(headers.map((name) => [name, HEADERS[name]])) } : {}),
      });
    }),
  );
}
