/**
 * Types of the pure queue core. Nothing here knows about HTTP, NestJS, TypeORM or PostgreSQL:
 * the core decides, the turn runner reads and writes.
 */

/** How a queue's acknowledgement locks work: one at a time (the seeds) or any number side by side (competing consumers). */
export type LockMode = 'exclusive' | 'shared';

/**
 * A queue's settings, stored with the queue. The segment layout is fixed while the queue holds
 * anything; the rest may change whenever no lock lives (see {@link QueueCore.updateSettings}).
 * Absent optional fields mean the defaults: exclusive locks, no delivery limit.
 */
export interface QueueSettings {
  readonly segmentSize: number;
  readonly bufferSegments: number;
  readonly lockMode?: LockMode;
  /** Deliveries after which an item given back goes to `deadLetterQueue` instead; null or absent: no limit. */
  readonly maxDeliveries?: number | null;
  readonly deadLetterQueue?: string | null;
  /** Pops hand out nothing while set (absent: false). */
  readonly paused?: boolean;
  /** Base delay before an item given back (not dead-lettered) is visible again, 0-900 s (absent: 0, at once). */
  readonly retryDelaySeconds?: number;
  /** `fixed`: always `retryDelaySeconds`; `exponential` (absent): doubled per delivery, up to `retryDelayMaxSeconds`. */
  readonly retryBackoff?: RetryBackoff;
  /** Ceiling of an exponential retry delay, 1-900 s, never below `retryDelaySeconds` (absent: 900). */
  readonly retryDelayMaxSeconds?: number;
  /** Items held by live locks at most; null or absent: no limit. */
  readonly maxInFlight?: number | null;
  /** Items handed out by pops per second at most, on average; null or absent: no limit. */
  readonly maxPopsPerSecond?: number | null;
}

/** How a retry delay grows with an item's deliveries. */
export type RetryBackoff = 'fixed' | 'exponential';

/** A change of settings as asked for: absent fields stay as they are. */
export interface SettingsPatch {
  readonly segmentSize?: number;
  readonly bufferSegments?: number;
  readonly lockMode?: LockMode;
  readonly maxDeliveries?: number | null;
  readonly deadLetterQueue?: string | null;
  readonly paused?: boolean;
  readonly retryDelaySeconds?: number;
  readonly retryBackoff?: RetryBackoff;
  readonly retryDelayMaxSeconds?: number;
  readonly maxInFlight?: number | null;
  readonly maxPopsPerSecond?: number | null;
}

/**
 * Why a change of settings was refused, with what the answer shows (checked in this order):
 * - `NEEDS_DEAD_LETTER_QUEUE`: the settings it would leave have `maxDeliveries` and no
 *   dead-letter queue;
 * - `QUEUE_NOT_EMPTY`: the segment layout changes while the queue holds something;
 * - `QUEUE_LOCKED`: the lock mode changes while a lock lives (`lockExpiresAt`: when the active
 *   exclusive lock, or the earliest shared one, expires);
 * - `RETRY_DELAY_ABOVE_MAX`: the settings it would leave have `retryDelaySeconds` (`delay`)
 *   above `retryDelayMaxSeconds` (`max`), judged on the result, so a change naming only one of
 *   them is refused too.
 */
export type SettingsProblem =
  | { readonly refused: 'NEEDS_DEAD_LETTER_QUEUE' }
  | { readonly refused: 'QUEUE_NOT_EMPTY' }
  | { readonly refused: 'QUEUE_LOCKED'; readonly lockExpiresAt: number | null }
  | { readonly refused: 'RETRY_DELAY_ABOVE_MAX'; readonly delay: number; readonly max: number };

/**
 * Metadata of one priority of one queue (seed 003's metadata document, one entry per priority).
 *
 * Invariants (hold after every committed turn):
 * - `head_segment <= tail_segment`; items live in segments head..tail, popped from the head,
 *   pushed to the tail;
 * - every segment strictly between head and tail holds exactly `segment_size` items;
 * - the offloaded range, when set, is contiguous and lies inside `(head_segment, tail_segment)`;
 *   at rest it starts after `head_segment + buffer_segments` unless a load failed;
 * - the entry exists only while `count > 0`.
 */
