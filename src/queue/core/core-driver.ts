import type { QueueCore } from './queue-core.js';
import {
  MissingDedupIds,
  MissingDueItems,
  MissingLockRows,
  MissingSegments,
  type DueFetch,
  type LockRowsFetch,
  type LockRowsNeed,
  type SegmentFetch,
  type SegmentRef,
} from './types.js';

/**
 * Reads the rows a core call asks for: the turn runner's repositories, or a spec's fake
 * database. Each method answers at once or with a promise (the driver then answers with one).
 */
export interface RowReader {
  /** The segments asked for, in the order asked. */
  segments(refs: readonly SegmentRef[]): readonly SegmentFetch[] | Promise<readonly SegmentFetch[]>;
  /** Up to `limit` delayed items due at `now`, in `(dueAt, seq)` order (see {@link MissingDueItems}). */
  dueItems(now: number, limit: number): DueFetch | Promise<DueFetch>;
  /** Which of `ids` are live: accepted within the window (see {@link MissingDedupIds}). */
  liveDedupIds(ids: readonly string[]): ReadonlySet<string> | Promise<ReadonlySet<string>>;
  /** Shared-lock rows or given-back items (see {@link MissingLockRows}). */
  lockRows(need: LockRowsNeed): LockRowsFetch | Promise<LockRowsFetch>;
}

/** A {@link RowReader} that answers every read at once (a spec's fake database). */
export type SyncRowReader = { [K in keyof RowReader]: (...args: Parameters<RowReader[K]>) => Awaited<ReturnType<RowReader[K]>> };

/** Rounds of reads one core call may ask for (each round brings everything it asked for); past it the call fails. */
export const MAX_READ_ROUNDS = 50;

/**
 * Runs a core call to its end: "the core needs rows → read them → go on". A core call that
 * needs rows it does not hold throws a `Missing*` error before it changed anything; the
 * driver has `reader` read them, hands them to the core, and runs the same call again, until
 * it returns. Anything else it throws is thrown on, and so is a `Missing*` error past
 * {@link MAX_READ_ROUNDS} rounds.
 *
 * A call that needs nothing costs nothing more than the call itself (the hot path: a core in
 * memory with its front segment). With a reader that answers at once the answer is the call's
 * value; with one that answers with promises, a promise of it (to be awaited).
 */
export function drive<T>(core: QueueCore, call: () => T, reader: SyncRowReader): T;
export function drive<T>(core: QueueCore, call: () => T, reader: RowReader): T | Promise<T>;
export function drive<T>(core: QueueCore, call: () => T, reader: RowReader): T | Promise<T> {
  return attempt(core, call, reader, 0);
}

function attempt<T>(core: QueueCore, call: () => T, reader: RowReader, round: number): T | Promise<T> {
  try {
    return call();
  } catch (error) {
    if (round >= MAX_READ_ROUNDS) throw error;
    const read = satisfy(core, error, reader);
    if (read === NOT_MISSING) throw error;
    return read instanceof Promise ? read.then(() => attempt(core, call, reader, round + 1)) : attempt(core, call, reader, round + 1);
  }
}

const NOT_MISSING = Symbol('not missing');

/** Reads what a `Missing*` error asks for and hands it to the core; {@link NOT_MISSING} for any other error. */
function satisfy(core: QueueCore, error: unknown, reader: RowReader): void | Promise<void> | typeof NOT_MISSING {
  if (error instanceof MissingSegments) {
    const { refs } = error;
    return then(reader.segments(refs), (fetches) => {
      for (let i = 0; i < refs.length; i++) core.provide(refs[i], fetches[i]);
    });
  }
  if (error instanceof MissingDueItems) return then(reader.dueItems(error.now, error.limit), (fetch) => core.provideDueItems(fetch));
  if (error instanceof MissingDedupIds) return then(reader.liveDedupIds(error.ids), (live) => core.provideDedupIds(error.ids, live));
  if (error instanceof MissingLockRows) return then(reader.lockRows(error.need), (fetch) => core.provideLockRows(fetch));
  return NOT_MISSING;
}

function then<A>(value: A | Promise<A>, use: (value: A) => void): void | Promise<void> {
  return value instanceof Promise ? value.then(use) : use(value);
}
