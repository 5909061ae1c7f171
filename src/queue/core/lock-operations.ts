import type { ExclusiveLock } from './exclusive-lock.js';
import type { GiveBackOutcome, GivenBackItems } from './given-back-items.js';
import type { SharedLocks } from './shared-locks.js';
import type { CoreContext } from './turn-state.js';
import { Needed, type LockProblem, type LockState } from './types.js';

/**
 * Acknowledge, extend and release, in either lock mode: the contract's checks first, in its
 * order, and nothing changed when one fails (the outcome names the problem).
 */
export class LockOperations {
  constructor(
    private readonly ctx: CoreContext,
    private readonly exclusive: ExclusiveLock,
    private readonly shared: SharedLocks,
    private readonly givenBack: GivenBackItems,
  ) {}

  private get sharedMode(): boolean {
    return this.ctx.settings.lockMode === 'shared';
  }

  /**
   * The contract's checks for a lock id. In shared mode the queue's last exclusive lock,
   * expired before the queue switched, still answers as an expired lock's id (see
   * {@link SharedLocks.check} for the rest); in exclusive mode see {@link ExclusiveLock.check}.
   * {@link Needed}: a shared lock's row must be read first.
   */
  check(lockId: string, now: number): LockState | LockProblem | Needed {
    if (!this.sharedMode) return this.exclusive.check(lockId);
    if (this.exclusive.isExpired(lockId)) return 'LOCK_EXPIRED';
    return this.shared.check(lockId, now);
  }

  /** A new lock holding items popped for it; `heldAfter`: items it holds per priority (they keep their priorities alive). */
  add(lock: LockState, heldAfter: ReadonlyMap<number, number>): void {
    if (this.sharedMode) return this.shared.add(lock, heldAfter);
    this.givenBack.hold(heldAfter);
    this.exclusive.set(lock);
  }

  /** Removes the lock and its items for good; the number of items, or why not. */
  acknowledge(lockId: string, now: number): number | LockProblem | Needed {
    const lock = this.check(lockId, now);
    if (typeof lock === 'string' || lock instanceof Needed) return lock;
    if (this.sharedMode) this.shared.end(lock, 'acknowledge');
    else {
      this.givenBack.unhold(lock.items);
      this.givenBack.settle(lock.items);
      this.exclusive.set(null);
    }
    return lock.items.length;
  }

  /** Sets the lock's expiry to `now + ttlMs`. */
  extend(lockId: string, now: number, ttlMs: number): LockState | LockProblem | Needed {
    const lock = this.check(lockId, now);
    if (typeof lock === 'string' || lock instanceof Needed) return lock;
    const extended = { ...lock, expiresAt: now + ttlMs };
    if (this.sharedMode) this.shared.extend(extended);
    else this.exclusive.set(extended);
    return extended;
  }

  /**
   * Gives the lock's items back now (to where they were, after their retry delay; dead-lettered
   * past `maxDeliveries`) and removes the lock. `delayMs` replaces the queue's retry delay.
   */
  release(lockId: string, now: number, delayMs?: number): { returned: number | LockProblem; outcome?: GiveBackOutcome } | Needed {
    const lock = this.check(lockId, now);
    if (lock instanceof Needed) return lock;
    if (typeof lock === 'string') return { returned: lock };
    const at = { now, delayMs };
    if (this.sharedMode) return { returned: lock.items.length, outcome: this.shared.end(lock, 'release', at) };
    const outcome = this.givenBack.giveBack(lock.items, false, at);
    this.exclusive.set(null);
    return { returned: lock.items.length, outcome };
  }

  /** Gives back the items of the exclusive lock if its time has come at `now`; the count given back (dead-lettered included), or undefined. */
  expireExclusive(now: number): number | undefined {
    const lock = this.exclusive.takeExpired(now);
    if (!lock) return undefined;
    this.givenBack.giveBack(lock.items, false, { now });
    return lock.items.length;
  }
}
