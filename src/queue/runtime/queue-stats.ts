import { Injectable } from '@nestjs/common';
import type { PushOutcome } from '../core/queue-core.js';

/**
 * Counters of what committed turns did, kept as they commit and read when `/metrics` is scraped
 * ({@link RuntimeMetrics}; metrics only observe: nothing here knows about them).
 */
@Injectable()
export class QueueStats {
  itemsPushed = 0;
  itemsPopped = 0;
  itemsAcknowledged = 0;
  /** Lock ids acknowledge and acknowledge/batch named, by result: `ok` or the error_code the lock was answered. */
  readonly acknowledgements = { ok: 0, LOCK_ID_REQUIRED: 0, INVALID_LOCK_ID: 0, LOCK_NOT_FOUND: 0, LOCK_EXPIRED: 0 };
  lockExpirations = 0;
  /** Delayed items that came due and joined their priorities. */
  delayedItemsDue = 0;
  /** Pushed items skipped because their dedup id was accepted within the window. */
  duplicatesSkipped = 0;
  /** Items that reached their queue's `max_deliveries` and went to its dead-letter queue. */
  itemsDeadLettered = 0;
  /** Items a redrive moved to the tail of another queue. */
  itemsRedriven = 0;
  /** Items put back at the front of their queue, by reason. */
  readonly itemsRedelivered = { expired: 0, released: 0 };
  /** Items given back (expiry or release) that waited out a retry delay before they were visible again. */
  itemsRetryDelayed = 0;
  /** Pops that handed out nothing because of a delivery limit, by the limit. */
  readonly popsLimited = { in_flight: 0, rate: 0 };
  /** Pops answered `paused`. */
  pausedPops = 0;
  /** Fair pops (`POST /queues/pop?prefix=`) by outcome: items handed out, or none. */
  readonly fairPops = { served: 0, empty: 0 };
  /** Candidate queues fair pops passed over, by why: nothing left, paused, a delivery limit, an exclusive lock, or too busy (a full line, a lock table full, a segment unavailable). */
  readonly fairPopSkips = { empty: 0, paused: 0, limited: 0, locked: 0, busy: 0, exclusive: 0 };

  /** Counts a committed push (see `pushOp`). */
  pushed(outcome: PushOutcome): void {
    this.itemsPushed += outcome.enqueued;
    this.duplicatesSkipped += outcome.duplicates;
  }
}
