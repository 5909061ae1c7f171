import { AsyncLocalStorage } from 'node:async_hooks';

import { KeyedMutexBusyError } from './errors.js';

/*
 * Why hand-written: this is the core "actor turn" of pushpop (one turn at a
 * time per queue id). Existing libraries (e.g. async-mutex) give a single
 * mutex/semaphore, but not the combination needed here: a per-key registry
 * whose entries are deleted as soon as a key is idle (millions of distinct
 * queue ids must not grow memory), a bound on waiters per key that fails fast
 * (429 QUEUE_BUSY), and re-entrancy scoped to the async context of the turn
 * via AsyncLocalStorage. The whole thing is ~150 lines and fully unit-tested.
 */

/** Options for {@link KeyedMutex}. */
export interface KeyedMutexOptions {
  /**
   * Maximum number of callers allowed to WAIT for one key (the current holder
   * and re-entrant calls are not counted). When the bound is reached, further
   * {@link KeyedMutex.run} calls for that key reject immediately with
   * {@link KeyedMutexBusyError}. Must be a non-negative integer or `Infinity`.
   * Default: `Infinity` (unbounded).
   */
  maxWaitersPerKey?: number;
  /**
   * Whether a `run` from inside an active turn of the same key joins that turn (see
   * {@link KeyedMutex.run}). Tracking it takes an AsyncLocalStorage, whose promise hooks cost
   * every promise of the process some CPU; a caller that never re-enters can turn it off, and
   * a re-entrant call then waits like any other (and so waits for its own turn for ever).
   * Default: `true`.
   */
  reentrant?: boolean;
}

/** A caller waiting for its turn; singly linked FIFO node. */
interface Waiter {
  readonly grant: () => void;
  next: Waiter | undefined;
}

/**
 * Per-key state. An entry exists in the map if and only if the key is held;
 * waiters can only exist while the key is held.
 */
interface Entry {
  head: Waiter | undefined;
  tail: Waiter | undefined;
  waiting: number;
}

/**
 * One turn (holding period) of a key. Stored in the AsyncLocalStorage context
 * of the holder's `fn`. `active` becomes false when the turn ends, so async
 * continuations that outlive the turn (timers, un-awaited promises) are not
 * treated as re-entrant.
 */
interface Turn {
  readonly key: string;
  readonly entry: Entry;
  active: boolean;
  /** The holder's fn plus un-settled re-entrant calls; the turn ends at 0. */
  pending: number;
}

/** ALS store: the turns currently active for this async context (tiny array). */
type TurnStack = readonly Turn[];

/**
 * Keyed async mutex registry — the actor turn lock: operations on the same key
 * (queue id) run one at a time in arrival order; different keys run in
 * parallel.
 *
 * Invariants:
 * - **Exclusive per key**: at most one `fn` per key runs at a time (apart from
 *   re-entrant calls, which run inside the holder's turn).
 * - **FIFO**: waiters for a key are granted the turn in the order their
 *   `run` calls were made. Handover is direct (the releasing turn resolves
 *   the next waiter's promise); no timers are involved.
 * - **Parallel across keys**: keys never block each other.
 * - **Release on throw**: the turn is released whether `fn` returns, resolves,
 *   throws synchronously or rejects; the error propagates to the caller.
 * - **Entry deletion**: a key's map entry is deleted as soon as nobody holds
 *   it and nobody waits for it, so {@link KeyedMutex.size} returns to 0 when
 *   idle, whatever the number of distinct keys seen.
 * - **Bound**: if `maxWaitersPerKey` callers are already waiting for a key,
 *   `run` rejects immediately with {@link KeyedMutexBusyError}.
 * - **Re-entrancy**: a `run(key)` issued from the async context of an active
 *   turn for the same key (in `fn` or any of its async continuations) runs
 *   immediately inside that turn and is not counted as a waiter. The turn
 *   lasts until `fn` and all such re-entrant calls have settled. Calls made
 *   after the turn has ended (e.g. a timer firing later) queue normally.
 *   A `run` for a different key from inside a turn queues normally.
 */
export class KeyedMutex {
  private readonly entries = new Map<string, Entry>();
  private readonly turns = new AsyncLocalStorage<TurnStack>();
  private readonly maxWaiters: number;
  private readonly reentrant: boolean;
  private waitingTotal = 0;

  /**
   * @param options - See {@link KeyedMutexOptions}. `maxWaitersPerKey`
   *   defaults to `Infinity`.
   * @throws RangeError if `maxWaitersPerKey` is negative, NaN or not an integer.
   */
  constructor(options: KeyedMutexOptions = {}) {
    const max = options.maxWaitersPerKey ?? Infinity;
    if (!(max === Infinity || (Number.isInteger(max) && max >= 0))) {
      throw new RangeError(`maxWaitersPerKey must be a non-negative integer or Infinity, got ${max}`);
    }
    this.maxWaiters = max;
    this.reentrant = options.reentrant ?? true;
  }

