import type { PopResponseDto } from './dto/queue-responses.dto.js';

/** Where a pop's answer keeps its items as the JSON text they were stored as, and the rest of the answer. */
const STORED = Symbol('pop answer: items as stored JSON');

interface Stored {
  readonly items: readonly string[];
  readonly rest: Omit<PopResponseDto, 'items'>;
}

/**
 * A pop's answer whose items stay the JSON text they were pushed and stored as: an item arrives
 * as JSON and leaves as JSON, and nothing in between needs to look inside it. Sent over HTTP,
 * {@link serializePopAnswer} puts the texts into the body as they are, where a plain object
 * would parse each item only for it to be serialised again (a parse and a stringify per item,
 * a hundred of each for `depth=100`). Read in code (`answer.items`), the items are parsed on
 * first access, so the answer is an ordinary {@link PopResponseDto} to every caller.
 *
 * The texts can be inserted as they are: every one was written by `JSON.stringify` (see
 * `encodeItem`), which always produces well-formed JSON.
 */
export function popAnswer(items: readonly string[], rest: Omit<PopResponseDto, 'items'>): PopResponseDto {
  let parsed: Record<string, unknown>[] | undefined;
  const answer = {
    get items(): Record<string, unknown>[] {
      return (parsed ??= items.map((json) => JSON.parse(json) as Record<string, unknown>));
    },
    ...rest,
  };
  // Not enumerable: equality in tests and JSON.stringify see the answer's fields only.
  Object.defineProperty(answer, STORED, { value: { items, rest } satisfies Stored });
  return answer;
}

/**
 * The HTTP body of a pop's answer: the stored item texts spliced in for an answer made by
 * {@link popAnswer}, `JSON.stringify` for anything else (an error body on the same reply).
 * Same text as `JSON.stringify(answer)`, fields in the same order.
 */
export function serializePopAnswer(payload: unknown): string {
  const stored = typeof payload === 'object' && payload !== null ? ((payload as Record<symbol, unknown>)[STORED] as Stored | undefined) : undefined;
  if (!stored) return JSON.stringify(payload);
  const rest = JSON.stringify(stored.rest);
  return `{"items":[${stored.items.join(',')}]${rest === '{}' ? '' : `,${rest.slice(1, -1)}`}}`;
}
