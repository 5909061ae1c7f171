import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import type { Transform } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { MalformedJsonError, UnsupportedMediaTypeError } from './errors.js';

/** `type/subtype+json`, with or without parameters (Fastify matches `application/json` by name). */
const JSON_SUFFIX_TYPE = /^[^\s/;]+\/[^\s/;]+\+json\s*(?:;|$)/;
const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)/i;

/** The content codings a JSON body may come in. */
const DECODERS: Record<string, () => Transform> = {
  gzip: createGunzip,
  'x-gzip': createGunzip,
  deflate: createInflate,
  br: createBrotliDecompress,
};

function isJson(contentType: string | undefined): boolean {
  const mediaType = contentType?.split(';', 1)[0].trim().toLowerCase() ?? '';
  return mediaType === 'application/json' || JSON_SUFFIX_TYPE.test(mediaType);
}

/**
 * The body of a request whose content type the service does not read. Routes that take a body
 * refuse it with 415 (see `RequestValidationPipe`); the others ignore it, as they ignore any body.
 */
export class UnsupportedBody {
  constructor(readonly contentType: string | undefined) {}

  toError(): UnsupportedMediaTypeError {
    const what = this.contentType ? `content type ${this.contentType}` : 'a body without a content type';
    return new UnsupportedMediaTypeError(`${what} is not supported; send application/json`);
  }
}

/**
 * Replaces Fastify's body parsers with the service's: JSON (`application/json`, `*\/*+json`,
 * UTF-8) up to `bodyLimit` bytes, parsed with `JSON.parse` itself; anything else becomes an
 * {@link UnsupportedBody}, unread.
 *
 * Fastify's own JSON parser refuses (or strips) `__proto__` and `constructor.prototype` keys;
 * items must keep them. `JSON.parse` makes them ordinary own properties and never sets a
 * prototype; past the parser, `RequestValidationPipe` keeps items away from class-transformer,
 * and Nest strips such keys from the rest of the body.
 *
 * A JSON body may be compressed (`Content-Encoding: gzip`, `deflate` or `br`); `bodyLimit`
 * applies to it decompressed, and Fastify stops reading past it. Another coding is 415.
 */
export function registerBodyParsers(fastify: FastifyInstance, bodyLimit: number): void {
  // Decoding is Fastify's `preParsing` step, a stream in, a stream out; it leaves alone the bodies
  // no parser reads, so that an unread one cannot hold the connection up.
  fastify.addHook('preParsing', (request, _reply, payload, done) => {
    const coding = request.headers['content-encoding']?.trim().toLowerCase();
    if (!coding || coding === 'identity' || !isJson(request.headers['content-type'])) return done(null, payload);
    const decoder = Object.hasOwn(DECODERS, coding) ? DECODERS[coding]() : undefined;
    if (!decoder)
      return done(new UnsupportedMediaTypeError(`content encoding ${coding} is not supported`, { 'Accept-Encoding': Object.keys(DECODERS).join(', ') }));
    // Fastify checks Content-Length against the bytes that came over the wire.
    Object.defineProperty(decoder, 'receivedEncodedLength', { get: () => (decoder as Transform & { bytesWritten: number }).bytesWritten });
    payload.on('error', (error) => decoder.destroy(error));
    // Bad data makes the decoder emit 'error'. Fastify listens while it reads a body, but it
    // never reads one on a GET or HEAD, and an 'error' nobody hears ends the process: so the
    // decoder always has a listener (Fastify's own, when it reads, still gets the error).
    decoder.on('error', () => undefined);
    done(null, payload.pipe(decoder));
  });
  fastify.removeAllContentTypeParsers();
  for (const type of ['application/json', JSON_SUFFIX_TYPE]) {
    // A throw in the parser reaches Fastify's error handler, that is the global filter.
    fastify.addContentTypeParser(type, { parseAs: 'string', bodyLimit }, (request, body, done) => done(null, parseJson(request, body)));
  }
  // 415 is decided by the route (only one that reads a body refuses it), so the body is left unread here.
  fastify.addContentTypeParser('*', (request, _payload, done) => done(null, new UnsupportedBody(request.headers['content-type'])));
}

function parseJson(request: FastifyRequest, body: string | Buffer): unknown {
  const charset = CHARSET.exec(request.headers['content-type'] ?? '')?.[1]?.toLowerCase();
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    throw new UnsupportedMediaTypeError(`charset ${charset} is not supported; send UTF-8`);
  }
  let text = body.toString();
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  // An empty body is no body: the route decides whether it needs one.
  if (text.length === 0) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new MalformedJsonError();
  }
  // A bare string, number or boolean is no request; `null` is left to validation (400 VALIDATION_FAILED).
  if (value !== null && typeof value !== 'object') throw new MalformedJsonError('request body must be a JSON object');
  return value;
}
