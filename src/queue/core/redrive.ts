import type { GivenBackItems } from './given-back-items.js';
import type { QueueFront } from './queue-front.js';
import type { CoreContext } from './turn-state.js';
import { Needed, type HeldItem } from './types.js';

/**
 * Segments' worth of items one batch takes from the front at most (all of them read in one round,
 * offloaded ones included): a queue with small segments gets smaller batches rather than a turn
 * that reads without end.
 */
export const REDRIVE_SEGMENTS_PER_BATCH = 32;

/** One batch of a redrive, as asked for. */
export interface RedriveRequest {
  /** The queue redriven: an item dead-lettered from it stays where it is. */
  readonly queueId: string;
  /** Items this batch moves at most (at least 1). */
  readonly limit: number;
  /** Items at the front that earlier batches left where they were: this batch looks past them. */
  readonly skip: number;
  /** Where every item goes; absent: each to the queue it was dead-lettered from (the others stay). */
  readonly destination?: string;
}

/** What one batch of a redrive did. */
export interface RedriveBatch {
  /** Items moved to the tails of their priorities on their destinations. */
  readonly moved: number;
  /** Items this batch looked at and left where they were (never dead-lettered, no destination given). */
  readonly left: number;
  /**
   * Nothing more for later batches: the front ran out, stopped at a segment that could not be
   * read, or the items left in place fill all that one batch may take.
   */
  readonly done: boolean;
}

/**
 * Redrive: items from the front of a queue (lowest priority first, FIFO within a priority,
 * given-back items first, as a pop takes them) go to the tail of their priority on another
 * queue, with their delivery counts starting again at 0. Items held by live locks are not at
 * the front, so they stay.
 *
 * A batch takes `skip + limit` items from the front (at most {@link REDRIVE_SEGMENTS_PER_BATCH}
 * segments' worth) and puts back, where they were and in their order, the `skip` items earlier
 * batches left and those it leaves itself: what stays on the queue keeps its order and its
 * delivery counts exactly. The moved items leave in the
 * turn's write, which adds them to their destinations in the same statement (see
 * `TurnWrite.redriven`): an item is never in both queues, and never lost.
 */
export class Redrive {
  constructor(
    private readonly ctx: CoreContext,
    private readonly front: QueueFront,
    private readonly givenBack: GivenBackItems,
  ) {}

  /** Runs one batch, or returns {@link Needed} (before changing anything) for the rows it must read first. */
  batch(request: RedriveRequest): RedriveBatch | Needed {
    const turn = this.ctx.turn;
    const wanted = Math.min(request.skip + request.limit, REDRIVE_SEGMENTS_PER_BATCH * this.ctx.settings.segmentSize);
    if (wanted <= request.skip) return { moved: 0, left: 0, done: true };
    const items: HeldItem[] = [];
    const blocked = this.front.take(wanted, items, undefined);
    if (blocked instanceof Needed) return blocked;
    const kept = new Map<number, HeldItem[]>();
    let moved = 0;
    let left = 0;
    items.forEach((item, i) => {
      const to = i < request.skip ? undefined : (request.destination ?? item.from);
      if (to === undefined || to === request.queueId) {
        const list = kept.get(item.priority) ?? [];
        list.push(item);
        kept.set(item.priority, list);
        if (i >= request.skip) left += 1;
        return;
      }
      const redriven = { queueId: to, priority: item.priority, json: item.json };
      turn.writes.redriven.push(item.headers === undefined ? redriven : { ...redriven, headers: item.headers });
      moved += 1;
    });
    this.givenBack.putBack(kept);
    if (moved > 0) turn.touch();
    return { moved, left, done: blocked !== undefined || items.length < wanted };
  }
}
