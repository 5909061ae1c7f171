import type { DeliveryLimits } from './delivery-limits.js';
import type { ExclusiveLock } from './exclusive-lock.js';
import type { PopOutcome } from './outcomes.js';
import type { PrioritySegments } from './priority-segments.js';
import type { QueueFront } from './queue-front.js';
import { lockModeOf } from './queue-settings.js';
import type { SharedLocks } from './shared-locks.js';
import type { CoreContext } from './turn-state.js';
import { Needed, type HeldItem, type LockState } from './types.js';

/**
 * What a pop with ack asks for: the items under a new lock with id `lockId`, for `ttlMs`; a
 * shared-mode queue holds at most `maxLocks` live locks. With `itemLockIds` (shared mode only),
 * each item under a lock of its own instead, the n-th item's lock with the n-th id (at least
 * `depth` of them; `lockId` is then unused): each such lock is a shared lock of one item.
 */
export interface PopAck {
  readonly lockId: string;
  readonly ttlMs: number;
  readonly maxLocks?: number;
  readonly itemLockIds?: readonly string[];
}

/**
 * Pops: the checks a pop makes before it takes anything, in the contract's order, then the take
 * from the front (see {@link QueueFront.take}) and the lock (or locks) that hold the items.
 */
export class QueuePops {
  constructor(
    private readonly ctx: CoreContext,
    private readonly segments: PrioritySegments,
    private readonly exclusive: ExclusiveLock,
    private readonly shared: SharedLocks,
    private readonly limits: DeliveryLimits,
    private readonly front: QueueFront,
  ) {}

  /**
   * Removes up to `depth` items from the front. With `ack`, the items are held by a new lock
   * (or, with `ack.itemLockIds`, each by a lock of its own); while an exclusive lock is active
   * every pop is refused. Checked first, in this order: locks per item on a queue in exclusive
   * mode are refused (`perItemRefused`); a paused queue hands out nothing; then the exclusive
   * lock; then the delivery limits (`maxInFlight` for a pop with ack, the pop budget of
   * `maxPopsPerSecond` at `now`) bound `depth`, and with no room or budget nothing is taken;
   * then the live locks: at `maxLocks` a pop with ack is refused (`busy`), and a pop with a lock
   * per item takes at most as many items as locks may still be made. A new lock is made at
   * `now` and expires `ttlMs` later.
   */
  pop(depth: number, now: number, ack?: PopAck): PopOutcome | Needed {
    const shared = lockModeOf(this.ctx.settings) === 'shared';
    const perItem = ack?.itemLockIds !== undefined;
    if (perItem && !shared) return { perItemRefused: true };
    // Paused: nothing is handed out, before any other answer (423 included).
    if (this.ctx.settings.paused === true) return { items: [], paused: true };
    if (!shared && this.exclusive.isActive) return { locked: this.exclusive.lock! };
    // Delivery limits: a pop takes at most the room and the budget left; with none, nothing.
    const allowed = this.limits.allow(depth, ack !== undefined, now);
    if (typeof allowed !== 'number') return { items: [], ...allowed };
    depth = allowed;
    const maxLocks = ack?.maxLocks ?? Infinity;
    if (shared && ack && this.shared.live >= maxLocks) return { busy: true };
    if (perItem) depth = Math.min(depth, maxLocks - this.shared.live, ack.itemLockIds.length);
    const items: HeldItem[] = [];
    const heldAfter = shared && ack ? new Map<number, number>() : undefined;
    const blocked = this.front.take(depth, items, heldAfter);
    if (blocked instanceof Needed) return blocked;
    if (items.length === 0 && blocked && this.segments.count > 0) return { unavailable: blocked };
    if (items.length > 0) {
      this.ctx.turn.touch();
      this.limits.took(items.length, now);
    }
    if (!ack || items.length === 0) return { items };
    const delivered = items.map((i) => ({ ...i, deliveries: (i.deliveries ?? 0) + 1 }));
    const lockOf = (lockId: string, held: readonly HeldItem[]): LockState => ({
      lockId,
      state: 'active',
      items: held,
      createdAt: now,
      expiresAt: now + ack.ttlMs,
    });
    if (perItem) {
      const locks = delivered.map((item, i) => lockOf(ack.itemLockIds![i], [item]));
      for (const lock of locks) this.shared.add(lock, new Map([[lock.items[0].priority, 1]]));
      return { items: delivered, locks };
    }
    const lock = lockOf(ack.lockId, delivered);
    if (heldAfter) this.shared.add(lock, heldAfter);
    else this.exclusive.set(lock);
    return { items: delivered, lock };
  }
}
