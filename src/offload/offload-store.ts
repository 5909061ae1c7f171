/**
 * Port: where cold middle segments of a queue go while they are far from its head (seed 003,
 * "Segment Offloading"). An abstract class so it can serve as the DI token: provide another
 * adapter (object storage, a file system) for `OffloadStore` and the queue code does not change.
 *
 * A store outside the service's database never takes part in a turn's transaction: the turn
 * runner saves a segment before the turn's write removes it from the queue's rows, reads a
 * segment before the turn's write puts it back, and deletes a loaded-back segment only after
 * that write committed, so a segment is always in at least one place whatever fails. Copies
 * that nothing refers to any more (a save that failed after writing, a delete that failed)
 * are deleted again, within the turn and at the end of later turns of the queue.
 *
 * A store inside the service's database ({@link inDatabase}) is written by the turn's own
 * statement instead, atomically with it; the runner then only calls {@link load}.
 *
 * Keys follow the seed: `offloaded_queue_{priority}_seg_{n}_{queue_id}`. A segment's value is
 * its items as JSON texts, in queue order. Any method may throw; the runner treats a failure as
 * "not moved" and never loses an item over it.
 */
export abstract class OffloadStore {
  /** Whether the store is the `offloaded_segments` table of the service's own database. */
  get inDatabase(): boolean {
    return false;
  }

  /**
   * Stores a segment under `key`, replacing anything stored there before.
   * @param items - the segment's items as JSON texts, in order (never empty)
   * @param from - parallel to `items`: the queue each was dead-lettered from (null: never); absent when none was.
   *   A store keeps it with the segment and gives it back from {@link load}.
   * @param headers - parallel to `items`: each one's headers as JSON text (null: none); absent when none has any. Kept and given back as `from` is.
   */
  abstract save(queueId: string, key: string, items: readonly string[], from?: readonly (string | null)[], headers?: readonly (string | null)[]): Promise<void>;

  /**
   * Reads a segment.
   * @returns its items as saved, with `from` and `headers` when it was saved with them, or undefined when nothing is stored under `key`
   */
  abstract load(queueId: string, key: string): Promise<StoredSegment | undefined>;

  /** Deletes segments of a queue; keys with nothing stored are ignored. */
  abstract delete(queueId: string, keys: readonly string[]): Promise<void>;

  /** Number of segments stored over all queues (for metrics). */
  abstract countSegments(): Promise<number>;
}

/**
 * A segment as an offload store keeps it: its items as JSON texts, in order, where each was
 * dead-lettered from (absent: none was) and each one's headers (absent: none has any).
 */
export interface StoredSegment {
  readonly items: string[];
  readonly from?: (string | null)[];
  readonly headers?: (string | null)[];
}

/** The seed's key of an offloaded segment. */
export function offloadedSegmentKey(priority: number, segment: number, queueId: string): string {
  return `offloaded_queue_${priority}_seg_${segment}_${queueId}`;
}
