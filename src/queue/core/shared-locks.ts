import type { GiveBackOutcome, GiveBackTime, GivenBackItems } from './given-back-items.js';
import type { CoreContext, TurnState } from './turn-state.js';
import { NO_SHARED_LOCKS, Needed, type LockProblem, type LockRowsFetch, type LockRowsNeed, type LockState, type SharedLockSummary } from './types.js';

/** Expired shared locks one turn gives back at most; the rest are given back by the next turns (or when their id is used). */
export const MAX_EXPIRED_LOCKS_PER_TURN = 100;

/** Live shared locks a core keeps known between turns at most (see {@link SharedLocks}). */
export const MAX_KNOWN_LOCKS = 1000;
/** Characters of item JSON those locks hold at most. */
export const MAX_KNOWN_LOCK_CHARS = 1 << 20;

/** What the expiry of a turn's due shared locks did. */
export interface SharedExpiryOutcome extends GiveBackOutcome {
  readonly locks: number;
}

/**
 * A queue's shared locks (competing consumers): any number live side by side, each holding its
 * own items. The locks stay in their table; memory holds the queue row's summary of them, the
 * locks a turn read, and, between turns, the live locks the last committed turns wrote or read.
 *
 * **Known locks.** A consumer acknowledges the locks a pop just made: without them in memory,
 * every acknowledgement turn would first read its locks' rows back (a round trip, and for a
 * batch of a hundred per-item locks the larger part of the turn). So once a turn committed
 * ({@link remember}), the live locks it wrote or read stay known, the most recent
 * {@link MAX_KNOWN_LOCKS} holding at most {@link MAX_KNOWN_LOCK_CHARS} characters of items.
 * This is as safe as the segments kept between turns: a live lock changes only in a turn of its
 * queue (acknowledged, released, extended or expired; the sweep deletes only expired rows, which
 * are not kept), every use of a known lock is a change written under the queue's version, and a
 * core whose version another process moved on fails that write and is dropped.
 *
 * Invariant: the summary's `nextExpiry` is a lower bound of the live locks' expiries (null
 * exactly when none lives); {@link TurnState.nextExpiryExact} says a turn has read it exactly.
 */
export class SharedLocks {
  private summary: { live: number; items: number; nextExpiry: number | null };
  /** Live locks known between turns, least recently written or read first (see the class doc). */
  private readonly known = new Map<string, LockState>();
  private knownChars = 0;
  private knownItemCount = 0;

  constructor(
    private readonly ctx: CoreContext,
    private readonly givenBack: GivenBackItems,
    stored: SharedLockSummary = NO_SHARED_LOCKS,
  ) {
    this.summary = { ...stored };
  }

  /** What the queue row records (a copy). */
  get state(): SharedLockSummary {
    return { ...this.summary };
  }

  get live(): number {
    return this.summary.live;
  }

  get items(): number {
    return this.summary.items;
  }

  get nextExpiry(): number | null {
    return this.summary.nextExpiry;
  }

  /**
   * The contract's checks for a lock id in shared mode: no INVALID_LOCK_ID, a lock is found by
   * its id. A lock found expired by time but not yet given back (more were due than a turn
   * takes) is given back now, and answers 410. {@link Needed} (before any change): the lock's row
   * must be read first.
   */
  check(lockId: string, now: number): LockState | LockProblem | Needed {
    const lock = this.find(lockId);
    if (lock instanceof Needed) return lock;
    if (!lock) return 'LOCK_NOT_FOUND';
    if (lock.state === 'expired') return 'LOCK_EXPIRED';
    if (lock.expiresAt <= now) {
      this.end(lock, 'expire', { now });
      this.ctx.turn.writes.sharedChanged = true;
      return 'LOCK_EXPIRED';
    }
    return lock;
  }

  /** What must be read so that every lock named is known this turn (one read for all of them); undefined: they are. */
  need(lockIds: readonly string[]): LockRowsNeed | undefined {
    const turn = this.ctx.turn;
    const ids = lockIds.filter((id) => !turn.writes.sharedLocks.has(id) && !turn.lockRows.has(id) && !this.known.has(id));
    return ids.length > 0 ? { kind: 'locks', ids: [...new Set(ids)] } : undefined;
  }

