import type { EntityManager } from 'typeorm';

/** What an offload store call may use of the queue's current turn. */
export interface OffloadContext {
  /** The turn's transaction. A store in the service's own database uses it, so a move commits atomically with the turn. */
  readonly tx: EntityManager;
}

/**
 * Port: where cold middle segments of a queue go while they are far from its head (seed 003,
 * "Segment Offloading"). An abstract class so it can serve as the DI token: provide another
 * adapter (object storage, a file system) for `OffloadStore` and the queue code does not change.
 *
 * Keys follow the seed: `offloaded_queue_{priority}_seg_{n}_{queue_id}`. A segment's value is
 * its items as JSON texts, in queue order. Any method may throw; the caller treats a failure as
 * "not moved" and never loses an item over it.
 */
export abstract class OffloadStore {
  /**
   * Whether the store takes part in the turn's transaction. When false, the queue code deletes
   * loaded-back segments from the store only after the turn has committed, so a failed commit
   * can never leave a segment in neither place.
   */
  abstract readonly transactional: boolean;

  /**
   * Stores a segment under `key`, replacing anything stored there before.
   * @param key - the seed's offloaded key
   * @param items - the segment's items as JSON texts, in order (never empty)
   */
  abstract save(key: string, queueId: string, items: string[], ctx: OffloadContext): Promise<void>;

  /**
   * Reads a segment.
   * @returns its items as saved, or undefined when nothing is stored under `key`
   */
  abstract load(key: string, ctx: OffloadContext): Promise<string[] | undefined>;

  /** Deletes segments; keys with nothing stored are ignored. */
  abstract delete(keys: string[], ctx: OffloadContext): Promise<void>;

  /** Number of segments stored over all queues (for metrics). */
  abstract countSegments(ctx: OffloadContext): Promise<number>;
}

/** The seed's key of an offloaded segment. */
export function offloadedSegmentKey(priority: number, segment: number, queueId: string): string {
  return `offloaded_queue_${priority}_seg_${segment}_${queueId}`;
}
