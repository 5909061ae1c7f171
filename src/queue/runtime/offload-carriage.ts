import { Injectable, Logger } from '@nestjs/common';
import { OffloadStats } from '../../offload/offload-stats.js';
import { offloadedSegmentKey, OffloadStore } from '../../offload/offload-store.js';
import type { QueueCore } from '../core/queue-core.js';
import type { OffloadMove } from '../core/types.js';

/** A segment of one priority of a queue. */
export interface SegmentId {
  priority: number;
  segment: number;
}

/** What the carriage did with the moves the core planned, before the turn's write. */
export interface Carried {
  /** Segments now in the store (or, for the store in the database, written by the turn's own statement). */
  offloaded: OffloadMove[];
  /** Saves to a store outside the database that failed, and may have written a copy. */
  failedSaves: SegmentId[];
}

/** Attempts at deleting unused copies from a store outside the database within one turn. */
const CLEAN_UP_ATTEMPTS = 3;
/** Unused copies remembered for later turns at most (beyond it they are logged and left). */
const MAX_LEFTOVERS = 10_000;

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * The offload carriage: offloading is planned by the core and carried out here. Segments are
 * saved to the store before the write that removes their rows, read from it before the write
 * that puts them back (by the turn's reads), and deleted from it after that write committed
 * (still inside the turn). The store is never called inside a transaction: under the row lock,
 * segments to load are read first (the transaction is rolled back, the store read, the turn
 * redone) and offloading waits for a later turn. When the store is the database's own table,
 * saves and deletes are part of the turn's statement instead.
 */
@Injectable()
export class OffloadCarriage {
  private readonly logger = new Logger('TurnRunner');
  /** Copies in a store outside the database that nothing refers to and could not be deleted yet, per queue. */
  private readonly leftovers = new Map<string, Map<string, SegmentId>>();
  private leftoverCount = 0;

  constructor(
    private readonly store: OffloadStore,
    private readonly stats: OffloadStats,
  ) {}

  /** Whether the store is a table of the database, written by the turn's own statement. */
  get inDatabase(): boolean {
    return this.store.inDatabase;
  }

  /**
   * Before the write: carries out the moves the core planned (see the class doc). Answers at once
   * when nothing is saved (no promise for the common turn).
   * @param locked - the attempt holds the queue's row lock in a transaction: nothing is saved
   */
  carry(queueId: string, core: QueueCore, moves: readonly OffloadMove[], locked: boolean): Carried | Promise<Carried> {
    if (this.store.inDatabase) {
      // Written by the turn's own statement.
      for (const move of moves) core.offload.offloaded(move.priority, move.segment);
      return { offloaded: [...moves], failedSaves: [] };
    }
    if (locked || moves.length === 0) return { offloaded: [], failedSaves: [] };
    const failedSaves: SegmentId[] = [];
    return this.save(queueId, core, moves, failedSaves).then((offloaded) => ({ offloaded, failedSaves }));
  }

  /** Copies the committed write leaves unused in a store outside the database; taken before the core learns of the commit. */
  unused(core: QueueCore, failedSaves: readonly SegmentId[]): SegmentId[] {
    return this.store.inDatabase ? [] : [...core.storeDeletes(), ...failedSaves];
  }

  /**
   * After the write committed, inside the turn (a later turn of this queue must not save under a
   * key before this delete ran): deletes the unused copies, and those earlier turns left. Undefined
   * when there is nothing to delete (no promise for the common turn).
   */
  afterWrite(queueId: string, core: QueueCore, unused: SegmentId[]): Promise<void> | undefined {
    return unused.length > 0 || this.leftovers.has(queueId) ? this.cleanUp(queueId, core, unused) : undefined;
  }

  /**
   * Deletes copies in a store outside the database that nothing refers to (segments loaded
   * back, a deleted queue's segments, saves that failed after writing), and those earlier
   * turns of the queue could not delete. Never a segment the committed metadata refers to.
   */
  private async cleanUp(queueId: string, core: QueueCore, unused: SegmentId[]): Promise<void> {
    const pending = this.leftovers.get(queueId) ?? new Map<string, SegmentId>();
    this.leftovers.delete(queueId);
    this.leftoverCount -= pending.size;
    for (const s of unused) pending.set(offloadedSegmentKey(s.priority, s.segment, queueId), s);
    const keys = [...pending].filter(([, s]) => !core.isOffloadedSegment(s.priority, s.segment)).map(([k]) => k);
    if (keys.length === 0) return;
    let lastError: unknown;
    for (let attempt = 0; attempt < CLEAN_UP_ATTEMPTS; attempt++) {
      try {
        await this.store.delete(queueId, keys);
        return;
      } catch (error) {
        lastError = error;
      }
    }
    if (this.leftoverCount + keys.length > MAX_LEFTOVERS) {
      this.logger.warn(`Could not delete ${keys.length} unused segment(s) of queue ${queueId} from the offload store; left behind: ${message(lastError)}`);
      return;
    }
    this.logger.warn(
      `Could not delete ${keys.length} unused segment(s) of queue ${queueId} from the offload store; retried after its next turn: ${message(lastError)}`,
    );
    this.leftovers.set(queueId, new Map(keys.map((k) => [k, pending.get(k)!])));
    this.leftoverCount += keys.length;
  }

  /** Saves planned moves to a store outside the database; a priority stops at its first failure (the range stays contiguous). */
  private async save(queueId: string, core: QueueCore, moves: readonly OffloadMove[], failedSaves: SegmentId[]): Promise<OffloadMove[]> {
    const done: OffloadMove[] = [];
    const failed = new Set<number>();
    for (const move of moves) {
      if (failed.has(move.priority)) continue;
      try {
        await this.store.save(queueId, offloadedSegmentKey(move.priority, move.segment, queueId), move.items, move.from, move.headers);
      } catch (error) {
        failed.add(move.priority);
        failedSaves.push(move);
        this.stats.offloadFailures += 1;
        this.logger.warn(`Failed to offload segment ${move.segment} for priority ${move.priority} (actor ${queueId}): ${message(error)}`);
        continue;
      }
      core.offload.offloaded(move.priority, move.segment);
      done.push(move);
    }
    return done;
  }
}