export interface PriorityMetadata {
  count: number;
  head_segment: number;
  tail_segment: number;
  head_offloaded_segment: number | null;
  tail_offloaded_segment: number | null;
  /** Position the next pushed item gets in the tail segment; the tail is full at `segment_size`. */
  next_position: number;
  /** Position of the first item of the head segment; returned items go just below it. */
  head_position: number;
  /**
   * Items given back by shared locks (or by an exclusive one while such items wait) and not
   * popped again: they live apart from the segments, ordered by where they were pushed, and
   * are popped before the segments' items. Absent: 0. Not part of `count`.
   */
  returned?: number;
  /**
   * Items of this priority held by live locks (the active exclusive lock or shared ones).
   * While any are held the entry stays (with `count` 0 if need be), so segment numbers keep
   * growing and an item given back finds its place by its segment and position: no push
   * meanwhile takes the origin of an item that may come back. Absent: 0.
   */
  held?: number;
  /**
   * Items of this priority given back by locks and waiting out a retry delay (among the delayed
   * items). While any wait the entry stays (with `count` 0 if need be), so that segment numbers
   * keep growing and such an item, once due, finds its push-order place by its origin. Absent: 0.
   */
  retrying?: number;
}

/** Where an item was pushed within its priority: its segment and position. Orders items by push order. */
export interface ItemOrigin {
  readonly segment: number;
  readonly position: number;
}

/**
 * What travels with an item wherever it rests (segments, offload store, locks, given-back,
 * delayed and dead-lettered items), each absent when the item has none.
 */
export interface ItemTags {
  /** The queue the item was dead-lettered from (where a redrive sends it back); absent: never dead-lettered. */
  readonly from?: string;
  /** The item's headers as the JSON text of an object of strings (see the push DTO); absent: none. */
  readonly headers?: string;
}

/**
 * `target` with the tags of `source` that are present; `target` itself when there are none (an
 * item without tags costs two property reads).
 */
export function withTags<T extends object>(target: T, source: ItemTags): T & ItemTags {
  const { from, headers } = source;
  if (from === undefined) return headers === undefined ? target : { ...target, headers };
  return headers === undefined ? { ...target, from } : { ...target, from, headers };
}

/** An item given back and waiting apart from the segments (see {@link PriorityMetadata.returned}). */
export interface ReturnedEntry extends ItemOrigin, ItemTags {
  readonly json: string;
  readonly deliveries: number;
}

/** One item of a segment: its position in the segment and its JSON text, exactly as pushed. */
export interface SegmentEntry extends ItemTags {
  readonly position: number;
  readonly json: string;
  /** Times the item was handed out under a lock (an item given back by an exclusive lock); absent: 0. */
  readonly deliveries?: number;
}

/** An item with the priority it came from (what a lock holds and gives back). */
export interface HeldItem extends ItemTags {
  readonly priority: number;
  readonly json: string;
  /** Where it was pushed; absent for items of locks stored before origins were kept. */
  readonly origin?: ItemOrigin;
  /** Times handed out under a lock, counting the lock holding it; absent: 0 (a plain pop) or unknown. */
  readonly deliveries?: number;
}

/** A queue's acknowledgement lock (times in epoch milliseconds). */
export interface LockState {
  readonly lockId: string;
  /**
   * `expired`: its items went back; kept so the old id answers 410 (exclusive: until a new lock
   * replaces it; shared: for at least an hour).
   */
  readonly state: 'active' | 'expired';
  /** Held items with their original priorities, in pop order (empty once expired). */
  readonly items: readonly HeldItem[];
  readonly createdAt: number;
  readonly expiresAt: number;
}

/**
 * What a queue's row records of its delayed items (the items themselves are not in memory).
 * Invariant: `nextDueAt` is null exactly when `count` is 0.
 */
