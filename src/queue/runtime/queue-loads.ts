import { Injectable } from '@nestjs/common';
import { GatheringBatcher } from '../../common/gathering-batcher.js';
import type { LoadedQueue } from '../../database/stored-queue.js';
import { QueueStateRepository } from '../../storage/queue-state.repository.js';

/** Queue rows one statement loads at most. */
const MAX_BATCH = 1_000;
/** States offered and not taken yet, kept at most (the oldest go first). */
const MAX_OFFERED = 2_000;
/** An offered state older than this is not used: the queue is read instead. */
export const OFFERED_STATE_TTL_MS = 2_000;

/**
 * Loads queue rows for actors being activated, batched: the loads asked for while one
 * statement is in flight go together in the next (see {@link GatheringBatcher}). A turn of a
 * queue whose actor is not in memory needs its row before it can do anything; when many queues
 * wake at once (a burst of notifications for long polls, the first pushes to many new queues)
 * that is one statement per batch instead of one per turn. A pop asks for its queue's front
 * segment with the row (`front`), from the same snapshot, so that a pop on a freshly loaded
 * queue sends no statement but its write.
 *
 * It also keeps states **offered** by other processes (a queue as committed by their push,
 * carried by the notification that wakes this process's long polls; see
 * {@link QueueLoads.offer}), for the woken poll's turn to {@link QueueLoads.take} instead of a
 * load: a few, briefly, each used once.
 */
@Injectable()
export class QueueLoads {
  private readonly batcher: GatheringBatcher<string, boolean, LoadedQueue | undefined>;
  private readonly offered = new Map<string, { state: LoadedQueue; at: number }>();
  /** States offered, and taken by a turn. */
  statesOffered = 0;
  statesTaken = 0;

  constructor(queueState: QueueStateRepository) {
    this.batcher = new GatheringBatcher(
      async (batch) => {
        const found = await queueState.loadQueues([...batch].map(([queueId, front]) => ({ queueId, front })));
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

  /**
   * Keeps a queue's state as another process committed it, for the next activation of the queue
   * here (a newer offer replaces it). It may be outdated by the time it is taken: a turn started
   * from it writes only if the queue's version is still the state's, and checks it if it writes
   * nothing, as for an actor kept in memory.
   */
  offer(queueId: string, state: LoadedQueue, now: number): void {
    this.offered.delete(queueId);
    this.offered.set(queueId, { state, at: now });
    this.statesOffered += 1;
    for (const [id, { at }] of this.offered) {
      if (this.offered.size <= MAX_OFFERED && at >= now - OFFERED_STATE_TTL_MS) break;
      this.offered.delete(id);
    }
  }

  /** Whether a state was offered for the queue and not taken yet. */
  hasOffered(queueId: string): boolean {
    return this.offered.has(queueId);
  }

  /** The state offered for the queue, if recent enough; given once. */
  take(queueId: string, now: number): LoadedQueue | undefined {
    const offered = this.offered.get(queueId);
    if (!offered) return undefined;
    this.offered.delete(queueId);
    if (offered.at < now - OFFERED_STATE_TTL_MS) return undefined;
    this.statesTaken += 1;
    return offered.state;
  }

  /** States offered and not taken yet (inspection and tests). */
  get offeredStates(): number {
    return this.offered.size;
  }
}
