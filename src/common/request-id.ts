import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { OpenAPIObject } from '@nestjs/swagger';
import type { onRequestHookHandler } from 'fastify';

/** The header that carries a request's id, both ways. */
export const REQUEST_ID_HEADER = 'X-Request-Id';

/**
 * A request id a caller may choose: 1 to 128 characters that cannot break a log line or a header
 * (letters, digits and `._~:/+=@-`), which covers UUIDs, hex ids and most tracing ids.
 */
const ACCEPTED_REQUEST_ID = /^[A-Za-z0-9._~:/+=@-]{1,128}$/;

/** Names of the header in the OpenAPI document's `components.parameters` and `components.headers`. */
const REQUEST_ID_COMPONENT = 'RequestId';

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

/**
 * Declares the request id in an OpenAPI document: every operation takes it (optional) and every
 * answer carries it, through one parameter and one header under `components` referred to from
 * each operation and response. Every route has it, as {@link echoRequestId} is a global hook.
 */
export function declareRequestId(document: OpenAPIObject): void {
  const components = (document.components ??= {});
  components.parameters = {
    ...components.parameters,
    [REQUEST_ID_COMPONENT]: {
      name: REQUEST_ID_HEADER,
      in: 'header',
      required: false,
      description:
        "An id for this request, sent back in the answer's `X-Request-Id` and written in the service's log lines about it. One that does not match the pattern is replaced by a new UUID rather than refused.",
      schema: { type: 'string', pattern: ACCEPTED_REQUEST_ID.source, maxLength: 128 },
    },
  };
  components.headers = {
    ...components.headers,
    [REQUEST_ID_COMPONENT]: {
      description: "The request's id: the caller's `X-Request-Id` when it was acceptable, else a UUID the service made.",
      schema: { type: 'string' },
    },
  };
  for (const item of Object.values(document.paths)) {
    for (const operation of [item.get, item.put, item.post, item.delete, item.options, item.head, item.patch, item.trace]) {
      if (!operation) continue;
      operation.parameters = [...(operation.parameters ?? []), { $ref: `#/components/parameters/${REQUEST_ID_COMPONENT}` }];
      for (const response of Object.values(operation.responses)) {
        if (!response || '$ref' in response) continue;
        response.headers = { ...response.headers, [REQUEST_ID_HEADER]: { $ref: `#/components/headers/${REQUEST_ID_COMPONENT}` } };
      }
    }
  }
}
