import type { DelayedItems } from './delayed-items.js';
import type { PrioritySegments } from './priority-segments.js';
import { retryDelayMs } from './queue-settings.js';
import type { CoreContext } from './turn-state.js';
import { withTags, type HeldItem, type ItemOrigin, type LockRowsNeed, type PriorityMetadata, type ReturnedEntry } from './types.js';

/** What a lock's expiry or release did with its items. */
export interface GiveBackOutcome {
  /** Items back in the queue. */
  readonly returned: number;
  /** Items that reached `maxDeliveries` and went to the dead-letter queue. */
  readonly deadLettered: number;
  /** Of `returned`, items waiting out a retry delay (among the delayed items) before they are back. */
  readonly delayed: number;
}

/**
 * When items are given back, for their retry delay: the time, and a delay that replaces the
 * queue's (a release's `delay_seconds`); or, with `deadLetter`, not given back at all but sent to
 * the dead-letter queue whatever their deliveries (a release's `dead_letter`; the caller checked
 * that the queue has one).
 */
export interface GiveBackTime {
  readonly now: number;
  readonly delayMs?: number;
  readonly deadLetter?: boolean;
}

/** The segment after the last origin of `items` of a priority: where a reserved entry for them starts. */
const beyond = (items: readonly HeldItem[], priority: number): number =>
  1 + Math.max(0, ...items.filter((i) => i.priority === priority && i.origin).map((i) => i.origin!.segment));

/** Orders given-back items by where they were pushed. */
const byOrigin = (a: ItemOrigin, b: ItemOrigin): number => a.segment - b.segment || a.position - b.position;

/**
 * Items locks give back, and where they go: the dead-letter queue (past `maxDeliveries`), the
 * given-back items of their priority (kept apart from the segments, ordered by where they were
 * pushed, popped first; see {@link PriorityMetadata.returned}), or the front of their priority
 * (the seeds' exclusive lock). Given-back items stay in their table; a turn reads a prefix of a
 * priority's when a pop needs them.
 */
export class GivenBackItems {
  /** @param delayed - where items waiting out a retry delay go */
  constructor(
    private readonly ctx: CoreContext,
    private readonly segments: PrioritySegments,
    private readonly delayed: DelayedItems,
  ) {}

  /** What must be read so that the first `take` given-back items of a priority are in memory; undefined: they are. */
  need(priority: number, take: number): LockRowsNeed | undefined {
    const turn = this.ctx.turn;
    const cache = turn.returnedCache.get(priority);
    if (cache && (cache.complete || cache.entries.length - cache.offset >= take)) return undefined;
    // Rows this turn removed are still in the table: read past them.
    const removed = turn.writes.pendingReturned(priority).removed.size;
    const limit = take + removed;
    turn.returnedAsked.set(priority, limit);
    return { kind: 'returned', priority, limit };
  }

  /** Hands over the given-back items {@link need} asked for. */
  provide(priority: number, fetched: readonly ReturnedEntry[]): void {
    const turn = this.ctx.turn;
    const { removed, added } = turn.writes.pendingReturned(priority);
    // What was read, minus what this turn popped again, plus what it gave back; a full read
    // is only a prefix: what it gave back past the last row read is not part of it.
    // Fewer rows than asked for: the table holds no more.
    const complete = fetched.length < (turn.returnedAsked.get(priority) ?? Infinity);
    const rows = fetched.filter((e) => !removed.has(`${e.segment}:${e.position}`));
    const last = fetched[fetched.length - 1];
    const merged = [...rows, ...added.filter((e) => complete || byOrigin(e, last) < 0)].sort(byOrigin);
    turn.returnedCache.set(priority, { entries: merged, offset: 0, complete });
  }

  /** Pops the first `take` given-back items of a priority (in memory, see {@link need}). */
  take(priority: number, take: number): HeldItem[] {
    const turn = this.ctx.turn;
    const cache = turn.returnedCache.get(priority)!;
    const meta = this.segments.get(priority)!;
    const out: HeldItem[] = [];
    for (const entry of cache.entries.slice(cache.offset, cache.offset + take)) {
      turn.writes.removeReturned(priority, entry);
      const item: HeldItem = { priority, json: entry.json, origin: { segment: entry.segment, position: entry.position }, deliveries: entry.deliveries };
      out.push(withTags(item, entry));
    }
    cache.offset += out.length;
    meta.returned = (meta.returned ?? 0) - out.length;
    if (meta.returned === 0) delete meta.returned;
    return out;
  }

