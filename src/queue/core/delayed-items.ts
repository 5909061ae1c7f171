import type { PrioritySegments } from './priority-segments.js';
import type { CoreContext } from './turn-state.js';
import { NO_DELAYED, Needed, withTags, type DelayedItem, type DelayedSummary, type HeldItem, type ItemOrigin, type ItemTags } from './types.js';

/** Delayed items one turn moves to their priorities at most; a larger backlog takes turns of its own (see {@link DelayedItems.moveDue}). */
export const MAX_DUE_PER_TURN = 1000;

/**
 * A queue's delayed items: stored apart from the segments, ordered by `(dueAt, seq)`, invisible
 * until due. Memory holds the queue row's summary of them; the items themselves are read when
 * due, and moved to the tails of their priorities, except items given back by a lock and
 * waiting out a retry delay (they carry their origin): {@link moveDue} hands those to its
 * caller, who puts them back where they were pushed (`GivenBackItems.placeRetried`).
 *
 * Invariant: `nextDue` is the due time of the earliest delayed item (stored and not moved, or
 * pushed this turn), null exactly when there is none.
 */
export class DelayedItems {
  private count: number;
  private nextDue: number | null;
  private nextSeq: number;

  constructor(
    private readonly ctx: CoreContext,
    private readonly segments: PrioritySegments,
    stored: DelayedSummary = NO_DELAYED,
  ) {
    this.count = stored.count;
    this.nextDue = stored.nextDueAt;
    this.nextSeq = stored.nextSeq;
  }

  /** Delayed items (stored, or pushed this turn), not counting those this turn moved. */
  get size(): number {
    return this.count;
  }

  get nextDueAt(): number | null {
    return this.nextDue;
  }

  /** What the queue row records. */
  get summary(): DelayedSummary {
    return { count: this.count, nextDueAt: this.nextDue, nextSeq: this.nextSeq };
  }

  /** Sequence number the next delayed item gets. */
  get seq(): number {
    return this.nextSeq;
  }

  /** Whether items are due at `now` and not moved yet. */
  hasDue(now: number): boolean {
    return this.nextDue !== null && this.nextDue <= now;
  }

  /**
   * Puts an item aside until `dueAt`, after every delayed item pushed before it that is due at
   * the same time. `retry`: an item given back, waiting out its retry delay; it keeps where it
   * was pushed and its deliveries.
   */
  add(dueAt: number, priority: number, json: string, retry?: ItemTags & { readonly origin: ItemOrigin; readonly deliveries: number }, headers?: string): void {
    const writes = this.ctx.turn.writes;
    const item: DelayedItem = headers === undefined ? { dueAt, seq: this.nextSeq, priority, json } : { dueAt, seq: this.nextSeq, priority, json, headers };
    // A given-back item keeps where it was pushed, its deliveries, the queue it was dead-lettered from and its headers.
    writes.delayedInserts.push(retry ? withTags({ ...item, origin: retry.origin, deliveries: retry.deliveries }, retry) : item);
    this.nextSeq += 1;
    this.count += 1;
    writes.delayedChanged = true;
    if (this.nextDue === null || dueAt < this.nextDue) this.nextDue = dueAt;
  }

  /**
   * Items due at `now` join the tails of their priorities, in due-time order, ties in push
   * order; items given back and waiting out a retry delay are handed back (`retried`) for the
   * caller to put where they were pushed. Returns {@link Needed} (before changing anything) to
   * have the due items read. One read per turn, of at most `limit` items: if more are due,
   * {@link hasDue} stays true. Returns how many items were moved, or undefined when none was
   * due (no read: the row carries the earliest due time).
   */
  moveDue(now: number, limit: number): { readonly moved: number; readonly retried: readonly HeldItem[] } | undefined | Needed {
    const turn = this.ctx.turn;
    if (turn.movedDue || !this.hasDue(now)) return undefined;
    const fetched = turn.dueFetch;
    if (!fetched) return new Needed({ due: { now, limit } });
    turn.dueFetch = undefined;
    turn.movedDue = true;
    const moved = fetched.items.slice(0, limit).filter((d) => d.dueAt <= now);
    const retried: HeldItem[] = [];
    for (const d of moved) {
      if (d.origin) retried.push(withTags({ priority: d.priority, json: d.json, origin: d.origin, deliveries: d.deliveries ?? 0 }, d));
      else this.segments.append(d.priority, d.json, d.from === undefined && d.headers === undefined ? undefined : d);
    }
    if (moved.length > 0) {
      const last = moved[moved.length - 1];
      turn.writes.delayedDeleteThrough = { dueAt: last.dueAt, seq: last.seq };
      this.ctx.markPresent();
    }
    // Earliest of what stays: the stored items after the moved ones, and any pushed this turn.
    let next = moved.length === fetched.items.length ? fetched.nextDueAt : fetched.items[moved.length].dueAt;
    for (const d of turn.writes.delayedInserts) if (next === null || d.dueAt < next) next = d.dueAt;
    this.nextDue = next;
    this.count = next === null ? 0 : Math.max(this.count - moved.length, turn.writes.delayedInserts.length);
    turn.writes.delayedChanged = true;
    turn.touch();
    return { moved: moved.length, retried };
  }

  /** Forgets every delayed item (the queue is deleted). */
  clear(): void {
    this.count = 0;
    this.nextDue = null;
    this.nextSeq = 0;
  }
}