export interface DelayedSummary {
  /** Delayed items not yet due, or due and not yet moved to their priority. */
  readonly count: number;
  /** Due time (epoch ms) of the earliest delayed item; null when there is none. */
  readonly nextDueAt: number | null;
  /** Sequence number the next delayed item gets: items due at the same time keep their push order. */
  readonly nextSeq: number;
}

/** The empty summary: a queue with no delayed item. */
export const NO_DELAYED: DelayedSummary = { count: 0, nextDueAt: null, nextSeq: 0 };

/** A delayed item: stored apart from the segments, ordered by `(dueAt, seq)`, until it is due. */
export interface DelayedItem extends ItemTags {
  /** Epoch ms. */
  readonly dueAt: number;
  readonly seq: number;
  readonly priority: number;
  readonly json: string;
  /**
   * Set for an item given back by a lock and waiting out its retry delay: where it was pushed.
   * When due it returns to the front of its priority in push order, not to the tail.
   */
  readonly origin?: ItemOrigin;
  /** With `origin`: the item's deliveries so far. */
  readonly deliveries?: number;
}

/** A queue's pop budget (see `pop-budget.ts`): tokens left at `at` (epoch ms). */
export interface PopBudget {
  readonly tokens: number;
  readonly at: number;
}

/** What the runner found for a need of due items (`RowNeed.due`): the due items, in `(dueAt, seq)` order. */
export interface DueFetch {
  /** At most the limit asked for; all due at the `now` asked for. */
  readonly items: readonly DelayedItem[];
  /** Due time of the first stored delayed item after `items` (due or not); null when there is none. */
  readonly nextDueAt: number | null;
}

/** An item to push: its priority and JSON text, optionally headers, a delay and a deduplication id. */
export interface NewItem {
  readonly priority: number;
  readonly json: string;
  /** See {@link ItemTags.headers}. */
  readonly headers?: string;
  /** Milliseconds until the item becomes visible; 0 or absent: at once. */
  readonly delayMs?: number;
  /** Pushes with a dedup id accepted within the window are skipped. */
  readonly dedupId?: string;
}

/**
 * What a queue's row records of its shared locks (the locks themselves are not in memory).
 * `nextExpiry` is a lower bound: no live lock expires before it (extending a lock leaves it
 * as it was); null exactly when `live` is 0.
 */
export interface SharedLockSummary {
  readonly live: number;
  readonly items: number;
  readonly nextExpiry: number | null;
}

export const NO_SHARED_LOCKS: SharedLockSummary = { live: 0, items: 0, nextExpiry: null };

/** A queue as stored: what activating its actor reads. */
export interface QueueRecord {
  readonly version: number;
  readonly settings: QueueSettings;
  readonly priorities: Readonly<Record<string, PriorityMetadata>>;
  readonly lock: LockState | null;
  /** Absent: no delayed item. */
  readonly delayed?: DelayedSummary;
  /** Absent: no shared lock. */
  readonly shared?: SharedLockSummary;
  /** Absent: full. */
  readonly popBudget?: PopBudget;
}

/**
 * A queue as committed, with its front segment's rows: what activating it reads (see
 * {@link QueueCore.snapshot}).
 */
export interface QueueSnapshot {
  readonly record: QueueRecord & { readonly lock: null; readonly delayed: DelayedSummary; readonly shared: SharedLockSummary };
  readonly front: { readonly priority: number; readonly segment: number; readonly entries: readonly SegmentEntry[] };
}

/**
 * Rows of shared locks or given-back items a core call needs (see {@link RowNeed}):
 * - `locks`: the named locks (null for those that do not exist);
 * - `due`: live locks expired at `now`, earliest first, at most `limit`, and the expiry of the
 *   first live lock after them;
 * - `next`: the earliest expiry of a live lock, leaving out those this turn wrote (`exclude`);
 * - `returned`: the first `limit` given-back items of `priority`, in push order.
 */
export type LockRowsNeed =
  | { readonly kind: 'locks'; readonly ids: readonly string[] }
  | { readonly kind: 'due'; readonly now: number; readonly limit: number }
  | { readonly kind: 'next'; readonly exclude: readonly string[] }
  | { readonly kind: 'returned'; readonly priority: number; readonly limit: number };