  /**
   * Gives a lock's items back. An item that reached `maxDeliveries` (with a dead-letter queue
   * set), or every item with `at.deadLetter`, goes to the dead-letter queue's tail instead,
   * at its priority, written by the same turn. The others go
   * back to where they were in push order: from a shared lock, or while given-back items of
   * their priority wait, among the given-back items (by origin); otherwise to the front of
   * their priority, as the seeds' exclusive lock does.
   */
  giveBack(items: readonly HeldItem[], fromShared: boolean, at?: GiveBackTime): GiveBackOutcome {
    const { maxDeliveries, deadLetterQueue } = this.ctx.settings;
    const turn = this.ctx.turn;
    const back = new Map<number, HeldItem[]>();
    let deadLettered = 0;
    let delayed = 0;
    if (fromShared) this.unhold(items);
    for (const item of items) {
      if (deadLetterQueue && (at?.deadLetter || (maxDeliveries != null && (item.deliveries ?? 0) >= maxDeliveries))) {
        turn.writes.deadLetters.push(item);
        deadLettered += 1;
        continue;
      }
      // A retry delay: the item waits among the delayed items, its priority kept alive meanwhile.
      const delayMs = at ? (at.delayMs ?? retryDelayMs(this.ctx.settings, item.deliveries ?? 0)) : 0;
      if (delayMs > 0) {
        const retry = item.origin ? withTags({ origin: item.origin, deliveries: item.deliveries ?? 0 }, item) : undefined;
        this.delayed.add(at!.now + delayMs, item.priority, item.json, retry, retry ? undefined : item.headers);
        // The priority's entry stays while the item waits (an exclusive lock that took a
        // priority's last items dropped it: it starts again past the items' origins).
        const meta = retry ? (this.segments.get(item.priority) ?? this.segments.reserve(item.priority, beyond(items, item.priority))) : undefined;
        if (meta) meta.retrying = (meta.retrying ?? 0) + 1;
        delayed += 1;
        continue;
      }
      const list = back.get(item.priority) ?? [];
      list.push(item);
      back.set(item.priority, list);
    }
    this.putBack(back, fromShared);
    this.settle(items);
    if (deadLettered > 0 || delayed > 0) {
      this.ctx.markPresent();
      turn.touch();
    }
    return { returned: items.length - deadLettered, deadLettered, delayed };
  }

  /**
   * Puts items taken from the front back where they were, per priority in their order: among
   * the given-back items (by origin) when they come from a shared lock or such items wait,
   * else at the front of their priority. Items taken from the front and put back at once keep
   * their places exactly (a redrive leaves them so).
   */
  putBack(byPriority: ReadonlyMap<number, readonly HeldItem[]>, fromShared = false): void {
    const toFront: HeldItem[] = [];
    for (const [priority, list] of byPriority) {
      const meta = this.segments.get(priority);
      const keyed = list.every((i) => i.origin !== undefined);
      if (meta && keyed && (fromShared || (meta.returned ?? 0) > 0)) this.addReturned(priority, meta, list);
      else toFront.push(...list);
    }
    this.segments.returnToFront(toFront);
  }

  /**
   * Items whose retry delay ended go back to where they were in push order: among the
   * given-back items of their priority (by origin, popped before the segments' items) while the
   * priority's entry lives on (it does while they wait, see {@link PriorityMetadata.retrying});
   * otherwise (an exclusive lock emptied the priority before it gave them back) to its front.
   */
  placeRetried(items: readonly HeldItem[]): void {
    const byPriority = new Map<number, HeldItem[]>();
    for (const item of items) {
      const list = byPriority.get(item.priority) ?? [];
      list.push(item);
      byPriority.set(item.priority, list);
    }
    const toFront: HeldItem[] = [];
    for (const [priority, list] of byPriority) {
      const meta = this.segments.get(priority);
      if (!meta) {
        toFront.push(...list.sort((a, b) => byOrigin(a.origin!, b.origin!)));
        continue;
      }
      meta.retrying = Math.max(0, (meta.retrying ?? 0) - list.length);
      if (meta.retrying === 0) delete meta.retrying;
      this.addReturned(priority, meta, list);
    }
    this.segments.returnToFront(toFront);
  }

  /** Items a shared lock held are no longer held (acknowledged, or about to be given back). */
  unhold(items: readonly HeldItem[]): void {
    for (const item of items) {
      const meta = this.segments.get(item.priority);
      if (meta) meta.held = Math.max(0, (meta.held ?? 0) - 1);
    }
  }

  /** After a lock ended: the items' priorities drop a `held` of 0, and their entries if nothing of them is left. */
  settle(items: readonly HeldItem[]): void {
    for (const priority of new Set(items.map((i) => i.priority))) {
      const meta = this.segments.get(priority);
      if (meta && meta.held === 0) delete meta.held;
      this.segments.dropIfEmpty(priority);
    }
  }

  /** Items go back among the given-back items of their priority, each by where it was pushed. */
  private addReturned(priority: number, meta: PriorityMetadata, items: readonly HeldItem[]): void {
    const turn = this.ctx.turn;
    const entries: ReturnedEntry[] = items.map((i) =>
      withTags({ segment: i.origin!.segment, position: i.origin!.position, json: i.json, deliveries: i.deliveries ?? 0 }, i),
    );
    for (const entry of entries) turn.writes.addReturned(priority, entry);
    meta.returned = (meta.returned ?? 0) + entries.length;
    const cache = turn.returnedCache.get(priority);
    if (cache) {
      const last = cache.entries[cache.entries.length - 1];
      const kept = cache.entries.slice(cache.offset);
      for (const entry of entries) if (cache.complete || (last !== undefined && byOrigin(entry, last) < 0)) kept.push(entry);
      cache.entries = kept.sort(byOrigin);
      cache.offset = 0;
    }
    this.ctx.markPresent();
    turn.touch();
  }
}
