import {
  MissingDedupIds,
  MissingDueItems,
  MissingLockRows,
  MissingSegments,
  NO_DELAYED,
  NO_SHARED_LOCKS,
  type DelayedSummary,
  type DueFetch,
  type HeldItem,
  type ItemOrigin,
  type LockMode,
  type LockProblem,
  type LockRowsFetch,
  type LockState,
  type NewItem,
  type OffloadMove,
  type PriorityMetadata,
  type QueueRecord,
  type QueueSnapshot,
  type QueueSettings,
  type ReturnedEntry,
  type SegmentEntry,
  type SegmentFetch,
  type SegmentRef,
  type SettingsPatch,
  type SettingsProblem,
  type SharedLockSummary,
  type TurnWrite,
} from './types.js';
import { WriteSet } from './write-set.js';

/** A segment held in memory: `entries[offset..]` are its items, in order. */
interface CachedSegment {
  entries: SegmentEntry[];
  offset: number;
}

const segKey = (priority: number, segment: number): string => `${priority}:${segment}`;

/** Metadata of a priority that has just received its first item(s): one segment, numbered 0. */
const newPriority = (): PriorityMetadata => ({ count: 0, head_segment: 0, tail_segment: 0, head_offloaded_segment: null, tail_offloaded_segment: null, next_position: 0, head_position: 0 });

/** Delayed items one turn moves to their priorities at most; a larger backlog takes turns of its own (see {@link QueueCore.moveDueItems}). */
export const MAX_DUE_PER_TURN = 1000;

/** Expired shared locks one turn gives back at most; the rest are given back by the next turns (or when their id is used). */
export const MAX_EXPIRED_LOCKS_PER_TURN = 100;

/** Orders given-back items by where they were pushed. */
const byOrigin = (a: ItemOrigin, b: ItemOrigin): number => a.segment - b.segment || a.position - b.position;

/** Given-back items of one priority held in memory this turn: a prefix (in push order) of those stored, or all of them. */
interface ReturnedCache {
  entries: ReturnedEntry[];
  offset: number;
  complete: boolean;
}

/** What a lock's expiry or release did with its items. */
export interface GiveBackOutcome {
  /** Items back in the queue. */
  readonly returned: number;
  /** Items that reached `maxDeliveries` and went to the dead-letter queue. */
  readonly deadLettered: number;
}

/** What the expiry of a turn's due shared locks did. */
export interface SharedExpiryOutcome extends GiveBackOutcome {
  readonly locks: number;
}

const SEGMENT_KEY = /^queue_(\d{1,9})_seg_(\d{1,15})$/;
const OFFLOADED_KEY = /^offloaded_queue_(\d{1,9})_seg_(\d{1,15})_(.+)$/;

/** What a pop decided. */
export type PopOutcome =
  | { readonly items: HeldItem[]; readonly lock?: LockState }
  /** An unexpired lock exists: every pop is refused until it ends (exclusive mode). */
  | { readonly locked: LockState }
  /** Shared mode: the queue has as many live locks as it may (a pop with ack only). */
  | { readonly busy: true }
  /** The head segment is in the offload store, which could not be read: nothing was taken. */
  | { readonly unavailable: { readonly priority: number; readonly segment: number } };

/** What a push decided: how many items were enqueued (now or delayed) and how many were skipped as duplicates. */
export interface PushOutcome {
  readonly enqueued: number;
  readonly duplicates: number;
}

/** A priority as inspection shows it. */
export interface PriorityView extends PriorityMetadata {
  readonly head_segment_count: number;
  readonly tail_segment_count: number;
}

/** A queue as inspection shows it. */
export interface QueueView {
  readonly count: number;
  readonly priorities: ReadonlyMap<number, PriorityView>;
  readonly settings: QueueSettings;
  readonly lock: LockState | null;
  /** Shared mode: its live locks; null otherwise. */
  readonly locks: { readonly count: number; readonly itemCount: number; readonly nextExpiresAt: number | null } | null;
  /** Delayed items, not yet visible. */
  readonly delayed: number;
}

/** What `GET /queue/{id}/state/{key}` finds: a value, nothing (404), or a store that could not be read. */
export type StateLookup = { readonly value: unknown } | 'not-found' | { readonly unavailable: { readonly priority: number; readonly segment: number } };

/**
 * The pure core of one queue: its metadata, the segments it holds in memory, its lock, and the
 * decisions of seed 003 and 004 (segments, pops, locks, offloading). No I/O: every operation is
 * synchronous and records its row changes in a {@link WriteSet}; the turn runner writes them in
 * one statement and then calls {@link committed}.
 *
 * Rules every operation keeps:
 * - **Check, then change.** An operation that needs segments it does not hold throws
 *   {@link MissingSegments} before it changes anything; the runner fetches them, hands them
 *   over with {@link provide}, and runs the operation again. A refused operation (locked,
 *   wrong lock id) changes nothing.
 * - **Memory mirrors the table plus the turn's writes.** A segment fetched from the table is
 *   merged with the turn's own pending deletes and inserts; segments are evicted only between
 *   turns, so nothing the turn wrote is ever read back stale.
 * - **Bounded memory.** Between turns at most the head, `buffer_segments` after it and the
 *   tail of each priority stay in memory.
 */
export class QueueCore {
  /** The stored version; null while the queue has no row. */
  private storedVersion: number | null;
  private exists: boolean;
  private deleted = false;
  private currentSettings: QueueSettings;
  private readonly priorities = new Map<number, PriorityMetadata>();
  private sortedPriorities: number[] | undefined;
  /** Segments in memory, per priority, by number. */
  private readonly cache = new Map<number, Map<number, CachedSegment>>();
  private cachedItems = 0;
  lock: LockState | null;
  private writes = new WriteSet();
  /** Offloaded segments that could not be read this turn: nothing is taken past them. */
  private readonly unavailable = new Set<string>();
  /** Segments fetched only to be shown this turn (never adopted). */
  private readonly peeked = new Map<string, SegmentFetch>();
  /** The table's rows of offloaded segments being loaded back (items returned into an offloaded head). */
  private readonly rowsOfOffloaded = new Map<string, readonly SegmentEntry[]>();
  /** Priorities pushed to this turn (offloading runs for them) and whose head was worked on (loading back runs for them). */
  private readonly pushed = new Set<number>();
  private readonly headTouched = new Set<number>();
  /** Delayed items (stored, or pushed this turn), not counting those this turn moved. */
  private delayedItems: number;
  /** Due time of the earliest delayed item (stored and not moved, or pushed this turn); null: none. */
  private nextDue: number | null;
  private delayedSeq: number;
  /** The due items read for this turn, until {@link moveDueItems} takes them. */
  private dueFetch: DueFetch | undefined;
  /** Due items were moved this turn: the table still holds them until the write, so no second read. */
  private movedDue = false;
  /** Deduplication ids checked this turn: true when live (accepted within the window, by an earlier turn or this one). */
  private readonly dedupLive = new Map<string, boolean>();
  /** Shared locks: what the queue row records (the locks themselves stay in the table). */
  private shared: { live: number; items: number; nextExpiry: number | null };
  /** Shared locks read this turn (null: no such lock). */
  private readonly lockRows = new Map<string, LockState | null>();
  /** Due shared locks read for this turn, until {@link expireSharedLocks} takes them. */
  private dueLocks: { locks: readonly LockState[]; nextExpiry: number | null } | undefined;
  /** The due shared locks were given back this turn. */
  private expiredDue = false;
  /** The exact earliest expiry of a live shared lock was read this turn. */
  private nextExpiryExact = false;
  /** Given-back items read this turn, per priority. */
  private readonly returnedCache = new Map<number, ReturnedCache>();
  /** How many given-back rows were last asked for, per priority. */
  private readonly returnedAsked = new Map<number, number>();

