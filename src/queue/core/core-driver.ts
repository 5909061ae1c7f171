import type { QueueCore } from './queue-core.js';
import { Needed, type DueFetch, type LockRowsFetch, type LockRowsNeed, type OrNeed, type RowNeed, type SegmentFetch, type SegmentRef } from './types.js';

/**
 * Reads the rows a core call asks for: the turn runner's repositories, or a spec's fake
 * database. Each method answers at once or with a promise (the driver then answers with one).
 */
export interface RowReader {
  /** The segments asked for, in the order asked. */
  segments(refs: readonly SegmentRef[]): readonly SegmentFetch[] | Promise<readonly SegmentFetch[]>;
  /** Up to `limit` delayed items due at `now`, in `(dueAt, seq)` order (see {@link RowNeed.due}). */
  dueItems(now: number, limit: number): DueFetch | Promise<DueFetch>;
  /** Which of `ids` are live: accepted within the window (see {@link RowNeed.dedupIds}). */
  liveDedupIds(ids: readonly string[]): ReadonlySet<string> | Promise<ReadonlySet<string>>;
  /** Shared-lock rows or given-back items (see {@link LockRowsNeed}). */
  lockRows(need: LockRowsNeed): LockRowsFetch | Promise<LockRowsFetch>;
}

/** A {@link RowReader} that answers every read at once (a spec's fake database). */
export type SyncRowReader = { [K in keyof RowReader]: (...args: Parameters<RowReader[K]>) => Awaited<ReturnType<RowReader[K]>> };

/**
 * Rounds of reads one core call may take. A call names everything it needs at once, so one
 * round is enough whenever the rows read agree with the queue row the core was made from. The
 * rounds after it are for the one case where they do not: another process changed the queue
 * between the read of its row and the read of its rows (an optimistic turn reads both without
 * a lock), so that a segment holds fewer items than the row says and the call asks for the
 * next one. Such a turn's write then fails its version check anyway; past the bound the
 * driver stops reading ({@link ReadsOutOfStep}) and the runner loads the queue again.
 */
export const MAX_READ_ROUNDS = 3;

/** The rows read kept disagreeing with the queue row (see {@link MAX_READ_ROUNDS}): the turn must start again from a fresh row. */
export class ReadsOutOfStep extends Error {
  constructor(readonly need: RowNeed) {
    super('the rows read disagree with the queue row');
    this.name = 'ReadsOutOfStep';
  }
}

/**
 * Runs a core call to its end: "the core names what it needs → read it → go on". A core call
 * that needs rows it does not hold returns {@link Needed} (never throws) before it changed
 * anything; the driver has `reader` read all of it, hands it to the core, and makes the same
 * call again, which then answers (see {@link MAX_READ_ROUNDS} for the rare second round).
 * Anything the call or the reader throws is thrown on.
 *
 * A call that needs nothing costs nothing more than the call itself (the hot path: a core in
 * memory with its front segment, reads declared by the turn's operations made beforehand).
 * With a reader that answers at once the answer is the call's value; with one that answers with
 * promises, a promise of it (to be awaited).
 *
 * @param rounds - rounds of reads allowed (a fake database, which never changes under a call, allows 1)
 */
export function drive<T>(core: QueueCore, call: () => OrNeed<T>, reader: SyncRowReader, rounds?: number): T;
export function drive<T>(core: QueueCore, call: () => OrNeed<T>, reader: RowReader, rounds?: number): T | Promise<T>;
export function drive<T>(core: QueueCore, call: () => OrNeed<T>, reader: RowReader, rounds = MAX_READ_ROUNDS): T | Promise<T> {
  return attempt(core, call, reader, rounds);
}

function attempt<T>(core: QueueCore, call: () => OrNeed<T>, reader: RowReader, roundsLeft: number): T | Promise<T> {
  const answer = call();
  if (!(answer instanceof Needed)) return answer;
  if (roundsLeft <= 0) throw new ReadsOutOfStep(answer.need);
  const read = satisfy(core, answer.need, reader);
  return read instanceof Promise ? read.then(() => attempt(core, call, reader, roundsLeft - 1)) : attempt(core, call, reader, roundsLeft - 1);
}

/** Reads everything a need names, one read after the other (a turn's reads share one session), and hands it to the core. */
export function satisfy(core: QueueCore, need: RowNeed, reader: RowReader): void | Promise<void> {
  const steps: (() => void | Promise<void>)[] = [];
  const { segments, due, dedupIds, lockRows } = need;
  if (segments)
    steps.push(() =>
      then(reader.segments(segments), (fetches) => {
        for (let i = 0; i < segments.length; i++) core.provide(segments[i], fetches[i]);
      }),
    );
  if (due) steps.push(() => then(reader.dueItems(due.now, due.limit), (fetch) => core.provideDueItems(fetch)));
  if (dedupIds) steps.push(() => then(reader.liveDedupIds(dedupIds), (live) => core.provideDedupIds(dedupIds, live)));
  for (const rows of lockRows ?? []) steps.push(() => then(reader.lockRows(rows), (fetch) => core.provideLockRows(fetch)));
  return inTurn(steps, 0);
}

function inTurn(steps: readonly (() => void | Promise<void>)[], from: number): void | Promise<void> {
  for (let i = from; i < steps.length; i++) {
    const done = steps[i]();
    if (done instanceof Promise) return done.then(() => inTurn(steps, i + 1));
  }
}

function then<A>(value: A | Promise<A>, use: (value: A) => void): void | Promise<void> {
  return value instanceof Promise ? value.then(use) : use(value);
}
