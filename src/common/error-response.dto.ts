/** The body of every error response. */
export class ErrorResponseDto {
  /** The HTTP status. */
  statusCode: number;
  /**
   * Stable machine-readable code, UPPER_SNAKE.
   * @example "VALIDATION_FAILED"
   */
  error_code: string;
  /** For people. */
  message: string;
}
