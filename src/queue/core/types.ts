/**
 * Types of the pure queue core. Nothing here knows about HTTP, NestJS, TypeORM or PostgreSQL:
 * the core decides, the turn runner reads and writes.
 */

/** A queue's settings, stored with the queue when it is created. */
export interface QueueSettings {
  readonly segmentSize: number;
  readonly bufferSegments: number;
}

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
}

/** One item of a segment: its position in the segment and its JSON text, exactly as pushed. */
export interface SegmentEntry {
  readonly position: number;
  readonly json: string;
}

/** An item with the priority it came from (what a lock holds and gives back). */
export interface HeldItem {
  readonly priority: number;
  readonly json: string;
}

/** A queue's acknowledgement lock (times in epoch milliseconds). */
export interface LockState {
  readonly lockId: string;
  /** `expired`: its items went back; kept so the old id answers 410 until a new lock replaces it. */
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
export interface DelayedItem {
  /** Epoch ms. */
  readonly dueAt: number;
  readonly seq: number;
  readonly priority: number;
  readonly json: string;
}

/** What the runner found for {@link MissingDueItems}: the due items, in `(dueAt, seq)` order. */
export interface DueFetch {
  /** At most the limit asked for; all due at the `now` asked for. */
  readonly items: readonly DelayedItem[];
  /** Due time of the first stored delayed item after `items` (due or not); null when there is none. */
  readonly nextDueAt: number | null;
}

/** An item to push: its priority and JSON text, optionally a delay and a deduplication id. */
export interface NewItem {
  readonly priority: number;
  readonly json: string;
  /** Milliseconds until the item becomes visible; 0 or absent: at once. */
  readonly delayMs?: number;
  /** Pushes with a dedup id accepted within the window are skipped. */
  readonly dedupId?: string;
}

/** A queue as stored: what activating its actor reads. */
export interface QueueRecord {
  readonly version: number;
  readonly settings: QueueSettings;
  readonly priorities: Readonly<Record<string, PriorityMetadata>>;
  readonly lock: LockState | null;
  /** Absent: no delayed item. */
  readonly delayed?: DelayedSummary;
}

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
 * Thrown by a core operation that needs segments it does not hold. Always thrown before the
 * operation changed anything, so the runner fetches the segments, hands them over with
 * `provide` and runs the same operation again.
 */
export class MissingSegments extends Error {
  constructor(readonly refs: readonly SegmentRef[]) {
    super(`segments needed: ${refs.map((r) => `${r.priority}:${r.segment} (${r.from})`).join(', ')}`);
    this.name = 'MissingSegments';
  }
}

/**
 * Thrown at the start of a turn when the queue's earliest delayed item is due and the core does
 * not hold the due items. Thrown before anything changed: the runner reads up to `limit` items
 * due at `now` (and the due time of the one after them), hands them over with
 * `provideDueItems`, and runs the same call again.
 */
export class MissingDueItems extends Error {
  constructor(
    readonly now: number,
    readonly limit: number,
  ) {
    super(`delayed items due at ${now} needed`);
    this.name = 'MissingDueItems';
  }
}

/**
 * Thrown by a push carrying deduplication ids the core has not checked this turn. Thrown before
 * anything changed: the runner reads which of `ids` are live (accepted within the window),
 * hands them over with `provideDedupIds`, and runs the same call again.
 */
export class MissingDedupIds extends Error {
  constructor(readonly ids: readonly string[]) {
    super(`deduplication ids needed: ${ids.length}`);
    this.name = 'MissingDedupIds';
  }
}

/** Why a lock operation (acknowledge, extend, release) was refused, in the contract's order. */
export type LockProblem = 'LOCK_NOT_FOUND' | 'LOCK_EXPIRED' | 'INVALID_LOCK_ID';

/** A segment to move to the offload store, with the items to save. */
export interface OffloadMove {
  readonly priority: number;
  readonly segment: number;
  readonly items: readonly string[];
}

/** The rows a turn writes, in the order they must be applied: queue row, deletes, inserts, lock. */
export interface TurnWrite {
  /** The version the row must still have; null when the turn creates the queue. */
  readonly expectedVersion: number | null;
  readonly newVersion: number;
  /** The queue and everything in it goes (the other fields are then empty). */
  readonly deleteQueue: boolean;
  readonly settings: QueueSettings;
  readonly itemCount: number;
  readonly priorities: Record<string, PriorityMetadata>;
  /** Per segment, rows with `from <= position <= through` are deleted (before the inserts); none lies below `from`. */
  readonly deletes: readonly { readonly priority: number; readonly segment: number; readonly from: number; readonly through: number }[];
  readonly inserts: readonly { readonly priority: number; readonly segment: number; readonly position: number; readonly json: string }[];
  readonly lock: { readonly op: 'upsert'; readonly lock: LockState } | { readonly op: 'delete' } | undefined;
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
