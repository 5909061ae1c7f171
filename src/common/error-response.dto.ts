import { ApiProperty } from '@nestjs/swagger';
import { ERROR_CODE_NAMES, ERROR_CODES, type ErrorCode } from './error-codes.js';

/** The `ErrorCode` schema's description: every code with its statuses and meaning. */
const ERROR_CODE_DESCRIPTION = [
  'Every `error_code` the service answers. Codes are stable: clients branch on them. Each operation lists the codes it answers per status.',
  '',
  ...Object.entries(ERROR_CODES).map(([code, info]) => `- \`${code}\` (${info.statuses.join(', ')}): ${info.meaning}`),
].join('\n');

/** The body of every error response. */
export class ErrorResponseDto {
  /** The HTTP status. */
  @ApiProperty({ type: 'integer', minimum: 400, maximum: 599 })
  statusCode: number;
  /** Stable machine-readable code, UPPER_SNAKE; clients branch on it. */
  @ApiProperty({ enum: ERROR_CODE_NAMES, enumName: 'ErrorCode', enumSchema: { description: ERROR_CODE_DESCRIPTION } })
  error_code: ErrorCode;
  /** For people. */
  message: string;
}

/** Lock errors of acknowledge, extend-lock and release also carry `success: false`. */
export class LockErrorResponseDto extends ErrorResponseDto {
  /** Always false. */
  success: boolean;
}

/** 423: the queue is locked pending acknowledgement. */
export class QueueLockedResponseDto extends ErrorResponseDto {
  /** When the lock expires, unix seconds. */
  lock_expires_at: number;
}

/** 503 of `GET /health/ready`: the database does not answer. */
export class ServiceUnavailableResponseDto extends ErrorResponseDto {
  /** The health check's result: `status: "error"` and, per indicator (`database`), its status and message. */
  @ApiProperty({ type: 'object', additionalProperties: true })
  details: Record<string, unknown>;
}
