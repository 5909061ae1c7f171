import { ApiProperty } from '@nestjs/swagger';

/** The body of every error response. */
export class ErrorResponseDto {
  /** The HTTP status. */
  @ApiProperty({ type: 'integer' })
  statusCode: number;
  /**
   * Stable machine-readable code, UPPER_SNAKE; clients branch on it.
   * @example "VALIDATION_FAILED"
   */
  error_code: string;
  /** For people. */
  message: string;
}

/** Errors of acknowledge, extend-lock and release also carry `success: false`. */
export class LockErrorResponseDto extends ErrorResponseDto {
  /** Always false. */
  success: boolean;
}

/** 423: the queue is locked pending acknowledgement. */
export class QueueLockedResponseDto extends ErrorResponseDto {
  /** When the lock expires, unix seconds. */
  lock_expires_at: number;
}
