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
  /** Items given back by shared locks, waiting in `returned_items`; absent: 0. */
  returned?: number;
  /** Items held by shared locks; absent: 0. */
  held?: number;
  /** Items given back and waiting out a retry delay in `delayed_items`; absent: 0. */
  retrying?: number;
}

/** Where an item was pushed within its priority. */
export interface StoredOrigin {
  readonly segment: number;
  readonly position: number;
}

/** A locked item: its priority and JSON text, where it was pushed and its deliveries (absent for locks written before these were kept). */
export interface StoredHeldItem {
  readonly priority: number;
  readonly json: string;
  readonly origin?: StoredOrigin;
  readonly deliveries?: number;
  /** The queue it was dead-lettered from; absent: never dead-lettered. */
  readonly from?: string;
  /** The item's headers as a JSON object's text; absent: none. */
  readonly headers?: string;
}

/** A `returned_items` row. */
export interface StoredReturnedEntry extends StoredOrigin {
  readonly json: string;
  readonly deliveries: number;
  readonly from?: string;
  readonly headers?: string;
}

/** The queue row's settings. */
export interface StoredSettings {
  readonly segmentSize: number;
  readonly bufferSegments: number;
  readonly lockMode?: 'exclusive' | 'shared';
  readonly maxDeliveries?: number | null;
  readonly deadLetterQueue?: string | null;
  readonly paused?: boolean;
  readonly retryDelaySeconds?: number;
  readonly retryBackoff?: 'fixed' | 'exponential';
  readonly retryDelayMaxSeconds?: number;
  readonly maxInFlight?: number | null;
  readonly maxPopsPerSecond?: number | null;
}

/** The queue row's pop budget: tokens left at `at` (epoch ms). */
export interface StoredPopBudget {
  readonly tokens: number;
  readonly at: number;
}

/** The queue row's summary of its shared locks (`nextExpiry` a lower bound, epoch ms). */
export interface StoredSharedSummary {
  readonly live: number;
  readonly items: number;
  readonly nextExpiry: number | null;
}

/** A `queue_locks` or `shared_locks` row (times in epoch milliseconds). */
export interface StoredLock {
  readonly lockId: string;
  readonly state: 'active' | 'expired';
  readonly items: readonly StoredHeldItem[];
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
  /** The queue it was dead-lettered from (dead letters wait here until their queue's next turn); absent: none. */
  readonly from?: string;
  /** The item's headers as a JSON object's text; absent: none. */
  readonly headers?: string;
  /** An item given back, waiting out its retry delay: where it was pushed, and its deliveries. */
  readonly origin?: StoredOrigin;
  readonly deliveries?: number;
}

/** A `queues` row with its lock. */
export interface StoredQueue {
  readonly version: number;
  readonly settings: StoredSettings;
  readonly priorities: Record<string, StoredPriority>;
  readonly lock: StoredLock | null;
  readonly delayed: StoredDelayedSummary;
  readonly shared: StoredSharedSummary;
  /** Absent: full (no pop drew from it since the limit was set). */
  readonly popBudget?: StoredPopBudget;
}

/** One item row of a segment. `json` is the item's JSON text, exactly as stored. */
export interface StoredEntry {
  readonly position: number;
  readonly json: string;
  /** Absent: 0. */
  readonly deliveries?: number;
  /** The queue it was dead-lettered from; absent: never dead-lettered. */
  readonly from?: string;
  /** The item's headers as a JSON object's text; absent: none. */
  readonly headers?: string;
}

/** A queue row loaded for an activation, with the rows of its front segment when they were asked for. */
export interface LoadedQueue {
  readonly queue: StoredQueue;
  /** The head segment of the first priority holding items in its segments (absent: not asked for, or no such priority). */
  readonly front?: { readonly priority: number; readonly segment: number; readonly entries: StoredEntry[] };
}

/** Everything one turn writes; see `database/functions/write-turn.function.ts` for how it is applied. */
export interface StoredTurnWrite {
  readonly expectedVersion: number | null;
  readonly newVersion: number;
  readonly deleteQueue: boolean;
  readonly settings: StoredSettings;
  /** The settings changed: written (a created queue gets them anyway). */
  readonly settingsChanged?: boolean;
  readonly itemCount: number;
  readonly priorities: Record<string, StoredPriority>;
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
  readonly lock: { readonly op: 'upsert'; readonly lock: StoredLock } | { readonly op: 'delete' } | undefined;
  /**
   * Segments moved to the `offloaded_segments` table by this turn (when that is the offload
   * store); `from` and `headers` parallel to `items`, absent when no item was dead-lettered or has headers.
   */
  readonly storeSaves: readonly {
    readonly key: string;
    readonly items: readonly string[];
    readonly from?: readonly (string | null)[];
    readonly headers?: readonly (string | null)[];
  }[];
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
  /** The queue row's shared-lock columns after the turn; null: unchanged. */
  readonly shared: StoredSharedSummary | null;
  /** The queue's pop budget after the turn; absent or null: unchanged. */
  readonly popBudget?: StoredPopBudget | null;
  /** `shared_locks` rows written and deleted. */
  readonly sharedLockUpserts: readonly StoredLock[];
  readonly sharedLockDeletes: readonly string[];
  /** `returned_items` rows added and deleted. */
  readonly returnedInserts: readonly (StoredReturnedEntry & { readonly priority: number })[];
  readonly returnedDeletes: readonly (StoredOrigin & { readonly priority: number })[];
  /** Items for the tail of another queue (its dead-letter queue), in order. */
  readonly deadLetters: { readonly queueId: string; readonly items: readonly StoredHeldItem[] } | null;
  /** Items a redrive moves to the tails of other queues (due at once there), in order; their delivery counts start again at 0. */
  readonly redriven: readonly { readonly queueId: string; readonly priority: number; readonly json: string; readonly headers?: string }[];
  /** With dead letters or redriven items: the turn's time (they are due then) and the settings and version of a queue the turn creates for them. */
  readonly deadLetterDefaults?: { readonly segmentSize: number; readonly bufferSegments: number; readonly version: number; readonly now: number };
}

/** A listing row for `GET /queues`. */
export interface QueueListRow {
  queueId: string;
  count: number;
  /** Expiry (epoch ms) of the queue's active acknowledgement lock, or null. */
  lockExpiresAt: number | null;
  /** Live shared locks. */
  liveLocks: number;
  /** Pops hand out nothing. */
  paused: boolean;
}
