import { Injectable } from '@nestjs/common';
import { GatheringBatcher } from '../../common/gathering-batcher.js';
import type { LoadedQueue } from '../../segment-storage/queue-metadata.js';
import { SegmentRepository } from '../../segment-storage/segment.repository.js';

/** Queue rows one statement loads at most. */
const MAX_BATCH = 1_000;

/**
 * Loads queue rows for actors being activated, batched: the loads asked for while one
 * statement is in flight go together in the next (see {@link GatheringBatcher}). A turn of a
 * queue whose actor is not in memory needs its row before it can do anything; when many queues
 * wake at once (a burst of notifications for long polls, the first pushes to many new queues)
 * that is one statement per batch instead of one per turn. A pop asks for its queue's front
 * segment with the row (`front`), from the same snapshot, so that a pop on a freshly loaded
 * queue sends no statement but its write.
 */
@Injectable()
export class QueueLoads {
  private readonly batcher: GatheringBatcher<string, boolean, LoadedQueue | undefined>;

  constructor(segments: SegmentRepository) {
    this.batcher = new GatheringBatcher(
      async (batch) => {
        const found = await segments.loadQueues([...batch].map(([queueId, front]) => ({ queueId, front })));
        return (queueId) => found.get(queueId);
      },
      MAX_BATCH,
      (a, b) => a || b,
    );
  }

  /**
   * The queue's row as committed now (undefined: none), with its front segment's rows when
   * `front` is asked for and the queue has items in its segments.
   */
  load(queueId: string, front: boolean): Promise<LoadedQueue | undefined> {
    return this.batcher.request(queueId, front);
  }
}
