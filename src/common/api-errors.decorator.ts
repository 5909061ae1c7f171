import { applyDecorators, Type } from '@nestjs/common';
import { ApiExtraModels, ApiResponse, getSchemaPath } from '@nestjs/swagger';
import { ErrorResponseDto, LockErrorResponseDto, QueueLockedResponseDto } from './error-response.dto.js';

/** Error codes by HTTP status, as an endpoint can answer them. */
export type ErrorCodes = Partial<Record<number, string[]>>;

const RETRY_AFTER = { 'Retry-After': { description: 'Seconds to wait before retrying', schema: { type: 'integer' } } };

/** Errors every queue endpoint can answer besides its own. */
export const COMMON_QUEUE_ERRORS: ErrorCodes = {
  400: ['INVALID_QUEUE_ID', 'VALIDATION_FAILED'],
  429: ['QUEUE_BUSY'],
  503: ['STORE_UNAVAILABLE'],
};

function merge(...sets: ErrorCodes[]): ErrorCodes {
  const out: ErrorCodes = {};
  for (const set of sets) for (const [status, codes] of Object.entries(set)) out[Number(status)] = [...new Set([...(out[Number(status)] ?? []), ...codes!])];
  return out;
}

/**
 * Documents an endpoint's error answers: per status, the error body schema with `error_code`
 * restricted to the codes it can carry, and `Retry-After` on 429 and 503.
 */
export function ApiErrors(codes: ErrorCodes, body: Type<ErrorResponseDto> = ErrorResponseDto, options: { queueIdInPath?: boolean } = {}): MethodDecorator {
  const common = options.queueIdInPath === false ? { ...COMMON_QUEUE_ERRORS, 400: ['VALIDATION_FAILED'] } : COMMON_QUEUE_ERRORS;
  const all = merge(common, codes);
  return applyDecorators(
    ApiExtraModels(ErrorResponseDto, LockErrorResponseDto, QueueLockedResponseDto),
    ...Object.entries(all).map(([status, list]) => {
      const code = Number(status);
      const model = code === 423 ? QueueLockedResponseDto : body;
      return ApiResponse({
        status: code,
        description: list!.join(', '),
        schema: { allOf: [{ $ref: getSchemaPath(model) }, { type: 'object', properties: { error_code: { type: 'string', enum: list } } }] },
        ...(code === 429 || code === 503 ? { headers: RETRY_AFTER } : {}),
      });
    }),
  );
}
