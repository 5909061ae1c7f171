import type { ExclusiveLock } from './exclusive-lock.js';
import type { GiveBackOutcome, GivenBackItems } from './given-back-items.js';
import type { SharedLocks } from './shared-locks.js';
import type { CoreContext } from './turn-state.js';
import { Needed, type LockProblem, type LockState } from './types.js';

/** Why a release was refused: a problem of the lock, or (asked to dead-letter) the queue has no dead-letter queue; the lock stays. */
export type ReleaseProblem = LockProblem | 'NO_DEAD_LETTER_QUEUE';

/** How a release gives its items back: after `delayMs` (replacing the queue's retry delay), or all to the dead-letter queue. */
export interface ReleaseHow {
  readonly delayMs?: number;
  readonly deadLetter?: boolean;
}

/** What a release did: the items it gave back (dead-lettered ones included), or why not; with what became of them. */
export interface ReleaseOutcome {
  readonly returned: number | ReleaseProblem;
  readonly outcome?: GiveBackOutcome;
}

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

  /**
   * What must be read before locks can be looked at by id (shared mode: their rows, all at
   * once); undefined when nothing is needed. The operations below ask for their own ids too;
   * a turn asks for the ids of all its operations first (see `DeclaredReads.lockIds`).
   */
  need(lockIds: readonly string[]): Needed | undefined {
    if (!this.sharedMode) return undefined;
    const rows = this.shared.need(lockIds);
    return rows ? new Needed({ lockRows: [rows] }) : undefined;
  }

  /**
   * Acknowledges each lock in order, each as {@link acknowledge} would (a refusal changes
   * nothing and leaves the others to go on); {@link Needed} for all their rows at once, first.
   */
  acknowledgeAll(lockIds: readonly string[], now: number): (number | LockProblem)[] | Needed {
    const need = this.need(lockIds);
    if (need) return need;
    return lockIds.map((id) => this.acknowledge(id, now) as number | LockProblem);
  }

  /** Releases each lock in order, each as {@link release} would; {@link Needed} for all their rows at once, first. */
  releaseAll(lockIds: readonly string[], now: number, how: ReleaseHow = {}): ReleaseOutcome[] | Needed {
    const need = this.need(lockIds);
    if (need) return need;
    return lockIds.map((id) => this.release(id, now, how) as ReleaseOutcome);
  }

  /** Removes the lock and its items for good; the number of items, or why not. */
  acknowledge(lockId: string, now: number): number | LockProblem | Needed {
    const lock = this.check(lockId, now);
    if (typeof lock === 'string' || lock instanceof Needed) return lock;
    if (this.sharedMode) this.shared.end(lock, 'acknowledge');
    else this.exclusive.set(null);
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
   * past `maxDeliveries`) and removes the lock. `how.delayMs` replaces the queue's retry delay;
   * with `how.deadLetter` every item goes to the dead-letter queue instead (refused, after the
   * lock's checks, on a queue without one).
   */
  release(lockId: string, now: number, how: ReleaseHow = {}): ReleaseOutcome | Needed {
    const lock = this.check(lockId, now);
    if (lock instanceof Needed) return lock;
    if (typeof lock === 'string') return { returned: lock };
    if (how.deadLetter && !this.ctx.settings.deadLetterQueue) return { returned: 'NO_DEAD_LETTER_QUEUE' };
    const at = { now, delayMs: how.delayMs, deadLetter: how.deadLetter };
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
