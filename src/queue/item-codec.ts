import { nestsDeeperThan } from '../common/request-validation.pipe.js';
import { ItemTooDeepError, ItemTooLargeError, ValidationFailedError } from '../common/errors.js';

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