  private constructor(settings: QueueSettings, version: number | null, lock: LockState | null, delayed: DelayedSummary = NO_DELAYED, shared: SharedLockSummary = NO_SHARED_LOCKS) {
    this.currentSettings = settings;
    this.shared = { ...shared };
    this.storedVersion = version;
    this.exists = version !== null;
    this.lock = lock;
    this.delayedItems = delayed.count;
    this.nextDue = delayed.nextDueAt;
    this.delayedSeq = delayed.nextSeq;
  }

  /** A queue with no row: pops find nothing, the first push creates it. */
  static absent(settings: QueueSettings): QueueCore {
    return new QueueCore(settings, null, null);
  }

  /** A queue as stored. */
  static fromRecord(record: QueueRecord): QueueCore {
    const core = new QueueCore(record.settings, record.version, record.lock, record.delayed, record.shared);
    for (const [p, meta] of Object.entries(record.priorities)) core.priorities.set(Number(p), { ...meta });
    return core;
  }

  /** The version the queue's row has as far as this core knows; null when it has no row. */
  get version(): number | null {
    return this.storedVersion;
  }

  get isPresent(): boolean {
    return this.exists;
  }

  get settings(): QueueSettings {
    return this.currentSettings;
  }

  get lockMode(): LockMode {
    return this.currentSettings.lockMode ?? 'exclusive';
  }

  /** Shared locks as the queue row records them. */
  get sharedLocks(): SharedLockSummary {
    return { ...this.shared };
  }

  /** Items waiting (not held by a lock), given-back ones included. */
  get count(): number {
    let total = 0;
    for (const meta of this.priorities.values()) total += meta.count + (meta.returned ?? 0);
    return total;
  }

  /** Delayed items: stored apart from the segments, invisible until due and moved. */
  get delayedCount(): number {
    return this.delayedItems;
  }

  /** Due time (epoch ms) of the earliest delayed item; null when there is none. */
  get nextDueAt(): number | null {
    return this.nextDue;
  }

  /** Whether delayed items are due at `now` and not moved yet (after {@link moveDueItems}: a backlog for the next turn). */
  hasDueItems(now: number): boolean {
    return this.nextDue !== null && this.nextDue <= now;
  }

  /** Items held in memory. */
  get itemsInMemory(): number {
    return this.cachedItems;
  }

  /** Priorities that have an entry (they hold items, or shared locks hold some of theirs), lowest (popped first) first. */
  priorityList(): readonly number[] {
    this.sortedPriorities ??= [...this.priorities.keys()].sort((a, b) => a - b);
    return this.sortedPriorities;
  }

  meta(priority: number): Readonly<PriorityMetadata> | undefined {
    return this.priorities.get(priority);
  }

  /** Whether the metadata says a segment is in the offload store. */
  isOffloadedSegment(priority: number, segment: number): boolean {
    return this.isOffloaded(this.priorities.get(priority), segment);
  }

  /** Segment numbers of a priority held in memory, ascending. */
  cachedSegments(priority: number): number[] {
    return [...(this.cache.get(priority)?.keys() ?? [])].sort((a, b) => a - b);
  }

  // ---------------------------------------------------------------------------------------
  // operations

  /**
   * Pushes items in order: each is appended at the tail of its priority, or, with a delay, put
   * aside until it is due (see {@link moveDueItems}). A full tail segment
   * (`next_position == segment_size`) gets a successor. Needs no segment in memory.
   *
   * An item whose dedup id is live (accepted on this queue within the window, by an earlier
   * turn, an earlier operation of this turn or an earlier item of this push) is skipped; an
   * accepted id is remembered until `now + dedupWindowMs`, written with the turn. Throws
   * {@link MissingDedupIds}, before changing anything, for ids not checked this turn.
   */
  push(items: readonly NewItem[], now = 0, dedupWindowMs = 0): PushOutcome {
    if (items.some((i) => i.dedupId !== undefined)) this.checkDedupIds(items.flatMap((i) => (i.dedupId !== undefined ? [i.dedupId] : [])));
    let enqueued = 0;
    let duplicates = 0;
    for (const item of items) {
      const { dedupId, delayMs } = item;
      if (dedupId !== undefined) {
        if (this.dedupLive.get(dedupId) === true) {
          duplicates += 1;
          continue;
        }
        this.dedupLive.set(dedupId, true);
        this.writes.dedupInserts.push({ dedupId, expiresAt: now + dedupWindowMs });
      }
      if (delayMs !== undefined && delayMs > 0) this.addDelayed(now + delayMs, item.priority, item.json);
      else this.append(item.priority, item.json);
      enqueued += 1;
    }
    if (enqueued > 0) {
      this.exists = true;
      this.touch();
    }
    return { enqueued, duplicates };
  }

  /**
   * Makes sure every dedup id given was checked this turn: throws {@link MissingDedupIds} for
   * those not checked (the runner calls it for all the pushes of a turn at once, so that one
   * read serves them). A queue with no row has nothing stored: its ids are all new.
   */
  checkDedupIds(ids: readonly string[]): void {
    if (ids.length === 0 || this.storedVersion === null) return;
    const unknown = [...new Set(ids.filter((id) => !this.dedupLive.has(id)))];
    if (unknown.length > 0) throw new MissingDedupIds(unknown);
  }

  /** Hands over which of the ids asked for by {@link MissingDedupIds} are live. */
  provideDedupIds(ids: readonly string[], live: ReadonlySet<string>): void {
    for (const id of ids) if (!this.dedupLive.has(id)) this.dedupLive.set(id, live.has(id));
  }

  /**
   * The hook at the start of every turn: delayed items due at `now` join the tails of their
   * priorities, in due-time order, ties in push order, before the turn's operations look at
   * the queue. Throws {@link MissingDueItems} (before changing anything) to have them read. One
   * read per turn, of at most `limit` items: if more are due, {@link hasDueItems} stays true
   * and the runner gives the backlog turns of its own before any operation, so nothing pushed
   * later overtakes a due item. Returns how many items were moved, or undefined when none was
   * due (no read: the queue row carries the earliest due time).
   */
  moveDueItems(now: number, limit = MAX_DUE_PER_TURN): number | undefined {
    if (this.movedDue || !this.hasDueItems(now)) return undefined;
    const fetched = this.dueFetch;
    if (!fetched) throw new MissingDueItems(now, limit);
    this.dueFetch = undefined;
    this.movedDue = true;
    const moved = fetched.items.slice(0, limit).filter((d) => d.dueAt <= now);
    for (const d of moved) this.append(d.priority, d.json);
    if (moved.length > 0) {
      const last = moved[moved.length - 1];
      this.writes.delayedDeleteThrough = { dueAt: last.dueAt, seq: last.seq };
      this.exists = true;
    }
    // Earliest of what stays: the stored items after the moved ones, and any pushed this turn.
    let next = moved.length === fetched.items.length ? fetched.nextDueAt : fetched.items[moved.length].dueAt;
    for (const d of this.writes.delayedInserts) if (next === null || d.dueAt < next) next = d.dueAt;
    this.nextDue = next;
    this.delayedItems = next === null ? 0 : Math.max(this.delayedItems - moved.length, this.writes.delayedInserts.length);
    this.writes.delayedChanged = true;
    this.touch();
    return moved.length;
  }

