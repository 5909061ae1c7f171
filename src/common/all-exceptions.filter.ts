import { STATUS_CODES } from 'node:http';
import { ArgumentsHost, Catch, ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { type ErrorCode, isErrorCode } from './error-codes.js';
import { PayloadTooLargeError, PushpopError, StoreUnavailableError } from './errors.js';
import { RequestLogLine, requestLogFields } from './logging.js';
import { REQUEST_ID_HEADER } from './request-id.js';
import { isConnectionFailure } from './store-errors.js';

/**
 * The error_code of a status the service does not name itself: its reason phrase where that is
 * one of the service's codes (404 NOT_FOUND, 405 METHOD_NOT_ALLOWED, ...), else BAD_REQUEST for
 * a 4xx and INTERNAL_ERROR for a 5xx, so that every answer carries a code from `ERROR_CODES`.
 */
export function genericErrorCode(status: number): ErrorCode {
  if (status >= 500) return 'INTERNAL_ERROR';
  const phrase = STATUS_CODES[status]?.toUpperCase().replace(/[^A-Z0-9]+/g, '_');
  return phrase !== undefined && isErrorCode(phrase) ? phrase : 'BAD_REQUEST';
}

/**
 * The one place error bodies are built: domain errors, Nest's HTTP exceptions (unknown routes),
 * Fastify's errors (body limit, bad URLs), store outages and anything unexpected all leave as the contract's
 * `{statusCode, error_code, message}`. Never a stack trace or SQL text in a response.
 */
@Catch()
export class AllExceptionsFilter implements ExceptionFilter {
  private readonly logger = new Logger('HTTP');

  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const reply = http.getResponse<FastifyReply>();
    const request = http.getRequest<FastifyRequest>();
    const error = this.toPushpopError(exception);
    if ((exception instanceof PushpopError || exception instanceof HttpException) && error.status >= 500) {
      // An expected condition the service names itself (store unavailable, admin not built, not ready).
      this.logger.warn(new RequestLogLine(`${error.status} ${error.errorCode}: ${error.message}`, requestLogFields(request)));
    } else if (error.status >= 500) {
      const detail = exception instanceof Error ? (exception.stack ?? exception.message) : String(exception);
      this.logger.error(new RequestLogLine(`${error.status} ${error.errorCode}: ${detail}`, requestLogFields(request)));
    }
    if (reply.sent || reply.raw.headersSent) return;
    reply
      .header(REQUEST_ID_HEADER, request.id)
      .headers(error.headers)
      .code(error.status)
      .type('application/json; charset=utf-8')
      .send({ statusCode: error.status, error_code: error.errorCode, message: error.message, ...error.extra });
  }

  private toPushpopError(exception: unknown): PushpopError {
    if (exception instanceof PushpopError) return exception;
    const fastifyError = fromFastify(exception);
    if (fastifyError) return fastifyError;
    if (exception instanceof HttpException) {
      const status = exception.getStatus();
      const body = exception.getResponse();
      const message = typeof body === 'object' && body !== null && 'message' in body ? String(body.message) : exception.message;
      if (status === 503)
        return new PushpopError(503, 'SERVICE_UNAVAILABLE', 'Service unavailable', typeof body === 'object' && body !== null ? { details: body } : {});
      return new PushpopError(status, genericErrorCode(status), message);
    }
    if (isConnectionFailure(exception)) return new StoreUnavailableError();
    return new PushpopError(500, 'INTERNAL_ERROR', 'Internal server error');
  }
}

/** Fastify's own errors (and its plugins') carry a `code` and a 4xx `statusCode`; their messages are for people. */
function fromFastify(exception: unknown): PushpopError | undefined {
  const e = exception as { code?: unknown; statusCode?: unknown; message?: unknown } | undefined;
  if (!e || typeof e.statusCode !== 'number' || e.statusCode < 400 || e.statusCode >= 500) return undefined;
  if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new PayloadTooLargeError();
  return new PushpopError(
    e.statusCode,
    genericErrorCode(e.statusCode),
    typeof e.message === 'string' && e.message ? e.message : (STATUS_CODES[e.statusCode] ?? 'Bad request'),
  );
}