  /**
   * Runs `fn` exclusively for `key` and returns its result.
   *
   * - If `key` is free, `fn` starts synchronously (before `run` returns).
   * - Otherwise the caller waits in FIFO order; when its turn comes `fn` runs.
   * - If called from within an active turn for the same `key` (re-entrant),
   *   `fn` runs immediately as part of that turn; it is not a waiter.
   * - The turn is released when `fn` settles (value, rejection or synchronous
   *   throw); its error is re-thrown to the caller.
   *
   * @param key - The key (queue id) to lock.
   * @param fn - The work to run while holding the key; may be sync or async.
   * @returns A promise of `fn`'s result.
   * @throws {@link KeyedMutexBusyError} (as a rejection, immediately) if
   *   `maxWaitersPerKey` callers are already waiting for `key`.
   */
  run<T>(key: string, fn: () => Promise<T> | T): Promise<T> {
    const reentrant = this.reentrant ? this.activeTurn(key) : undefined;
    if (reentrant !== undefined) {
      return this.reenter(reentrant, fn);
    }

    const entry = this.entries.get(key);
    if (entry === undefined) {
      const fresh: Entry = { head: undefined, tail: undefined, waiting: 0 };
      this.entries.set(key, fresh);
      return this.hold(key, fresh, fn);
    }

    if (entry.waiting >= this.maxWaiters) {
      return Promise.reject(new KeyedMutexBusyError(key, this.maxWaiters));
    }
    return this.waitThenHold(key, entry, fn);
  }

  /**
   * Number of keys currently held (each with zero or more waiters). Returns to
   * 0 once every key is idle.
   */
  get size(): number {
    return this.entries.size;
  }

  /**
   * Number of callers waiting for `key` (the holder and re-entrant calls are
   * not counted). 0 for an idle or unknown key.
   */
  waiting(key: string): number {
    return this.entries.get(key)?.waiting ?? 0;
  }

  /** Number of callers waiting over all keys (holders not counted). */
  get totalWaiting(): number {
    return this.waitingTotal;
  }

  /** Whether `key` currently has a holder (a turn in progress). */
  isHeld(key: string): boolean {
    return this.entries.has(key);
  }

  private async waitThenHold<T>(key: string, entry: Entry, fn: () => Promise<T> | T): Promise<T> {
    await new Promise<void>((grant) => {
      const waiter: Waiter = { grant, next: undefined };
      if (entry.tail === undefined) {
        entry.head = waiter;
      } else {
        entry.tail.next = waiter;
      }
      entry.tail = waiter;
      entry.waiting++;
      this.waitingTotal++;
    });
    // The turn was handed to us by release(): the entry is still in the map.
    return this.hold(key, entry, fn);
  }

  /** Runs `fn` as a new turn of `key`; the caller already owns the entry. */
  private async hold<T>(key: string, entry: Entry, fn: () => Promise<T> | T): Promise<T> {
    const turn: Turn = { key, entry, active: true, pending: 1 };
    try {
      if (!this.reentrant) return await fn();
      // Keep only turns still active, so the stack cannot grow across chains of
      // continuations that outlive their turns.
      const outer = this.turns.getStore() ?? [];
      const stack: TurnStack = [...outer.filter((t) => t.active), turn];
      return await this.turns.run(stack, fn);
    } finally {
      this.leave(turn);
    }
  }

  /** Runs a re-entrant `fn` inside an already active turn. */
  private async reenter<T>(turn: Turn, fn: () => Promise<T> | T): Promise<T> {
    turn.pending++;
    try {
      return await fn();
    } finally {
      this.leave(turn);
    }
  }

  private leave(turn: Turn): void {
    turn.pending--;
    if (turn.pending > 0) {
      return;
    }
    turn.active = false;
    this.release(turn.key, turn.entry);
  }

  /** Hands the key to the next waiter (O(1) dequeue), or deletes the entry. */
  private release(key: string, entry: Entry): void {
    const next = entry.head;
    if (next === undefined) {
      this.entries.delete(key);
      return;
    }
    entry.head = next.next;
    if (entry.head === undefined) {
      entry.tail = undefined;
    }
    entry.waiting--;
    this.waitingTotal--;
    next.grant();
  }

  private activeTurn(key: string): Turn | undefined {
    const stack = this.turns.getStore();
    if (stack === undefined) {
      return undefined;
    }
    for (const turn of stack) {
      if (turn.active && turn.key === key) {
        return turn;
      }
    }
    return undefined;
  }
}