export type LockRowsFetch =
  /** Every id asked for: its lock, or null when there is no such lock. */
  | { readonly kind: 'locks'; readonly locks: ReadonlyMap<string, LockState | null> }
  | { readonly kind: 'due'; readonly locks: readonly LockState[]; readonly nextExpiry: number | null }
  | { readonly kind: 'next'; readonly nextExpiry: number | null }
  | { readonly kind: 'returned'; readonly priority: number; readonly entries: readonly ReturnedEntry[] };

/**
 * A segment the core needs in memory before it can go on: from the queue's own rows (`state`)
 * or from the offload store (`offload`); to work on it (`use`) or only to show it (`peek`).
 */
export interface SegmentRef {
  readonly priority: number;
  readonly segment: number;
  readonly from: 'state' | 'offload';
  readonly purpose: 'use' | 'peek';
}

/** What the runner found for a {@link SegmentRef}. */
export type SegmentFetch =
  /** The segment's entries; from the offload store, `undefined` when nothing is stored under its key. */
  | { readonly entries: readonly SegmentEntry[] | undefined }
  /** The store could not be read. */
  | { readonly failed: true };

/**
 * What a core call must have read before it can answer, all of it at once:
 * - `segments`: segments to hand over with `provide`, in the order given (offloaded ones of a
 *   priority bottom up: each comes back only after the one below it did);
 * - `due`: up to `limit` delayed items due at `now`, in `(dueAt, seq)` order, and the due time
 *   of the one after them (`provideDueItems`);
 * - `dedupIds`: which of these ids are live, accepted within the window (`provideDedupIds`);
 * - `lockRows`: rows of shared locks or given-back items (`provideLockRows`).
 */
export interface RowNeed {
  readonly segments?: readonly SegmentRef[];
  readonly due?: { readonly now: number; readonly limit: number };
  readonly dedupIds?: readonly string[];
  readonly lockRows?: readonly LockRowsNeed[];
}

/**
 * The answer of a core call that needs rows it does not hold: returned (never thrown) before
 * the call changed anything, so that the caller reads what `need` names, hands it over, and
 * makes the same call again (see `drive`). A class, so that no outcome of a call is mistaken
 * for it.
 */
export class Needed {
  constructor(readonly need: RowNeed) {}
}

/** A core call's answer: its outcome, or the rows it needs first. */
export type OrNeed<T> = T | Needed;

/** Why a lock operation (acknowledge, extend, release) was refused, in the contract's order. */
export type LockProblem = 'LOCK_NOT_FOUND' | 'LOCK_EXPIRED' | 'INVALID_LOCK_ID';

/** A segment's items as one piece (a segment moved to the offload store, or kept packed), at positions 0..n-1. */
export interface SegmentItems {
  readonly priority: number;
  readonly segment: number;
  readonly items: readonly string[];
  /** Parallel to `items`: the queue each was dead-lettered from (null: never); absent when none was. */
  readonly from?: readonly (string | null)[];
  /** Parallel to `items`: each one's headers (null: none); absent when none has any. */
  readonly headers?: readonly (string | null)[];
}

/** The {@link SegmentItems} of `entries` (in position order), tags only where an entry has one. */
export function segmentItems(priority: number, segment: number, entries: readonly SegmentEntry[]): SegmentItems {
  const base: SegmentItems = { priority, segment, items: entries.map((e) => e.json) };
  const from = entries.some((e) => e.from !== undefined) ? { from: entries.map((e) => e.from ?? null) } : {};
  const headers = entries.some((e) => e.headers !== undefined) ? { headers: entries.map((e) => e.headers ?? null) } : {};
  return { ...base, ...from, ...headers };
}

/** A segment to move to the offload store, with the items to save. */
export type OffloadMove = SegmentItems;

/** A segment written as one packed row (see {@link TurnWrite.packs}). */
export type PackedSegment = SegmentItems;

