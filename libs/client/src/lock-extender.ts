import { performance } from 'node:perf_hooks';

/** What a {@link LockExtender} extends: a lock whose handlers run. */
export interface Extendable {
  extend(): void;
}

/** A timer that fires this much early still counts as due (timers and `performance.now()` round apart). */
const EARLY_MS = 2;

/**
 * Extends each lock whose handlers run every `everyMs` from when its work started, as a
 * `setInterval` per lock did, through one timer for all of a consumer's locks: at thousands of
 * items per second, a timer made and cleared per lock showed in the consumer's profile.
 *
 * All locks have the same period, so the order in which they are due is the order in which they
 * were added (a `Map` keeps it), and a lock extended goes last with its next due time: the timer
 * is always set for the first one. It is cleared when the last lock leaves, so that an idle
 * consumer holds no timer (nor keeps the process alive).
 */
export class LockExtender {
  /** Each lock's next due time (`performance.now()`, a clock that never goes back), in due order. */
  private readonly due = new Map<Extendable, number>();
  private timer: NodeJS.Timeout | undefined;
  /** When the timer fires, if set. */
  private timerAt = 0;

  constructor(private readonly everyMs: number) {}

  /** Extends `work` every `everyMs` from `from` (`performance.now()`, not before the last lock's) until {@link delete}. */
  add(work: Extendable, from = performance.now()): void {
    const at = from + this.everyMs;
    this.due.set(work, at);
    if (this.timer === undefined) this.arm(at);
  }

  delete(work: Extendable): void {
    if (!this.due.delete(work) || this.due.size > 0 || this.timer === undefined) return;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Locks being extended. */
  get size(): number {
    return this.due.size;
  }

  private arm(at: number): void {
    this.timerAt = at;
    this.timer = setTimeout(() => this.fire(), Math.max(0, at - performance.now()));
  }

  private fire(): void {
    this.timer = undefined;
    const now = Math.max(performance.now(), this.timerAt);
    const next = now + this.everyMs;
    const extended: Extendable[] = [];
    for (const [work, at] of this.due) {
      if (at - EARLY_MS > now) break;
      extended.push(work);
    }
    // Each goes last, with its next due time, before its extension runs (which may delete it).
    for (const work of extended) {
      this.due.delete(work);
      this.due.set(work, next);
    }
    for (const work of extended) work.extend();
    if (this.timer === undefined) {
      const first = this.due.values().next();
      if (!first.done) this.arm(first.value);
    }
  }
}
