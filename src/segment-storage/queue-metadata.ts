/**
 * The stored form of a queue, as the repository reads and writes it. (The queue core has
 * structurally identical types of its own; neither side imports the other.)
 */

/** One priority's entry of `queues.priorities` (keyed by the priority as a decimal string). */
export interface StoredPriority {
  count: number;
  head_segment: number;
  tail_segment: number;
  head_offloaded_segment: number | null;
  tail_offloaded_segment: number | null;
  next_position: number;
  head_position: number;
}

/** A `queue_locks` row (times in epoch milliseconds). */
export interface StoredLock {
  readonly lockId: string;
  readonly state: 'active' | 'expired';
  readonly items: readonly { readonly priority: number; readonly json: string }[];
  readonly createdAt: number;
  readonly expiresAt: number;
}

/** A `queues` row's summary of its delayed items (times in epoch milliseconds). */
export interface StoredDelayedSummary {
  readonly count: number;
  readonly nextDueAt: number | null;
  readonly nextSeq: number;
}

/** A `delayed_items` row (due time in epoch milliseconds). */
export interface StoredDelayedItem {
  readonly dueAt: number;
  readonly seq: number;
  readonly priority: number;
  readonly json: string;
}

/** A `queues` row with its lock. */
export interface StoredQueue {
  readonly version: number;
  readonly settings: { readonly segmentSize: number; readonly bufferSegments: number };
  readonly priorities: Record<string, StoredPriority>;
  readonly lock: StoredLock | null;
  readonly delayed: StoredDelayedSummary;
}

/** One item row of a segment. `json` is the item's JSON text, exactly as stored. */
export interface StoredEntry {
  readonly position: number;
  readonly json: string;
}

/** Everything one turn writes; see the `pushpop_write_turn` migration for how it is applied. */
export interface StoredTurnWrite {
  readonly expectedVersion: number | null;
  readonly newVersion: number;
  readonly deleteQueue: boolean;
  readonly settings: { readonly segmentSize: number; readonly bufferSegments: number };
  readonly itemCount: number;
  readonly priorities: Record<string, StoredPriority>;
  readonly deletes: readonly { readonly priority: number; readonly segment: number; readonly from: number; readonly through: number }[];
  readonly inserts: readonly { readonly priority: number; readonly segment: number; readonly position: number; readonly json: string }[];
  readonly lock: { readonly op: 'upsert'; readonly lock: StoredLock } | { readonly op: 'delete' } | undefined;
  /** Segments moved to the `offloaded_segments` table by this turn (when that is the offload store). */
  readonly storeSaves: readonly { readonly key: string; readonly items: readonly string[] }[];
  /** Keys deleted from the `offloaded_segments` table by this turn (when that is the offload store). */
  readonly storeDeletes: readonly string[];
  /** The queue row's delayed columns after the turn; null: unchanged (the statement leaves them alone). */
  readonly delayed: StoredDelayedSummary | null;
  /** Rows added to `delayed_items`. */
  readonly delayedInserts: readonly StoredDelayedItem[];
  /** The queue's `delayed_items` rows up to and including this `(dueAt, seq)` are deleted (moved to the segments). */
  readonly delayedDeleteThrough: { readonly dueAt: number; readonly seq: number } | null;
  /** Rows added to `dedup_ids` (or replacing an expired row of the same id). */
  readonly dedupInserts: readonly { readonly dedupId: string; readonly expiresAt: number }[];
}

/** A listing row for `GET /queues`. */
export interface QueueListRow {
  queueId: string;
  count: number;
  /** Expiry (epoch ms) of the queue's active acknowledgement lock, or null. */
  lockExpiresAt: number | null;
}