  /** A new lock holding items popped for it; `heldAfter`: items it holds per priority (they keep their priorities alive). */
  add(lock: LockState, heldAfter: ReadonlyMap<number, number>): void {
    const turn = this.ctx.turn;
    this.givenBack.hold(heldAfter);
    turn.writes.sharedLocks.set(lock.lockId, lock);
    turn.writes.createdSharedLocks.add(lock.lockId);
    turn.lockRows.set(lock.lockId, lock);
    this.summary.live += 1;
    this.summary.items += lock.items.length;
    this.summary.nextExpiry = this.summary.nextExpiry === null ? lock.expiresAt : Math.min(this.summary.nextExpiry, lock.expiresAt);
    turn.writes.sharedChanged = true;
  }

  /** Sets a live lock's expiry (the row's earliest expiry stays a lower bound). */
  extend(extended: LockState): void {
    const turn = this.ctx.turn;
    turn.writes.sharedLocks.set(extended.lockId, extended);
    turn.lockRows.set(extended.lockId, extended);
    // A later expiry leaves the bound as it was, an earlier one (a short ttl) lowers it.
    if (this.summary.nextExpiry === null || extended.expiresAt < this.summary.nextExpiry) {
      this.summary.nextExpiry = extended.expiresAt;
      turn.writes.sharedChanged = true;
    } else {
      turn.nextExpiryExact = false;
    }
    turn.touch();
  }

  /**
   * Gives back the items of locks expired at `now`, at most {@link MAX_EXPIRED_LOCKS_PER_TURN};
   * undefined when none is due (no read: the summary carries a lower bound of the earliest
   * expiry). Returns {@link Needed} (before changing anything) to have the due locks read.
   */
  expireDue(now: number): SharedExpiryOutcome | undefined | Needed {
    const turn = this.ctx.turn;
    if (turn.expiredDue || this.summary.live === 0 || this.summary.nextExpiry === null || this.summary.nextExpiry > now) return undefined;
    const due = turn.dueLocks;
    if (!due) return new Needed({ lockRows: [{ kind: 'due', now, limit: MAX_EXPIRED_LOCKS_PER_TURN }] });
    turn.dueLocks = undefined;
    turn.expiredDue = true;
    let returned = 0;
    let deadLettered = 0;
    let delayed = 0;
    for (const lock of due.locks) {
      const outcome = this.end(lock, 'expire', { now });
      returned += outcome.returned;
      deadLettered += outcome.deadLettered;
      delayed += outcome.delayed;
    }
    // Read exactly, unless more were due than one turn takes: then the last one read bounds the rest.
    const next = due.locks.length >= MAX_EXPIRED_LOCKS_PER_TURN ? due.locks[due.locks.length - 1].expiresAt : due.nextExpiry;
    this.summary.nextExpiry = this.summary.live === 0 ? null : (next ?? now);
    turn.nextExpiryExact = due.locks.length < MAX_EXPIRED_LOCKS_PER_TURN;
    turn.writes.sharedChanged = true;
    turn.touch();
    return { locks: due.locks.length, returned, deadLettered, delayed };
  }

  /** Ends a live lock: acknowledged (items gone), released (row gone, items back) or expired (row kept, items back). */
  end(lock: LockState, how: 'acknowledge' | 'release' | 'expire', at?: GiveBackTime): GiveBackOutcome {
    const turn = this.ctx.turn;
    let outcome: GiveBackOutcome = { returned: 0, deadLettered: 0, delayed: 0 };
    if (how === 'acknowledge') {
      this.givenBack.unhold(lock.items);
      this.givenBack.settle(lock.items);
    } else {
      outcome = this.givenBack.giveBack(lock.items, true, at);
    }
    const ended = how === 'expire' ? { ...lock, state: 'expired' as const, items: [] } : null;
    turn.writes.sharedLocks.set(lock.lockId, ended);
    turn.lockRows.set(lock.lockId, ended);
    this.summary.live = Math.max(0, this.summary.live - 1);
    this.summary.items = Math.max(0, this.summary.items - lock.items.length);
    if (this.summary.live === 0) this.summary.nextExpiry = null;
    // It may have been the earliest: what the row keeps is a lower bound again.
    turn.nextExpiryExact = false;
    turn.writes.sharedChanged = true;
    turn.touch();
    return outcome;
  }

