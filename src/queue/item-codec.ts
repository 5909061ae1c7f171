import { nestsDeeperThan } from '../common/request-validation.pipe.js';
import { ItemTooDeepError, ItemTooLargeError, ValidationFailedError } from '../common/errors.js';
import { headersMessage, headersProblem } from './dto/item-headers.js';

/** Deepest nesting of objects and arrays accepted inside an item (the item itself is level 1). */
export const MAX_ITEM_DEPTH = 64;

/**
 * Checks an item and returns its JSON text, the form it is stored and returned in.
 * @throws ValidationFailedError unless the item is a JSON object
 * @throws ItemTooDeepError past {@link MAX_ITEM_DEPTH}
 * @throws ItemTooLargeError past `maxBytes` of UTF-8 JSON
 */
export function encodeItem(item: unknown, maxBytes: number, field = 'item'): string {
  if (item === null || typeof item !== 'object' || Array.isArray(item)) throw new ValidationFailedError(`${field} must be a JSON object`);
  if (nestsDeeperThan(item, MAX_ITEM_DEPTH)) throw new ItemTooDeepError(MAX_ITEM_DEPTH);
  const json = JSON.stringify(item);
  const size = Buffer.byteLength(json, 'utf8');
  if (size > maxBytes) throw new ItemTooLargeError(size, maxBytes);
  return json;
}

/** A W3C trace context `traceparent` (version 00 and later versions' first four fields; `ff` is no version). */
const TRACEPARENT = /^(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}(-[^\s]*)?$/;

/** The request's `traceparent` HTTP header when it is one W3C trace context would accept; undefined otherwise (ignored, as W3C says). */
export function requestTraceparent(header: string | string[] | undefined): string | undefined {
  if (typeof header !== 'string' || header.length > 512) return undefined;
  const value = header.trim();
  return TRACEPARENT.test(value) ? value : undefined;
}

/**
 * Checks an item's headers and returns them as stored: the JSON text of `headers` with the
 * request's `traceparent` added unless they name one; undefined when there is none at all, so
 * that an item without headers stores and costs nothing for them.
 * @throws ValidationFailedError for headers that break a rule of `headersProblem` (named `field`)
 */
export function encodeHeaders(headers: Readonly<Record<string, string>> | undefined, traceparent: string | undefined, field = 'headers'): string | undefined {
  if (headers === undefined) return traceparent === undefined ? undefined : JSON.stringify({ traceparent });
  const problem = headersProblem(headers);
  if (problem !== undefined) throw new ValidationFailedError(headersMessage(field, problem));
  const kept = traceparent !== undefined && !Object.hasOwn(headers, 'traceparent') ? { ...headers, traceparent } : headers;
  for (const _ in kept) return JSON.stringify(kept);
  return undefined;
}