  /** Hands over what {@link MissingDueItems} asked for. */
  provideDueItems(fetch: DueFetch): void {
    this.dueFetch = fetch;
  }

  /**
   * Removes up to `depth` items from the front: lowest priority first, FIFO within a priority,
   * spilling into the next priority. Emptied head segments are deleted and the head moves on;
   * a priority's metadata goes with its last item. With `ack`, the items are held by a new lock.
   * Never passes a segment that could not be loaded (that would reorder items).
   */
  pop(depth: number, ack?: { readonly lockId: string; readonly now: number; readonly ttlMs: number; readonly maxLocks?: number }): PopOutcome {
    const shared = this.lockMode === 'shared';
    if (!shared && this.lock?.state === 'active') return { locked: this.lock };
    if (shared && ack && this.shared.live >= (ack.maxLocks ?? Infinity)) return { busy: true };
    const plan: { priority: number; segment: number; take: number }[] = [];
    const fromReturned = new Map<number, number>();
    const missing: SegmentRef[] = [];
    let blocked: { priority: number; segment: number } | undefined;
    let remaining = depth;
    outer: for (const priority of this.priorityList()) {
      const meta = this.priorities.get(priority)!;
      // Given-back items come first: they were pushed before everything still in the segments.
      const returned = Math.min(remaining, meta.returned ?? 0);
      if (returned > 0) {
        this.needReturned(priority, returned);
        fromReturned.set(priority, returned);
        remaining -= returned;
      }
      if (meta.count === 0) continue;
      for (let segment = meta.head_segment; remaining > 0 && segment <= meta.tail_segment; segment++) {
        const k = segKey(priority, segment);
        if (this.unavailable.has(k)) {
          blocked = { priority, segment };
          break outer;
        }
        const cached = this.cached(priority, segment);
        if (!cached) {
          missing.push(...this.refsFor(priority, segment, 'use'));
          // One offloaded segment per round: the next one comes back only after this one did
          // (the range shrinks from its bottom), and nothing is read past a failure.
          if (this.isOffloaded(meta, segment)) break outer;
        }
        const available = cached ? cached.entries.length - cached.offset : this.expectedCount(meta, segment);
        const take = Math.min(remaining, available);
        plan.push({ priority, segment, take });
        remaining -= take;
      }
      if (remaining === 0) break;
    }
    if (missing.length > 0) throw new MissingSegments(missing);

    // Shared locks keep their items' priorities alive (see PriorityMetadata.held).
    const heldAfter = new Map<number, number>();
    if (shared && ack) {
      for (const [priority, take] of fromReturned) heldAfter.set(priority, take);
      // Only priorities it takes from: a step that takes nothing must not keep an emptied priority alive.
      for (const { priority, take } of plan) if (take > 0) heldAfter.set(priority, (heldAfter.get(priority) ?? 0) + take);
    }
    const items: HeldItem[] = [];
    const planned = [...fromReturned.keys(), ...plan.map((p) => p.priority)];
    for (const priority of [...new Set(planned)].sort((a, b) => a - b)) {
      const take = fromReturned.get(priority);
      const keep = (heldAfter.get(priority) ?? 0) > 0;
      if (take) items.push(...this.takeReturned(priority, take));
      for (const step of plan) if (step.priority === priority) this.takeFromSegment(step, items, keep);
      if (!keep) this.dropIfEmpty(priority);
    }
    if (items.length === 0 && blocked && this.count > 0) return { unavailable: blocked };
    if (items.length > 0) this.touch();
    if (!ack || items.length === 0) return { items };
    const delivered = items.map((i) => ({ ...i, deliveries: (i.deliveries ?? 0) + 1 }));
    const lock: LockState = { lockId: ack.lockId, state: 'active', items: delivered, createdAt: ack.now, expiresAt: ack.now + ack.ttlMs };
    if (!shared) {
      this.setLock(lock);
      return { items: delivered, lock };
    }
    for (const [priority, n] of heldAfter) {
      const meta = this.priorities.get(priority)!;
      meta.held = (meta.held ?? 0) + n;
    }
    this.writes.sharedLocks.set(lock.lockId, lock);
    this.lockRows.set(lock.lockId, lock);
    this.shared.live += 1;
    this.shared.items += delivered.length;
    this.shared.nextExpiry = this.shared.nextExpiry === null ? lock.expiresAt : Math.min(this.shared.nextExpiry, lock.expiresAt);
    this.writes.sharedChanged = true;
    return { items: delivered, lock };
  }

  /** Takes the planned items of one segment (see {@link pop}); `keepPriority`: shared locks will hold some of the priority's items. */
  private takeFromSegment({ priority, segment, take }: { priority: number; segment: number; take: number }, items: HeldItem[], keepPriority: boolean): void {
    {
      const meta = this.priorities.get(priority)!;
      const seg = this.cached(priority, segment)!;
      for (let i = 0; i < take; i++) {
        const entry = seg.entries[seg.offset + i];
        items.push({ priority, json: entry.json, origin: { segment, position: entry.position }, deliveries: entry.deliveries ?? 0 });
      }
      seg.offset += take;
      this.cachedItems -= take;
      meta.count -= take;
      this.headTouched.add(priority);
      if (seg.offset < seg.entries.length) {
        if (take > 0) this.writes.deleteRange(priority, segment, seg.entries[seg.offset - take].position, seg.entries[seg.offset - 1].position);
        meta.head_position = seg.entries[seg.offset].position;
        // Keep memory proportional to what is still queued in this segment.
        if (seg.offset > 64 && seg.offset * 2 > seg.entries.length) {
          seg.entries = seg.entries.slice(seg.offset);
          seg.offset = 0;
        }
        return;
      }
      this.writes.deleteSegment(priority, segment);
      this.dropSegment(priority, segment);
      if (segment < meta.tail_segment) {
        meta.head_segment = segment + 1;
        meta.head_position = 0;
      } else if (keepPriority || (meta.returned ?? 0) > 0 || (meta.held ?? 0) > 0) {
        // The segments are empty but the priority lives on (given-back items, or items under
        // shared locks): the next push continues after the last item, so push order stays the
        // order of (segment, position). A full tail is left for the next segment number, so that
        // the (empty) head never sits before a full tail.
        if (meta.next_position >= this.settings.segmentSize) {
          meta.tail_segment += 1;
          meta.head_segment = meta.tail_segment;
          meta.next_position = 0;
        }
        meta.head_position = meta.next_position;
        this.cacheSegment(priority, meta.tail_segment, []);
      } else {
        // Last item of this priority: its metadata entry goes (seed 003, pop flow step 4).
        this.dropPriority(priority);
      }
    }
  }

  /** Removes a priority's entry (nothing of it is left anywhere). */
  private dropPriority(priority: number): void {
    this.priorities.delete(priority);
    this.sortedPriorities = undefined;
    this.returnedCache.delete(priority);
  }

