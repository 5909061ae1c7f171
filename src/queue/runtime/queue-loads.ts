import { Injectable } from '@nestjs/common';
import type { LoadedQueue } from '../../segment-storage/queue-metadata.js';
import { SegmentRepository } from '../../segment-storage/segment.repository.js';

/** Queue rows one statement loads at most. */
const MAX_BATCH = 1_000;

interface Waiting {
  front: boolean;
  callers: { resolve(loaded: LoadedQueue | undefined): void; reject(error: unknown): void }[];
}

/**
 * Loads queue rows for actors being activated, batched: the loads asked for while one
 * statement is in flight go together in the next (one statement at a time, each with all those
 * asked for meanwhile; none waits for a timer). A turn of a queue whose actor is not in memory
 * needs its row before it can do anything; when many queues wake at once (a burst of
 * notifications for long polls, the first pushes to many new queues) that is one statement per
 * batch instead of one per turn. A pop asks for its queue's front segment with the row (`front`),
 * from the same snapshot, so that a pop on a freshly loaded queue sends no statement but its
 * write.
 *
 * Hand-written rather than a DataLoader-style library: the batching rule (one in flight, the
 * rest accumulate, errors to everyone in the batch) is all there is, and it must not hold a
 * load back for a tick when nothing is in flight.
 */
@Injectable()
export class QueueLoads {
  private asked = new Map<string, Waiting>();
  private loading = false;
  /** Load statements sent. */
  statements = 0;

  constructor(private readonly segments: SegmentRepository) {}

  /**
   * The queue's row as committed now (undefined: none), with its front segment's rows when
   * `front` is asked for and the queue has items in its segments.
   */
  load(queueId: string, front: boolean): Promise<LoadedQueue | undefined> {
    return new Promise((resolve, reject) => {
      const waiting = this.asked.get(queueId);
      if (waiting) {
        waiting.front ||= front;
        waiting.callers.push({ resolve, reject });
      } else {
        this.asked.set(queueId, { front, callers: [{ resolve, reject }] });
      }
      this.send();
    });
  }

  private send(): void {
    if (this.loading || this.asked.size === 0) return;
    this.loading = true;
    const batch = new Map<string, Waiting>();
    for (const [queueId, waiting] of this.asked) {
      if (batch.size >= MAX_BATCH) break;
      batch.set(queueId, waiting);
    }
    for (const queueId of batch.keys()) this.asked.delete(queueId);
    this.statements += 1;
    this.segments
      .loadQueues([...batch].map(([queueId, { front }]) => ({ queueId, front })))
      .then(
        (found) => {
          for (const [queueId, { callers }] of batch) for (const caller of callers) caller.resolve(found.get(queueId));
        },
        (error: unknown) => {
          for (const { callers } of batch.values()) for (const caller of callers) caller.reject(error);
        },
      )
      .finally(() => {
        this.loading = false;
        this.send();
      });
  }
}
