import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { onRequestHookHandler } from 'fastify';

/** The header that carries a request's id, both ways. */
export const REQUEST_ID_HEADER = 'X-Request-Id';

/**
 * A request id a caller may choose: 1 to 128 characters that cannot break a log line or a header
 * (letters, digits and `._~:/+=@-`), which covers UUIDs, hex ids and most tracing ids.
 */
const ACCEPTED_REQUEST_ID = /^[A-Za-z0-9._~:/+=@-]{1,128}$/;

/**
 * Fastify's `genReqId`: the caller's `X-Request-Id` when it is acceptable, else a new UUID.
 * Called once per request; a regular expression test or a `randomUUID`, nothing more.
 */
export function requestId(request: IncomingMessage): string {
  const sent = request.headers['x-request-id'];
  return typeof sent === 'string' && ACCEPTED_REQUEST_ID.test(sent) ? sent : randomUUID();
}

/**
 * Sends the request id back with every answer. An `onRequest` hook, added before the request
 * gate so that its refusals (401, 403, 429) carry the header too; the error filter sets it
 * for errors raised before any hook ran (a URL the router cannot decode).
 */
export const echoRequestId: onRequestHookHandler = (request, reply, done) => {
  reply.header(REQUEST_ID_HEADER, request.id);
  done();
};