/** An item a redrive sends to the tail of its priority on `queueId` (its delivery count starts again at 0). */
export interface RedrivenItem {
  readonly queueId: string;
  readonly priority: number;
  readonly json: string;
  /** See {@link ItemTags.headers}. */
  readonly headers?: string;
}

/**
 * The rows a turn writes, in the order they must be applied: queue row, deletes, inserts, lock.
 * The one write type: storage applies it as it is, extended only by what the database store
 * alone adds (`StoredTurnWrite`).
 */
export interface TurnWrite {
  /** The version the row must still have; null when the turn creates the queue. */
  readonly expectedVersion: number | null;
  readonly newVersion: number;
  /** The queue and everything in it goes (the other fields are then empty). */
  readonly deleteQueue: boolean;
  readonly settings: QueueSettings;
  /** The turn changed the settings (else the row's stay as they are; a queue created by the turn gets them anyway). */
  readonly settingsChanged?: boolean;
  readonly itemCount: number;
  readonly priorities: Record<string, PriorityMetadata>;
  /** Per segment, rows with `from <= position <= through` are deleted (before the inserts); none lies below `from`. */
  readonly deletes: readonly { readonly priority: number; readonly segment: number; readonly from: number; readonly through: number }[];
  readonly inserts: readonly {
    readonly priority: number;
    readonly segment: number;
    readonly position: number;
    readonly json: string;
    readonly deliveries?: number;
    readonly from?: string;
    readonly headers?: string;
  }[];
  /**
   * Segments brought back from the offload store, each written as one packed row (its items at
   * positions 0..n-1) instead of a row per item, after the deletes and inserts; absent or empty:
   * none. A packed segment is in the actor's state like any other: a pop never rewrites it (the
   * priority's `head_position` says which of its items are gone), and a delete of the whole
   * segment deletes it. Where its rows and its packed items share a position, the row wins (an
   * item given back into a packed head).
   */
  readonly packs?: readonly PackedSegment[];
  readonly lock: { readonly op: 'upsert'; readonly lock: LockState } | { readonly op: 'delete' } | undefined;
  /** The queue row's shared-lock columns after the turn; null when the turn left them as they were. */
  readonly shared: SharedLockSummary | null;
  /** The queue's pop budget after the turn; absent or null when the turn left it as it was. */
  readonly popBudget?: PopBudget | null;
  /** Shared locks written (created, extended, expired) and deleted (acknowledged, released). */
  readonly sharedLockUpserts: readonly LockState[];
  /** Of those written, the ids of the locks the turn created (no row yet: inserted without a conflict check); absent: none. */
  readonly sharedLocksCreated?: ReadonlySet<string>;
  readonly sharedLockDeletes: readonly string[];
  /** Given-back items added and removed (popped again), by priority and origin. */
  readonly returnedInserts: readonly (ReturnedEntry & { readonly priority: number })[];
  readonly returnedDeletes: readonly (ItemOrigin & { readonly priority: number })[];
  /** Items that reached `maxDeliveries`, for the tail of the dead-letter queue, in order. */
  readonly deadLetters: { readonly queueId: string; readonly items: readonly HeldItem[] } | null;
  /** Items a redrive moves to other queues, in order (due at once there, like dead letters); empty: none. */
  readonly redriven: readonly RedrivenItem[];
  /** The queue row's summary of its delayed items after the turn; null when the turn left them as they were. */
  readonly delayed: DelayedSummary | null;
  /** Delayed items pushed by the turn. */
  readonly delayedInserts: readonly DelayedItem[];
  /**
   * Stored delayed items up to and including this `(dueAt, seq)` are deleted: the turn moved
   * them to their priorities (always a prefix in that order). Null: none.
   */
  readonly delayedDeleteThrough: { readonly dueAt: number; readonly seq: number } | null;
  /** Deduplication ids accepted by the turn, remembered until `expiresAt` (epoch ms; an expired row of the same id is replaced). */
  readonly dedupInserts: readonly { readonly dedupId: string; readonly expiresAt: number }[];
}
