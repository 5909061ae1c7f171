import { ArgumentsHost, Catch, ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { Response } from 'express';
import { PushpopError, StoreUnavailableError } from './errors.js';

const STATUS_CODES: Record<number, string> = {
  400: 'BAD_REQUEST',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  429: 'TOO_MANY_REQUESTS',
};

/** Error codes of the pg driver and PostgreSQL that mean "the store is not reachable right now". */
const UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', '57P01', '57P02', '57P03', '53300', '08000', '08003', '08006', '08001', '08004']);

function isStoreUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && UNAVAILABLE_CODES.has(code)) return true;
  return /Connection terminated|timeout exceeded when trying to connect|Cannot use a pool after calling end|Client has encountered a connection error/i.test(
    error.message,
  );
}

/**
 * The one place error bodies are built: domain errors, Nest's HTTP exceptions (unknown routes,
 * body-parser failures), store outages and anything unexpected all leave as the contract's
 * `{statusCode, error_code, message}`. Never a stack trace or SQL text in a response.
 */
@Catch()
export class AllExceptionsFilter implements ExceptionFilter {
  private readonly logger = new Logger('HTTP');

  catch(exception: unknown, host: ArgumentsHost): void {
    const response = host.switchToHttp().getResponse<Response>();
    const error = this.toPushpopError(exception);
    if (exception instanceof PushpopError && error.status >= 500) {
      // An expected condition the service names itself (store unavailable, admin not built).
      this.logger.warn(`${error.status} ${error.errorCode}: ${error.message}`);
    } else if (error.status >= 500) {
      const detail = exception instanceof Error ? (exception.stack ?? exception.message) : String(exception);
      this.logger.error(`${error.status} ${error.errorCode}: ${detail}`);
    }
    if (response.headersSent) return;
    for (const [name, value] of Object.entries(error.headers)) response.setHeader(name, value);
    response.status(error.status).json({ statusCode: error.status, error_code: error.errorCode, message: error.message, ...error.extra });
  }

  private toPushpopError(exception: unknown): PushpopError {
    if (exception instanceof PushpopError) return exception;
    const bodyError = bodyParserError(exception);
    if (bodyError) return bodyError;
    if (exception instanceof HttpException) {
      const status = exception.getStatus();
      const body = exception.getResponse();
      const message = typeof body === 'object' && body !== null && 'message' in body ? String((body).message) : exception.message;
      if (status === 503) return new PushpopError(503, 'SERVICE_UNAVAILABLE', 'Service unavailable', typeof body === 'object' && body !== null ? { details: body } : {});
      return new PushpopError(status, STATUS_CODES[status] ?? (status >= 500 ? 'INTERNAL_ERROR' : 'BAD_REQUEST'), message);
    }
    if (isStoreUnavailable(exception)) return new StoreUnavailableError();
    return new PushpopError(500, 'INTERNAL_ERROR', 'Internal server error');
  }
}

/** body-parser errors carry `type` and `status`; Nest's adapter wraps them as the `cause`. */
function bodyParserError(exception: unknown): PushpopError | undefined {
  for (const candidate of [exception, (exception as { cause?: unknown } | undefined)?.cause]) {
    const e = candidate as { type?: unknown; status?: unknown } | undefined;
    if (!e || typeof e.type !== 'string' || typeof e.status !== 'number' || e.status >= 500) continue;
    if (e.type === 'entity.too.large') return new PushpopError(413, 'PAYLOAD_TOO_LARGE', 'request body is larger than the limit');
    if (e.type === 'entity.parse.failed') return new PushpopError(400, 'MALFORMED_JSON', 'request body is not valid JSON');
    if (e.type === 'encoding.unsupported' || e.type === 'charset.unsupported') return new PushpopError(415, 'UNSUPPORTED_MEDIA_TYPE', 'request body encoding is not supported');
  }
  return undefined;
}
