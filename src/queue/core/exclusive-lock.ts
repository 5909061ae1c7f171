import type { CoreContext } from './turn-state.js';
import type { LockProblem, LockState } from './types.js';

/**
 * A queue's exclusive lock (seed 004): one at a time, held on the queue's row; while it is
 * active every pop is refused. An expired lock is kept so that its id answers 410 until a new
 * lock replaces it.
 */
export class ExclusiveLock {
  constructor(
    private readonly ctx: CoreContext,
    private current: LockState | null,
  ) {}

  get lock(): LockState | null {
    return this.current;
  }

  get isActive(): boolean {
    return this.current?.state === 'active';
  }

  /** The lock changes with the turn (null: it goes). */
  set(lock: LockState | null): void {
    this.current = lock;
    this.ctx.turn.writes.lock = lock ? { op: 'upsert', lock } : { op: 'delete' };
  }

  /** The lock whose time has come at `now`, if any: the caller gives its items back, and the lock is kept as expired. */
  takeExpired(now: number): LockState | undefined {
    const lock = this.current;
    if (lock?.state !== 'active' || lock.expiresAt > now) return undefined;
    this.set({ ...lock, state: 'expired', items: [] });
    return lock;
  }

  /** The contract's checks, in order: no lock, expired, wrong id. */
  check(lockId: string): LockState | LockProblem {
    const lock = this.current;
    if (!lock) return 'LOCK_NOT_FOUND';
    if (lock.state === 'expired') return 'LOCK_EXPIRED';
    if (lock.lockId !== lockId) return 'INVALID_LOCK_ID';
    return lock;
  }

  /** Whether `lockId` is the queue's last exclusive lock, expired (its id answers 410 in shared mode too). */
  isExpired(lockId: string): boolean {
    return this.current?.state === 'expired' && this.current.lockId === lockId;
  }

  /** Forgets the lock without a write of its own (the queue is deleted). */
  clear(): void {
    this.current = null;
  }
}
