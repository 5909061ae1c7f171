import type { PopResponseDto } from './dto/queue-responses.dto.js';

/** Where a pop's answer keeps its items (and headers) as the JSON text they were stored as, and the rest of the answer. */
const STORED = Symbol('pop answer: items as stored JSON');

/** What a pop's answer holds besides its items and headers (a fair pop's: `queue_id` too). */
type Rest = Omit<PopResponseDto, 'items' | 'headers'> & { queue_id?: string };

interface Stored {
  readonly items: readonly string[];
  /** Parallel to `items` (`{}` for an item without headers); absent: the pop did not ask for them. */
  readonly headers?: readonly string[];
  readonly rest: Rest;
}

/** An item without headers, in a pop's `headers`. */
export const NO_HEADERS = '{}';

const parsedAll = (texts: readonly string[]): Record<string, unknown>[] => texts.map((json) => JSON.parse(json) as Record<string, unknown>);

/**
 * A pop's answer whose items stay the JSON text they were pushed and stored as: an item arrives
 * as JSON and leaves as JSON, and nothing in between needs to look inside it. Sent over HTTP,
 * {@link serializePopAnswer} puts the texts into the body as they are, where a plain object
 * would parse each item only for it to be serialised again (a parse and a stringify per item,
 * a hundred of each for `depth=100`). Read in code (`answer.items`), the items are parsed on
 * first access, so the answer is an ordinary {@link PopResponseDto} to every caller. Headers
 * (`include_headers`), stored as JSON text too, are treated the same way; a pop that did not ask
 * for them has no `headers` field and pays nothing for them.
 *
 * The texts can be inserted as they are: every one was written by `JSON.stringify` (see
 * `encodeItem` and `encodeHeaders`), which always produces well-formed JSON.
 */
export function popAnswer(items: readonly string[], rest: Rest, headers?: readonly string[]): PopResponseDto {
  let parsed: Record<string, unknown>[] | undefined;
  let answer: PopResponseDto;
  if (headers === undefined) {
    answer = {
      get items(): Record<string, unknown>[] {
        return (parsed ??= parsedAll(items));
      },
      ...rest,
    };
  } else {
    let parsedHeaders: Record<string, string>[] | undefined;
    answer = {
      get items(): Record<string, unknown>[] {
        return (parsed ??= parsedAll(items));
      },
      get headers(): Record<string, string>[] {
        return (parsedHeaders ??= parsedAll(headers) as Record<string, string>[]);
      },
      ...rest,
    };
  }
  // Not enumerable: equality in tests and JSON.stringify see the answer's fields only.
  Object.defineProperty(answer, STORED, { value: { items, rest, ...(headers ? { headers } : {}) } satisfies Stored });
  return answer;
}

/**
 * The HTTP body of a pop's answer: the stored item (and header) texts spliced in for an answer
 * made by {@link popAnswer}, and for one that carries such an answer as `next` (an
 * acknowledgement that popped after it); `JSON.stringify` for anything else (an error body on
 * the same reply). Same text as `JSON.stringify(answer)`, fields in the same order.
 */
export function serializePopAnswer(payload: unknown): string {
  const stored = storedOf(payload);
  if (!stored) return storedOf((payload as Record<string, unknown> | null)?.next) ? withNext(payload as Record<string, unknown>) : JSON.stringify(payload);
  const rest = JSON.stringify(stored.rest);
  const headers = stored.headers ? `,"headers":[${stored.headers.join(',')}]` : '';
  return `{"items":[${stored.items.join(',')}]${headers}${rest === '{}' ? '' : `,${rest.slice(1, -1)}`}}`;
}

/** What {@link popAnswer} keeps of an answer it made; undefined for any other value. */
const storedOf = (value: unknown): Stored | undefined =>
  typeof value === 'object' && value !== null ? ((value as Record<symbol, unknown>)[STORED] as Stored | undefined) : undefined;

/** An answer whose `next` is a pop's answer made by {@link popAnswer}, field by field as `JSON.stringify` writes them (a field it leaves out, left out). */
function withNext(payload: Record<string, unknown>): string {
  const fields: string[] = [];
  for (const [field, value] of Object.entries(payload)) {
    const text = field === 'next' ? serializePopAnswer(value) : (JSON.stringify(value) as string | undefined);
    if (text !== undefined) fields.push(`${JSON.stringify(field)}:${text}`);
  }
  return `{${fields.join(',')}}`;
}

/**
 * A pop's answer with `queue_id` after its other fields (a fair pop's): the items stay the JSON
 * text they were stored as when `answer` was made by {@link popAnswer}.
 */
export function withQueueId(answer: PopResponseDto, queueId: string): PopResponseDto & { queue_id: string } {
  const stored = (answer as unknown as Record<symbol, Stored | undefined>)[STORED];
  if (!stored) return { ...answer, queue_id: queueId };
  return popAnswer(stored.items, { ...stored.rest, queue_id: queueId }, stored.headers) as PopResponseDto & { queue_id: string };
}