  /** Drops the entry of a priority with nothing left in segments, given back or held. */
  private dropIfEmpty(priority: number): void {
    const meta = this.priorities.get(priority);
    if (meta && meta.count === 0 && !meta.returned && !meta.held) {
      this.writes.deleteSegment(priority, meta.tail_segment);
      this.dropSegment(priority, meta.tail_segment);
      this.dropPriority(priority);
    }
  }

  /** Makes sure the first `take` given-back items of a priority are in memory (else throws {@link MissingLockRows}). */
  private needReturned(priority: number, take: number): void {
    const cache = this.returnedCache.get(priority);
    if (cache && (cache.complete || cache.entries.length - cache.offset >= take)) return;
    // Rows this turn removed are still in the table: read past them.
    const removed = this.writes.pendingReturned(priority).removed.size;
    const limit = take + removed;
    this.returnedAsked.set(priority, limit);
    throw new MissingLockRows({ kind: 'returned', priority, limit });
  }

  /** Pops the first `take` given-back items of a priority (in memory, see {@link needReturned}). */
  private takeReturned(priority: number, take: number): HeldItem[] {
    const cache = this.returnedCache.get(priority)!;
    const meta = this.priorities.get(priority)!;
    const out: HeldItem[] = [];
    for (const entry of cache.entries.slice(cache.offset, cache.offset + take)) {
      this.writes.removeReturned(priority, entry);
      out.push({ priority, json: entry.json, origin: { segment: entry.segment, position: entry.position }, deliveries: entry.deliveries });
    }
    cache.offset += out.length;
    meta.returned = (meta.returned ?? 0) - out.length;
    if (meta.returned === 0) delete meta.returned;
    return out;
  }

  /**
   * Returns the items of an exclusive lock whose time has come (the hook at the start of every
   * turn); the count returned (items dead-lettered included), or undefined.
   */
  expireLock(now: number): number | undefined {
    const lock = this.lock;
    if (lock?.state !== 'active' || lock.expiresAt > now) return undefined;
    this.giveBack(lock.items, false);
    this.setLock({ ...lock, state: 'expired', items: [] });
    return lock.items.length;
  }

  /**
   * Gives back the items of shared locks expired at `now` (the hook at the start of every
   * turn), at most {@link MAX_EXPIRED_LOCKS_PER_TURN}; undefined when none is due (no read: the
   * queue row carries a lower bound of the earliest expiry). Throws {@link MissingLockRows}
   * (before changing anything) to have the due locks read.
   */
  expireSharedLocks(now: number): SharedExpiryOutcome | undefined {
    if (this.expiredDue || this.shared.live === 0 || this.shared.nextExpiry === null || this.shared.nextExpiry > now) return undefined;
    const due = this.dueLocks;
    if (!due) throw new MissingLockRows({ kind: 'due', now, limit: MAX_EXPIRED_LOCKS_PER_TURN });
    this.dueLocks = undefined;
    this.expiredDue = true;
    let returned = 0;
    let deadLettered = 0;
    for (const lock of due.locks) {
      const outcome = this.endSharedLock(lock, 'expire');
      returned += outcome.returned;
      deadLettered += outcome.deadLettered;
    }
    // Read exactly, unless more were due than one turn takes: then the last one read bounds the rest.
    const next = due.locks.length >= MAX_EXPIRED_LOCKS_PER_TURN ? due.locks[due.locks.length - 1].expiresAt : due.nextExpiry;
    this.shared.nextExpiry = this.shared.live === 0 ? null : (next ?? now);
    this.nextExpiryExact = due.locks.length < MAX_EXPIRED_LOCKS_PER_TURN;
    this.writes.sharedChanged = true;
    this.touch();
    return { locks: due.locks.length, returned, deadLettered };
  }

  /**
   * The contract's checks for acknowledge, extend-lock and release, in order. Shared mode has
   * no INVALID_LOCK_ID: a lock is found by its id. A shared lock found expired by time but not
   * yet given back (more were due than a turn takes) is given back now, and answers 410. So
   * does the queue's last exclusive lock, expired before the queue switched to shared mode: the
   * queue still remembers it, and its id answers as an expired lock's.
   */
  checkLock(lockId: string, now = -Infinity): LockState | LockProblem {
    if (this.lockMode === 'shared') {
      if (this.lock?.state === 'expired' && this.lock.lockId === lockId) return 'LOCK_EXPIRED';
      const lock = this.sharedLock(lockId);
      if (!lock) return 'LOCK_NOT_FOUND';
      if (lock.state === 'expired') return 'LOCK_EXPIRED';
      if (lock.expiresAt <= now) {
        this.endSharedLock(lock, 'expire');
        this.writes.sharedChanged = true;
        return 'LOCK_EXPIRED';
      }
      return lock;
    }
    const lock = this.lock;
    if (!lock) return 'LOCK_NOT_FOUND';
    if (lock.state === 'expired') return 'LOCK_EXPIRED';
    if (lock.lockId !== lockId) return 'INVALID_LOCK_ID';
    return lock;
  }

  /** Removes the lock and its items for good; the number of items, or why not. */
  acknowledge(lockId: string, now?: number): number | LockProblem {
    const lock = this.checkLock(lockId, now);
    if (typeof lock === 'string') return lock;
    if (this.lockMode === 'shared') this.endSharedLock(lock, 'acknowledge');
    else this.setLock(null);
    return lock.items.length;
  }

  /** Sets the lock's expiry to `now + ttlMs`. */
  extendLock(lockId: string, now: number, ttlMs: number): LockState | LockProblem {
    const lock = this.checkLock(lockId, now);
    if (typeof lock === 'string') return lock;
    const extended = { ...lock, expiresAt: now + ttlMs };
    if (this.lockMode === 'shared') {
      this.writes.sharedLocks.set(lockId, extended);
      this.lockRows.set(lockId, extended);
      // The row's earliest expiry stays a lower bound: a later expiry leaves it, an earlier one (a short ttl) lowers it.
      if (this.shared.nextExpiry === null || extended.expiresAt < this.shared.nextExpiry) {
        this.shared.nextExpiry = extended.expiresAt;
        this.writes.sharedChanged = true;
      } else {
        this.nextExpiryExact = false;
      }
      this.touch();
    } else {
      this.setLock(extended);
    }
    return extended;
  }

  /** Gives the lock's items back now (to where they were; dead-lettered past `maxDeliveries`) and removes the lock. */
  release(lockId: string, now?: number): number | LockProblem {
    return this.releaseLock(lockId, now).returned;
  }

  /** {@link release}, telling items given back from items dead-lettered. */
  releaseLock(lockId: string, now?: number): { returned: number | LockProblem; outcome?: GiveBackOutcome } {
    const lock = this.checkLock(lockId, now);
    if (typeof lock === 'string') return { returned: lock };
    if (this.lockMode === 'shared') return { returned: lock.items.length, outcome: this.endSharedLock(lock, 'release') };
    const outcome = this.giveBack(lock.items, false);
    this.setLock(null);
    return { returned: lock.items.length, outcome };
  }

