import type { QueueCore } from '../core/queue-core.js';

/**
 * One operation on a queue, run inside the queue's turn against its core. `apply` returns the
 * operation's outcome, a refusal included (a refused operation changes nothing; the service
 * turns refusals into answers). It may throw the core's `Missing*` errors (before changing
 * anything: the runner reads what they ask for and calls it again, see {@link drive}); anything
 * else it throws fails the whole turn.
 */
export interface TurnOp<T> {
  apply(core: QueueCore, now: number): T;
  /** Items the operation carries; bounds how much one turn writes. Default 1. */
  readonly weight?: number;
  /** Nothing after this operation runs in the same turn (deleting the queue). */
  readonly endsTurn?: boolean;
  /**
   * Deduplication ids the operation will ask the core about: the runner has them checked for
   * all the operations of a turn with one read, before the first of them runs.
   */
  readonly dedupIds?: readonly string[];
  /**
   * The operation takes items from the front of the queue (a pop): a turn that activates the
   * queue loads its front segment with its row, so that the pop needs no read of its own.
   */
  readonly readsFront?: boolean;
}
