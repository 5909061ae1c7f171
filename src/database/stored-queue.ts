/**
 * What the repositories read and write beyond the queue core's own types, which they share
 * (imported type-only: the core never imports storage). A row is read into the core's shape and
 * a turn's write is the core's `TurnWrite`, extended only by what the database store alone adds.
 */
import type { DelayedSummary, QueueRecord, SegmentEntry, SharedLockSummary, TurnWrite } from '../queue/core/types.js';

/** A `queues` row with its lock: the core's record, with the delayed and shared-lock summaries always read. */
export interface StoredQueue extends QueueRecord {
  readonly delayed: DelayedSummary;
  readonly shared: SharedLockSummary;
}

/** A queue row loaded for an activation, with the rows of its front segment when they were asked for. */
export interface LoadedQueue {
  readonly queue: StoredQueue;
  /** The head segment of the first priority holding items in its segments (absent: not asked for, or no such priority). */
  readonly front?: { readonly priority: number; readonly segment: number; readonly entries: SegmentEntry[] };
}

/**
 * Everything one turn writes: the core's {@link TurnWrite} and what only the database store
 * adds to it (the offloaded segments when they live in the database, and the defaults of a
 * queue created for dead letters or redriven items). See `database/sql/pushpop_write_turn.sql`
 * for how it is applied.
 */
export interface StoredTurnWrite extends TurnWrite {
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