  /**
   * Changes the queue's settings (creating the queue if it has no row). The segment layout
   * changes only while the queue holds nothing (items, delayed items, locks); the lock mode
   * only while no lock lives.
   */
  updateSettings(patch: SettingsPatch): QueueSettings | SettingsProblem {
    const current = this.currentSettings;
    const live = this.lock?.state === 'active' || this.shared.live > 0;
    const layout = (patch.segmentSize !== undefined && patch.segmentSize !== current.segmentSize) || (patch.bufferSegments !== undefined && patch.bufferSegments !== current.bufferSegments);
    if (layout && (this.count > 0 || this.delayedItems > 0 || live || this.priorities.size > 0)) return 'QUEUE_NOT_EMPTY';
    if (patch.lockMode !== undefined && patch.lockMode !== this.lockMode && live) return 'QUEUE_LOCKED';
    const next: QueueSettings = {
      segmentSize: patch.segmentSize ?? current.segmentSize,
      bufferSegments: patch.bufferSegments ?? current.bufferSegments,
      lockMode: patch.lockMode ?? this.lockMode,
      maxDeliveries: patch.maxDeliveries !== undefined ? patch.maxDeliveries : (current.maxDeliveries ?? null),
      deadLetterQueue: patch.deadLetterQueue !== undefined ? patch.deadLetterQueue : (current.deadLetterQueue ?? null),
    };
    this.currentSettings = next;
    this.writes.settingsChanged = true;
    this.exists = true;
    this.touch();
    return next;
  }

  /** Hands over what {@link MissingLockRows} asked for. */
  provideLockRows(fetch: LockRowsFetch): void {
    switch (fetch.kind) {
      case 'locks':
        for (const [id, lock] of fetch.locks) if (!this.lockRows.has(id)) this.lockRows.set(id, lock);
        return;
      case 'due':
        this.dueLocks = { locks: fetch.locks, nextExpiry: fetch.nextExpiry };
        return;
      case 'next': {
        // The stored locks this turn did not write, and those it wrote that still live.
        let next = fetch.nextExpiry;
        for (const lock of this.writes.sharedLocks.values()) if (lock?.state === 'active' && (next === null || lock.expiresAt < next)) next = lock.expiresAt;
        if (this.shared.live > 0 && next !== null && next !== this.shared.nextExpiry) {
          // Tightened: written with the turn, so that the sweep does not find the old bound again.
          this.shared.nextExpiry = next;
          this.writes.sharedChanged = true;
          this.touch();
        }
        this.nextExpiryExact = true;
        return;
      }
      case 'returned': {
        const { removed, added } = this.writes.pendingReturned(fetch.priority);
        // What was read, minus what this turn popped again, plus what it gave back; a full read
        // is only a prefix: what it gave back past the last row read is not part of it.
        // Fewer rows than asked for: the table holds no more.
        const complete = fetch.entries.length < (this.returnedAsked.get(fetch.priority) ?? Infinity);
        const rows = fetch.entries.filter((e) => !removed.has(`${e.segment}:${e.position}`));
        const last = fetch.entries[fetch.entries.length - 1];
        const merged = [...rows, ...added.filter((e) => complete || byOrigin(e, last) < 0)].sort(byOrigin);
        this.returnedCache.set(fetch.priority, { entries: merged, offset: 0, complete });
        return;
      }
    }
  }

  /** A shared lock as known this turn; throws {@link MissingLockRows} to have it read. */
  private sharedLock(lockId: string): LockState | null {
    if (this.writes.sharedLocks.has(lockId)) return this.writes.sharedLocks.get(lockId) ?? null;
    if (this.lockRows.has(lockId)) return this.lockRows.get(lockId) ?? null;
    throw new MissingLockRows({ kind: 'locks', ids: [lockId] });
  }

  /** Ends a live shared lock: acknowledged (items gone), released (row gone, items back) or expired (row kept, items back). */
  private endSharedLock(lock: LockState, how: 'acknowledge' | 'release' | 'expire'): GiveBackOutcome {
    let outcome: GiveBackOutcome = { returned: 0, deadLettered: 0 };
    if (how === 'acknowledge') {
      this.unhold(lock.items);
      this.settle(lock.items);
    } else {
      outcome = this.giveBack(lock.items, true);
    }
    const ended = how === 'expire' ? { ...lock, state: 'expired' as const, items: [] } : null;
    this.writes.sharedLocks.set(lock.lockId, ended);
    this.lockRows.set(lock.lockId, ended);
    this.shared.live = Math.max(0, this.shared.live - 1);
    this.shared.items = Math.max(0, this.shared.items - lock.items.length);
    if (this.shared.live === 0) this.shared.nextExpiry = null;
    // It may have been the earliest: what the row keeps is a lower bound again.
    this.nextExpiryExact = false;
    this.writes.sharedChanged = true;
    this.touch();
    return outcome;
  }

  /**
   * Gives a lock's items back. An item that reached `maxDeliveries` (with a dead-letter queue
   * set) goes to the dead-letter queue's tail instead, written by the same turn. The others go
   * back to where they were in push order: from a shared lock, or while given-back items of
   * their priority wait, among the given-back items (by origin); otherwise to the front of
   * their priority, as the seeds' exclusive lock does.
   */
  private giveBack(items: readonly HeldItem[], fromShared: boolean): GiveBackOutcome {
    const { maxDeliveries, deadLetterQueue } = this.currentSettings;
    const back = new Map<number, HeldItem[]>();
    let deadLettered = 0;
    if (fromShared) this.unhold(items);
    for (const item of items) {
      if (maxDeliveries != null && deadLetterQueue && (item.deliveries ?? 0) >= maxDeliveries) {
        this.writes.deadLetters.push(item);
        deadLettered += 1;
        continue;
      }
      const list = back.get(item.priority) ?? [];
      list.push(item);
      back.set(item.priority, list);
    }
    const toFront: HeldItem[] = [];
    for (const [priority, list] of back) {
      const meta = this.priorities.get(priority);
      const keyed = list.every((i) => i.origin !== undefined);
      if (meta && keyed && (fromShared || (meta.returned ?? 0) > 0)) this.addReturned(priority, meta, list);
      else toFront.push(...list);
    }
    this.returnToFront(toFront);
    this.settle(items);
    if (deadLettered > 0) this.touch();
    return { returned: items.length - deadLettered, deadLettered };
  }

  /** Items a shared lock held are no longer held (acknowledged, or about to be given back). */
  private unhold(items: readonly HeldItem[]): void {
    for (const item of items) {
      const meta = this.priorities.get(item.priority);
      if (meta) meta.held = Math.max(0, (meta.held ?? 0) - 1);
    }
  }

  /** After a lock ended: the items' priorities drop a `held` of 0, and their entries if nothing of them is left. */
  private settle(items: readonly HeldItem[]): void {
    for (const priority of new Set(items.map((i) => i.priority))) {
      const meta = this.priorities.get(priority);
      if (meta && meta.held === 0) delete meta.held;
      this.dropIfEmpty(priority);
    }
  }

  /** Items go back among the given-back items of their priority, each by where it was pushed. */
  private addReturned(priority: number, meta: PriorityMetadata, items: readonly HeldItem[]): void {
    const entries = items.map((i) => ({ segment: i.origin!.segment, position: i.origin!.position, json: i.json, deliveries: i.deliveries ?? 0 }));
    for (const entry of entries) this.writes.addReturned(priority, entry);
    meta.returned = (meta.returned ?? 0) + entries.length;
    const cache = this.returnedCache.get(priority);
    if (cache) {
      const last = cache.entries[cache.entries.length - 1];
      const kept = cache.entries.slice(cache.offset);
      for (const entry of entries) if (cache.complete || (last !== undefined && byOrigin(entry, last) < 0)) kept.push(entry);
      cache.entries = kept.sort(byOrigin);
      cache.offset = 0;
    }
    this.exists = true;
    this.touch();
  }