  /** Inspection needs the exact earliest expiry: what must be read for it, or undefined when it was read already. */
  needExactNextExpiry(): Needed | undefined {
    const turn = this.ctx.turn;
    if (this.summary.live > 0 && !turn.nextExpiryExact) return new Needed({ lockRows: [{ kind: 'next', exclude: [...turn.writes.sharedLocks.keys()] }] });
    return undefined;
  }

  /** Hands over the lock rows a {@link Needed} asked for (given-back items go to {@link GivenBackItems.provide}). */
  provide(fetch: Exclude<LockRowsFetch, { kind: 'returned' }>): void {
    const turn = this.ctx.turn;
    switch (fetch.kind) {
      case 'locks':
        for (const [id, lock] of fetch.locks) if (!turn.lockRows.has(id)) turn.lockRows.set(id, lock);
        return;
      case 'due':
        turn.dueLocks = { locks: fetch.locks, nextExpiry: fetch.nextExpiry };
        return;
      case 'next': {
        // The stored locks this turn did not write, and those it wrote that still live.
        let next = fetch.nextExpiry;
        for (const lock of turn.writes.sharedLocks.values()) if (lock?.state === 'active' && (next === null || lock.expiresAt < next)) next = lock.expiresAt;
        if (this.summary.live > 0 && next !== null && next !== this.summary.nextExpiry) {
          // Tightened: written with the turn, so that the sweep does not find the old bound again.
          this.summary.nextExpiry = next;
          turn.writes.sharedChanged = true;
          turn.touch();
        }
        turn.nextExpiryExact = true;
        return;
      }
    }
  }

  /** Forgets every lock (the queue is deleted). */
  clear(): void {
    this.summary = { ...NO_SHARED_LOCKS };
    this.forget();
  }

  /** Items of the locks known between turns. */
  get knownItems(): number {
    return this.knownItemCount;
  }

  /**
   * `turn` committed: the live locks it wrote or read are known from now on (refreshed as the
   * most recent), those it ended are not, and the oldest go while over the bounds.
   */
  remember(turn: TurnState): void {
    for (const [id, lock] of turn.lockRows) this.know(id, lock);
    for (const [id, lock] of turn.writes.sharedLocks) this.know(id, lock);
    for (const id of this.known.keys()) {
      if (this.known.size <= MAX_KNOWN_LOCKS && this.knownChars <= MAX_KNOWN_LOCK_CHARS) break;
      this.know(id, null);
    }
  }

  /** Forgets the locks known between turns (nothing of them is trusted any more). */
  forget(): void {
    this.known.clear();
    this.knownChars = 0;
    this.knownItemCount = 0;
  }

  private know(id: string, lock: LockState | null): void {
    const was = this.known.get(id);
    if (was) {
      this.known.delete(id);
      this.knownChars -= charsOf(was);
      this.knownItemCount -= was.items.length;
    }
    if (lock?.state !== 'active') return;
    this.known.set(id, lock);
    this.knownChars += charsOf(lock);
    this.knownItemCount += lock.items.length;
  }

  /** A lock as known this turn, or {@link Needed} to have it read. */
  private find(lockId: string): LockState | null | Needed {
    const turn = this.ctx.turn;
    if (turn.writes.sharedLocks.has(lockId)) return turn.writes.sharedLocks.get(lockId) ?? null;
    if (turn.lockRows.has(lockId)) return turn.lockRows.get(lockId) ?? null;
    const known = this.known.get(lockId);
    if (known) return known;
    return new Needed({ lockRows: [{ kind: 'locks', ids: [lockId] }] });
  }
}

/** Characters of item JSON a lock holds. */
function charsOf(lock: LockState): number {
  let chars = 0;
  for (const item of lock.items) chars += item.json.length;
  return chars;
}
