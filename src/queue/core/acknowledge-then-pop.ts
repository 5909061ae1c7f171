import type { LockOperations } from './lock-operations.js';
import type { PopOutcome } from './outcomes.js';
import type { PopAck, QueuePops } from './queue-pops.js';
import { lockModeOf } from './queue-settings.js';
import type { CoreContext } from './turn-state.js';
import { Needed, type LockProblem } from './types.js';

/** The pop that follows an acknowledgement: always with ack (require_ack), never waiting. */
export interface NextPop {
  readonly depth: number;
  readonly ack: PopAck;
}

/** What an acknowledgement (of one or more locks) did, and the pop that followed it, if any. */
export interface AcknowledgeOutcome {
  /** Per lock id, in the order given: the items acknowledged, or why not. */
  readonly acknowledged: readonly (number | LockProblem)[];
  /** The pop made after it: only when `next` was asked for and at least one lock was acknowledged. */
  readonly next?: PopOutcome;
  /** `next` asked for a lock per item on a queue in exclusive lock mode: refused before anything was acknowledged. */
  readonly perItemRefused?: true;
}

/**
 * Acknowledging locks, then popping the next items in the same turn (one commit for both).
 *
 * Invariant: every lock is acknowledged at most once per request, although the driver may make
 * the call again: the pop may need rows first (a segment, given-back items) after the
 * acknowledgements changed the queue. Each step keeps "check, then change" on its own, and the
 * acknowledgements, once made, are kept by the turn (keyed by the operation's lock id array)
 * and not made again when the call is.
 */
export class AcknowledgeThenPop {
  constructor(
    private readonly ctx: CoreContext,
    private readonly locks: LockOperations,
    private readonly pops: QueuePops,
  ) {}

  run(lockIds: readonly string[], now: number, next?: NextPop): AcknowledgeOutcome | Needed {
    if (next?.ack.itemLockIds && lockModeOf(this.ctx.settings) !== 'shared') return { acknowledged: [], perItemRefused: true };
    const made = this.ctx.turn.acknowledgedFor;
    let acknowledged = made.get(lockIds);
    if (!acknowledged) {
      const done = this.locks.acknowledgeAll(lockIds, now);
      if (done instanceof Needed) return done;
      acknowledged = done;
      made.set(lockIds, done);
    }
    if (!next || !acknowledged.some((a) => typeof a === 'number')) return { acknowledged };
    const popped = this.pops.pop(next.depth, now, next.ack);
    return popped instanceof Needed ? popped : { acknowledged, next: popped };
  }
}