  /** Deletes the queue with everything in it; the items it held (waiting, locked and delayed), or undefined when there is no queue. */
  deleteQueue(): number | undefined {
    if (!this.exists) return undefined;
    const held = (this.lock?.state === 'active' ? this.lock.items.length : 0) + this.shared.items;
    const deleted = this.count + held + this.delayedItems;
    for (const [priority, meta] of this.priorities) {
      if (meta.head_offloaded_segment === null || meta.tail_offloaded_segment === null) continue;
      for (let s = meta.head_offloaded_segment; s <= meta.tail_offloaded_segment; s++) this.writes.storeDeletes.push({ priority, segment: s });
    }
    this.priorities.clear();
    this.sortedPriorities = undefined;
    this.cache.clear();
    this.cachedItems = 0;
    this.lock = null;
    this.shared = { ...NO_SHARED_LOCKS };
    this.returnedCache.clear();
    this.delayedItems = 0;
    this.nextDue = null;
    this.delayedSeq = 0;
    this.exists = false;
    this.deleted = true;
    return deleted;
  }

  /** The queue as inspection shows it; undefined when there is no queue. */
  view(): QueueView | undefined {
    if (!this.exists) return undefined;
    if (this.shared.live > 0 && !this.nextExpiryExact) throw new MissingLockRows({ kind: 'next', exclude: [...this.writes.sharedLocks.keys()] });
    const priorities = new Map<number, PriorityView>();
    for (const p of this.visiblePriorities()) {
      const m = this.priorities.get(p)!;
      // `count`: every item waiting at the priority, given-back ones (kept apart from the segments) included.
      const view = { ...m, count: m.count + (m.returned ?? 0) };
      priorities.set(p, { ...view, head_segment_count: this.expectedCount(m, m.head_segment), tail_segment_count: m.head_segment === m.tail_segment ? m.count : m.next_position });
    }
    const locks = this.lockMode === 'shared' ? { count: this.shared.live, itemCount: this.shared.items, nextExpiresAt: this.shared.nextExpiry } : null;
    return { count: this.count, priorities, settings: this.settings, lock: this.lock, locks, delayed: this.delayedItems };
  }

  /** Priorities with items waiting (an entry kept only for items under shared locks is not shown). */
  private visiblePriorities(): number[] {
    return this.priorityList().filter((p) => {
      const m = this.priorities.get(p)!;
      return m.count + (m.returned ?? 0) > 0;
    });
  }

  /** The raw state under seed 003's key names (metadata document, a segment in state, an offloaded segment). */
  lookupState(queueId: string, key: string): StateLookup {
    if (!this.exists) return 'not-found';
    if (key === 'metadata') return { value: this.metadataDocument() };
    const offloaded = OFFLOADED_KEY.exec(key);
    if (offloaded && offloaded[3] === queueId) {
      const [priority, segment] = [Number(offloaded[1]), Number(offloaded[2])];
      if (!this.isOffloaded(this.priorities.get(priority), segment)) return 'not-found';
      const fetched = this.peek({ priority, segment, from: 'offload', purpose: 'peek' });
      if ('failed' in fetched) return { unavailable: { priority, segment } };
      return fetched.entries ? { value: fetched.entries.map((e) => JSON.parse(e.json) as unknown) } : 'not-found';
    }
    const match = SEGMENT_KEY.exec(key);
    if (!match) return 'not-found';
    const [priority, segment] = [Number(match[1]), Number(match[2])];
    const meta = this.priorities.get(priority);
    if (!meta || segment < meta.head_segment || segment > meta.tail_segment || this.isOffloaded(meta, segment)) return 'not-found';
    const cached = this.cached(priority, segment);
    const entries = cached ? cached.entries.slice(cached.offset) : (this.peek({ priority, segment, from: 'state', purpose: 'peek' }) as { entries: SegmentEntry[] }).entries;
    return entries.length > 0 ? { value: entries.map((e) => JSON.parse(e.json) as unknown) } : 'not-found';
  }

  /** Seed 003's metadata document (never the lock). */
  metadataDocument(): unknown {
    const queues: Record<string, { metadata: Record<string, number> }> = {};
    for (const p of this.visiblePriorities()) {
      const m = this.priorities.get(p)!;
      // The segments' items: given-back ones wait apart from them (GET /queue/{id} counts them at their priority).
      const metadata: Record<string, number> = { count: m.count, head_segment: m.head_segment, tail_segment: m.tail_segment };
      if (m.head_offloaded_segment !== null && m.tail_offloaded_segment !== null) {
        metadata.head_offloaded_segment = m.head_offloaded_segment;
        metadata.tail_offloaded_segment = m.tail_offloaded_segment;
      }
      queues[`queue_${p}`] = { metadata };
    }
    return { config: { segment_size: this.settings.segmentSize, buffer_segments: this.settings.bufferSegments }, queues };
  }

  // ---------------------------------------------------------------------------------------
  // offloading (seed 003), planned here and carried out by the runner

  /**
   * Keeps the invariant at rest for every priority whose head was worked on this turn: no
   * segment with `n <= head_segment + buffer_segments` stays in the offload store. Throws
   * {@link MissingSegments} for the next one to load; once it is provided (or could not be
   * read), the runner calls this again until it returns.
   */
  loadBack(): void {
    const missing: SegmentRef[] = [];
    for (const priority of this.headTouched) {
      const meta = this.priorities.get(priority);
      if (!meta || meta.head_offloaded_segment === null) continue;
      const segment = meta.head_offloaded_segment;
      if (segment > meta.head_segment + this.settings.bufferSegments || this.unavailable.has(segKey(priority, segment))) continue;
      missing.push(...this.refsFor(priority, segment, 'use'));
    }
    if (missing.length > 0) throw new MissingSegments(missing);
  }

  /**
   * After pushes: the full middle segments past the buffer that should move to the offload
   * store, per priority in ascending order (the offloaded range grows at its top). The runner
   * saves them and reports each success with {@link offloaded}, stopping a priority at its
   * first failure so that the range stays contiguous.
   */
  planOffload(): OffloadMove[] {
    const moves: OffloadMove[] = [];
    const missing: SegmentRef[] = [];
    for (const priority of this.pushed) {
      const meta = this.priorities.get(priority);
      if (!meta) continue;
      const first = meta.tail_offloaded_segment !== null ? meta.tail_offloaded_segment + 1 : meta.head_segment + this.settings.bufferSegments + 1;
      for (let segment = first; segment < meta.tail_segment; segment++) {
        const cached = this.cached(priority, segment);
        if (!cached) missing.push(...this.refsFor(priority, segment, 'use'));
        else moves.push({ priority, segment, items: cached.entries.slice(cached.offset).map((e) => e.json) });
      }
    }
    if (missing.length > 0) throw new MissingSegments(missing);
    return moves;
  }

  /** A planned move's segment is in the offload store now: its rows go, the range grows by it. */
  offloaded(priority: number, segment: number): void {
    const meta = this.priorities.get(priority);
    if (!meta) return;
    this.writes.deleteSegment(priority, segment);
    this.dropSegment(priority, segment);
    meta.head_offloaded_segment ??= segment;
    meta.tail_offloaded_segment = segment;
    this.touch();
  }

  // ---------------------------------------------------------------------------------------
  // the runner's side of a turn

  /**
   * Hands over a segment asked for by {@link MissingSegments}. From the table: merged with the
   * turn's pending row changes and kept in memory (until the end of the turn if outside the
   * window). From the offload store for use: loaded back (its rows are written again, its
   * store copy is deleted after commit, the offloaded range shrinks); if the store could not
   * be read, nothing is taken past it this turn.
   */
  provide(ref: SegmentRef, fetch: SegmentFetch): void {
    const k = segKey(ref.priority, ref.segment);
    if (ref.purpose === 'peek') {
      this.peeked.set(k, ref.from === 'state' && !('failed' in fetch) ? { entries: this.merged(ref.priority, ref.segment, fetch.entries ?? []) } : fetch);
      return;
    }
    const meta = this.priorities.get(ref.priority);
    if (ref.from === 'state') {
      const rows = 'failed' in fetch ? [] : (fetch.entries ?? []);
      if (this.isOffloaded(meta, ref.segment)) this.rowsOfOffloaded.set(k, rows);
      else this.cacheSegment(ref.priority, ref.segment, this.merged(ref.priority, ref.segment, rows));
      return;
    }
    // Only the bottom of the offloaded range can come back, so that the range stays contiguous.
    if (!meta || meta.head_offloaded_segment !== ref.segment) return;
    if ('failed' in fetch || fetch.entries === undefined) {
      this.unavailable.add(k);
      return;
    }
    const loaded = fetch.entries;
    // The table's rows of the segment (items returned into it while it was out) as the turn left them.
    const rows = this.merged(ref.priority, ref.segment, this.rowsOfOffloaded.get(k) ?? []);
    const entries = [...rows, ...loaded].sort((a, b) => a.position - b.position);
    this.writes.insert(ref.priority, ref.segment, loaded);
    this.writes.storeDeletes.push({ priority: ref.priority, segment: ref.segment });
    this.rowsOfOffloaded.delete(k);
    const last = meta.tail_offloaded_segment!;
    meta.head_offloaded_segment = ref.segment < last ? ref.segment + 1 : null;
    meta.tail_offloaded_segment = ref.segment < last ? last : null;
    this.cacheSegment(ref.priority, ref.segment, entries);
    this.touch();
  }

  /**
   * The turn's row changes as one write, or undefined when the turn changed nothing (the
   * runner then only checks that the stored version is still the one this core holds).
   * @param createdVersion - gives the version a queue created by this turn starts at
   */
  pendingWrite(createdVersion: () => number): TurnWrite | undefined {
    if (this.deleted) {
      if (this.storedVersion === null) return undefined;
      return {
        expectedVersion: this.storedVersion,
        newVersion: this.storedVersion + 1,
        deleteQueue: true,
        settings: this.settings,
        itemCount: 0,
        priorities: {},
        deletes: [],
        inserts: [],
        lock: undefined,
        delayed: NO_DELAYED,
        delayedInserts: [],
        delayedDeleteThrough: null,
        dedupInserts: [],
        shared: null,
        sharedLockUpserts: [],
        sharedLockDeletes: [],
        returnedInserts: [],
        returnedDeletes: [],
        deadLetters: null,
      };
    }
    if (this.writes.isEmpty) return undefined;
    const returned = this.writes.returnedRows();
    const upserts: LockState[] = [];
    const deletes: string[] = [];
    for (const [id, lock] of this.writes.sharedLocks) {
      if (lock) upserts.push(lock);
      else deletes.push(id);
    }
    const deadLetterQueue = this.currentSettings.deadLetterQueue;
    const priorities: Record<string, PriorityMetadata> = {};
    for (const p of this.priorityList()) priorities[String(p)] = { ...this.priorities.get(p)! };
    return {
      expectedVersion: this.storedVersion,
      newVersion: this.storedVersion === null ? createdVersion() : this.storedVersion + 1,
      deleteQueue: false,
      settings: this.settings,
      settingsChanged: this.writes.settingsChanged,
      itemCount: this.count,
      priorities,
      deletes: this.writes.deleteRows(),
      inserts: this.writes.insertRows(),
      lock: this.writes.lock,
      delayed: this.writes.delayedChanged ? { count: this.delayedItems, nextDueAt: this.nextDue, nextSeq: this.delayedSeq } : null,
      delayedInserts: this.writes.delayedInserts,
      delayedDeleteThrough: this.writes.delayedDeleteThrough,
      dedupInserts: this.writes.dedupInserts,
      shared: this.writes.sharedChanged ? { ...this.shared } : null,
      sharedLockUpserts: upserts,
      sharedLockDeletes: deletes,
      returnedInserts: returned.inserts,
      returnedDeletes: returned.deletes,
      deadLetters: this.writes.deadLetters.length > 0 && deadLetterQueue ? { queueId: deadLetterQueue, items: this.writes.deadLetters } : null,
    };
  }

  /** Offloaded segments to delete from the store once the turn's write has committed. */
  storeDeletes(): readonly { priority: number; segment: number }[] {
    return this.writes.storeDeletes;
  }

  /**
   * The queue as committed, in the form activating it reads: its record, and the rows of the
   * front segment (the head segment of its lowest priority holding items in segments), so that
   * another process can activate the queue from it without a read. Only for a queue that memory
   * holds entirely: no lock (exclusive or shared), no delayed item, no given-back or held item,
   * and a front segment in memory (not offloaded) with every row the metadata counts.
   * Undefined otherwise, or when nothing is in the segments, or in the middle of a turn.
   */
  snapshot(): QueueSnapshot | undefined {
    if (this.storedVersion === null || this.deleted || !this.writes.isEmpty || this.lock !== null) return undefined;
    if (this.shared.live !== 0 || this.shared.items !== 0 || this.delayedItems !== 0 || this.nextDue !== null) return undefined;
    let front: QueueSnapshot['front'] | undefined;
    for (const priority of this.priorityList()) {
      const meta = this.priorities.get(priority)!;
      if ((meta.returned ?? 0) !== 0 || (meta.held ?? 0) !== 0) return undefined;
      if (front || meta.count === 0) continue;
      const segment = meta.head_segment;
      const seg = this.cached(priority, segment);
      if (!seg || this.isOffloaded(meta, segment)) return undefined;
      const entries = seg.entries.slice(seg.offset);
      if (entries.length !== this.expectedCount(meta, segment) || entries[0].position !== meta.head_position) return undefined;
      front = { priority, segment, entries };
    }
    if (!front) return undefined;
    const priorities: Record<string, PriorityMetadata> = {};
    for (const [priority, meta] of this.priorities) priorities[priority] = { ...meta };
    return {
      record: { version: this.storedVersion, settings: { ...this.currentSettings }, priorities, lock: null, delayed: { count: 0, nextDueAt: null, nextSeq: this.delayedSeq }, shared: { ...this.shared } },
      front,
    };
  }

  /** The turn's write (if any) has committed: the core now mirrors the stored queue. Ends the turn. */
  committed(write: TurnWrite | undefined): void {
    if (write) this.storedVersion = write.deleteQueue ? null : write.newVersion;
    this.deleted = false;
    this.writes = new WriteSet();
    this.unavailable.clear();
    this.peeked.clear();
    this.rowsOfOffloaded.clear();
    this.pushed.clear();
    this.headTouched.clear();
    this.dueFetch = undefined;
    this.movedDue = false;
    this.dedupLive.clear();
    this.lockRows.clear();
    this.dueLocks = undefined;
    this.expiredDue = false;
    this.nextExpiryExact = false;
    this.returnedCache.clear();
    this.returnedAsked.clear();
    for (const priority of [...this.cache.keys()]) this.evictOutsideWindow(priority);
  }

  // ---------------------------------------------------------------------------------------
  // internals

  private touch(): void {
    this.writes.metadataChanged = true;
  }

  /** Appends one item at the tail of its priority; a full tail segment gets a successor. */
  private append(priority: number, json: string): void {
    const meta = this.priorities.get(priority) ?? this.addPriority(priority);
    if (meta.next_position >= this.settings.segmentSize) {
      meta.tail_segment += 1;
      meta.next_position = 0;
      // A new segment number: nothing is stored under it.
      this.cacheSegment(priority, meta.tail_segment, []);
    }
    const entry: SegmentEntry = { position: meta.next_position, json };
    meta.next_position += 1;
    meta.count += 1;
    this.writes.insert(priority, meta.tail_segment, [entry]);
    const cached = this.cached(priority, meta.tail_segment);
    if (cached) {
      cached.entries.push(entry);
      this.cachedItems += 1;
    }
    this.pushed.add(priority);
  }

  /** Puts an item aside until `dueAt`, after every delayed item pushed before it that is due at the same time. */
  private addDelayed(dueAt: number, priority: number, json: string): void {
    this.writes.delayedInserts.push({ dueAt, seq: this.delayedSeq, priority, json });
    this.delayedSeq += 1;
    this.delayedItems += 1;
    this.writes.delayedChanged = true;
    if (this.nextDue === null || dueAt < this.nextDue) this.nextDue = dueAt;
  }

  private setLock(lock: LockState | null): void {
    this.lock = lock;
    this.writes.lock = lock ? { op: 'upsert', lock } : { op: 'delete' };
  }

  private addPriority(priority: number): PriorityMetadata {
    const meta = newPriority();
    this.priorities.set(priority, meta);
    this.sortedPriorities = undefined;
    // A new priority starts at segment 0, which holds nothing (an emptied priority's segments
    // were all deleted, in this turn or before).
    this.cacheSegment(priority, 0, []);
    return meta;
  }

  /**
   * Puts items back at the front of their priorities, ahead of everything queued there, in
   * the given order. The head segment may grow past `segment_size` for a while (seed 003, edge
   * case 3). Needs no segment in memory.
   */
  private returnToFront(items: readonly HeldItem[]): void {
    const byPriority = new Map<number, HeldItem[]>();
    for (const item of items) {
      const list = byPriority.get(item.priority) ?? [];
      list.push(item);
      byPriority.set(item.priority, list);
    }
    for (const [priority, held] of byPriority) {
      const existing = this.priorities.get(priority);
      const meta = existing ?? this.addPriority(priority);
      const start = existing ? meta.head_position - held.length : 0;
      const entries: SegmentEntry[] = held.map(({ json, deliveries }, i) => (deliveries ? { position: start + i, json, deliveries } : { position: start + i, json }));
      meta.count += entries.length;
      if (existing) meta.head_position = start;
      else meta.next_position = entries.length;
      const cached = this.cached(priority, meta.head_segment);
      if (cached) {
        cached.entries = existing ? entries.concat(cached.entries.slice(cached.offset)) : entries;
        cached.offset = 0;
        this.cachedItems += entries.length;
      }
      this.writes.insert(priority, meta.head_segment, entries);
      this.headTouched.add(priority);
    }
    if (items.length > 0) {
      this.exists = true;
      this.touch();
    }
  }

  /** Refs to fetch so that a segment can be worked on: an offloaded one also needs the table's rows (items returned into it). */
  private refsFor(priority: number, segment: number, purpose: 'use'): SegmentRef[] {
    if (!this.isOffloaded(this.priorities.get(priority), segment)) return [{ priority, segment, from: 'state', purpose }];
    const refs: SegmentRef[] = [];
    if (!this.rowsOfOffloaded.has(segKey(priority, segment))) refs.push({ priority, segment, from: 'state', purpose });
    refs.push({ priority, segment, from: 'offload', purpose });
    return refs;
  }

  private peek(ref: SegmentRef): SegmentFetch {
    const fetched = this.peeked.get(segKey(ref.priority, ref.segment));
    if (!fetched) throw new MissingSegments([ref]);
    return fetched;
  }

  private isOffloaded(meta: PriorityMetadata | undefined, segment: number): boolean {
    return !!meta && meta.head_offloaded_segment !== null && meta.tail_offloaded_segment !== null && segment >= meta.head_offloaded_segment && segment <= meta.tail_offloaded_segment;
  }

  /** Items of a segment according to the metadata: middle segments are full, the tail holds `next_position`. */
  private expectedCount(meta: PriorityMetadata, segment: number): number {
    if (meta.head_segment === meta.tail_segment) return meta.count;
    if (segment === meta.tail_segment) return meta.next_position;
    if (segment === meta.head_segment) return meta.count - meta.next_position - (meta.tail_segment - meta.head_segment - 1) * this.settings.segmentSize;
    return this.settings.segmentSize;
  }

  /** Table rows of a segment as the turn left them: minus its pending deletes, plus its pending inserts. */
  private merged(priority: number, segment: number, rows: readonly SegmentEntry[]): SegmentEntry[] {
    const through = this.writes.deletedThrough(priority, segment);
    const byPosition = new Map<number, SegmentEntry>();
    for (const row of rows) if (row.position > through) byPosition.set(row.position, row);
    for (const entry of this.writes.pendingInserts(priority, segment)) byPosition.set(entry.position, entry);
    return [...byPosition.values()].sort((a, b) => a.position - b.position);
  }

  private cacheSegment(priority: number, segment: number, entries: SegmentEntry[]): void {
    this.dropSegment(priority, segment);
    let segments = this.cache.get(priority);
    if (!segments) this.cache.set(priority, (segments = new Map()));
    segments.set(segment, { entries, offset: 0 });
    this.cachedItems += entries.length;
  }

  private cached(priority: number, segment: number): CachedSegment | undefined {
    return this.cache.get(priority)?.get(segment);
  }

  private dropSegment(priority: number, segment: number): void {
    const segments = this.cache.get(priority);
    const seg = segments?.get(segment);
    if (!seg) return;
    this.cachedItems -= seg.entries.length - seg.offset;
    segments!.delete(segment);
    if (segments!.size === 0) this.cache.delete(priority);
  }

  /** Keeps in memory only the window: head..head+buffer_segments and the tail. */
  private evictOutsideWindow(priority: number): void {
    const meta = this.priorities.get(priority);
    for (const segment of [...(this.cache.get(priority)?.keys() ?? [])]) {
      const inWindow = meta && (segment === meta.tail_segment || (segment >= meta.head_segment && segment <= meta.head_segment + this.settings.bufferSegments));
      if (!inWindow) this.dropSegment(priority, segment);
    }
  }
}
