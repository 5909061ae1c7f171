import { performance } from 'node:perf_hooks';
import { isPushpopError, PushpopError } from './errors.js';
import { decide, deadLetteredByQueue, type FailureRules } from './failure-policy.js';
import type { Delivery, HeldLock, LockSource } from './lock-source.js';
import type { LockExtender } from './lock-extender.js';
import { handleItem } from './tracing.js';
import type { ReleaseOptions, ReleaseResult } from './types.js';
import type { ConsumerEvents, ConsumerStats, GiveUpReason, Handler, ItemEvent, Message } from './consumer-types.js';

/** Thrown into the failure path of a lock whose handlers ran past `maxProcessingSeconds`. */
export class HandlerTimeoutError extends Error {
  override readonly name = 'HandlerTimeoutError';
}

/** The events a lock's work emits: one per item settled, and `lockLost`. */
type LockEvent = 'completed' | 'retrying' | 'failed' | 'deadLettered' | 'lockLost';

/** What the work on a lock needs from its consumer: the same for every lock of that consumer. */
export interface LockWorkContext<T> {
  readonly source: LockSource<T>;
  readonly handler: Handler<T>;
  /** Extends the locks whose handlers run, every `extendEverySeconds` of the consumer. */
  readonly extender: LockExtender;
  readonly maxProcessingSeconds?: number;
  /** The consumer's counts, kept in step with the events (each count goes up before its event). */
  readonly stats: ConsumerStats;
  /** The failure rules of a queue's items. */
  rules(queueId: string): Promise<FailureRules>;
  /** Emits one of the consumer's events; a listener's exception is thrown back (it is reported as a settling error). */
  emit<K extends LockEvent>(event: K, ...args: ConsumerEvents<T>[K]): void;
  /** An error that stops nothing (a failed extend, acknowledge or release). */
  report(error: unknown): void;
}

/** A handler's outcome. */
type Outcome<T> = { delivery: Delivery<T>; error?: unknown; ok: boolean };

/**
 * What a handler gets for one item. `signal` is an own enumerable accessor, as of an object
 * literal with a getter (a copy made by spreading carries it), read through one function shared
 * by all messages: a literal's getter is a closure per item, and an object holding its own
 * accessor closure took about 0.7 µs and 700 bytes to make, most of a busy consumer's garbage.
 * The controller behind it is made only when a handler reads it.
 */
class ItemMessage<T> implements Message<T> {
  static readonly #signal: PropertyDescriptor = {
    get(this: ItemMessage<unknown>): AbortSignal {
      return this.#work.signal;
    },
    enumerable: true,
    configurable: true,
  };
  readonly item: T;
  readonly deliveryCount: number;
  readonly headers: Record<string, string>;
  readonly queueId: string;
  readonly lockId: string;
  declare readonly signal: AbortSignal;
  readonly #work: LockWork<T>;

  constructor(work: LockWork<T>, delivery: Delivery<T>) {
    this.item = delivery.item;
    this.deliveryCount = delivery.deliveryCount;
    this.headers = delivery.headers;
    this.queueId = work.lock.queueId;
    this.lockId = work.lock.lockId;
    this.#work = work;
    Object.defineProperty(this, 'signal', ItemMessage.#signal);
  }
}

/** `[value]` (one function for all, not a closure per call). */
const inArray = <V>(value: V): V[] => [value];

/** A value a handler returned that `await` would wait for. */
function isThenable(value: unknown): value is PromiseLike<unknown> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function';
}

/**
 * The work on one held lock: runs its items' handlers, extends the lock while they run,
 * acknowledges it when they all succeed and gives it back by the failure rules when one fails,
 * gives up on it past `maxProcessingSeconds` or at shutdown, and notes when it is lost.
 *
 * Invariant: a lock is settled once. Whichever comes first of "its handlers finished",
 * {@link giveUp} and "the lock was lost" sets `givenUp` or `lost`, and from then on nothing else
 * acknowledges, releases or extends it.
 */
export class LockWork<T> {
  /**
   * The controller of the handlers' `signal`, made when a handler first reads it: most never do,
   * and an `AbortController` per item was a tenth of a busy consumer's CPU.
   */
  private controller: AbortController | undefined;
  /** Why the work stopped waiting for its handlers (the signal's reason), once it did. */
  private abortReason: GiveUpReason | undefined;
  private lost = false;
  private givenUp = false;
  /** The settlement (acknowledge or release) of the lock, once it started. */
  private settling: Promise<void> | undefined;
  /**
   * While the work waits for handlers that returned promises: stops that wait when the lock is
   * given up on or lost (the handlers may ignore their signal). Made only then: most handlers of
   * a busy consumer are waited for without it.
   */
  private abandon: ((outcomes: undefined) => void) | undefined;

  /** `done` is called once, with this work, when the lock left the work in hand: settled, given back or lost. */
  constructor(
    readonly lock: HeldLock<T>,
    private readonly context: LockWorkContext<T>,
    private readonly done: (work: LockWork<T>) => void,
  ) {}

  /** The signal the handlers get: aborted with the reason when the work gives up on them or the lock is lost. */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.abortReason !== undefined) this.controller.abort(this.abortReason);
    }
    return this.controller.signal;
  }

  /** Stops waiting for the handlers and aborts their signal (the first reason stays). */
  private abort(reason: GiveUpReason): void {
    if (this.abortReason !== undefined) return;
    this.abortReason = reason;
    this.controller?.abort(reason);
    this.abandon?.(undefined);
  }

  /**
   * Runs the lock's handlers (extending it meanwhile) and settles it. Resolves when it is settled,
   * given up on or lost; of a source that settles ahead ({@link LockSource.settlesAhead}), as soon
   * as its handlers finished, while the settlement goes on (`done` is called when it ends).
   */
  async run(): Promise<void> {
    let settling: Promise<void> | undefined;
    try {
      const startedAt = performance.now();
      const handled = this.handleAll();
      // Handlers that returned at once need no extension: no timer fires while they run.
      const settled = Array.isArray(handled) ? handled : await this.whileRunning(handled, startedAt);
      if (settled && !this.givenUp && !this.lost) {
        // Its handlers finished: from here on it is settled, never given up on.
        this.givenUp = true;
        settling = this.settling = this.settleThenDone(settled);
        if (this.context.source.settlesAhead) return;
        await settling;
      } else if (this.settling) await this.settling;
    } finally {
      if (!settling) this.done(this);
    }
  }

  /**
   * While handlers that returned promises run (since `startedAt`): extends the lock, gives up on
   * it past `maxProcessingSeconds`. Their outcomes, or undefined as soon as the lock is given up
   * on or lost (a lock given up on settles without waiting for its handlers, which may ignore
   * their signal).
   */
  private whileRunning(outcomes: Promise<Outcome<T>[]>, startedAt: number): Promise<Outcome<T>[] | undefined> {
    const { extender, maxProcessingSeconds } = this.context;
    if (this.abortReason !== undefined) return Promise.resolve(undefined);
    extender.add(this, startedAt);
    const maxTimer =
      maxProcessingSeconds !== undefined
        ? setTimeout(() => void this.giveUp('timeout'), Math.max(0, startedAt + maxProcessingSeconds * 1000 - performance.now()))
        : undefined;
    return new Promise((resolve) => {
      // Whichever comes first: the outcomes, or the give-up (undefined).
      const stop = (settled: Outcome<T>[] | undefined): void => {
        extender.delete(this);
        clearTimeout(maxTimer);
        resolve(settled);
      };
      this.abandon = stop;
      void outcomes.then(stop);
    });
  }

  /** Extends the lock now (its {@link LockExtender} calls this). */
  extend(): void {
    void this.extendNow();
  }

  /**
   * Stops waiting for the lock's handlers and aborts their signals. At shutdown the items go back
   * at once (no delay: nothing failed); past `maxProcessingSeconds` it is a failed attempt of
   * every item of the lock, settled by the failure rules.
   */
  giveUp(reason: 'timeout' | 'shutdown'): Promise<void> {
    if (this.givenUp || this.lost) return this.settling ?? Promise.resolve();
    this.givenUp = true;
    this.abort(reason);
    this.settling = (async () => {
      try {
        if (reason === 'timeout') {
          const error = new HandlerTimeoutError(`handler ran past maxProcessingSeconds (${this.context.maxProcessingSeconds} s)`);
          const outcomes = this.lock.deliveries.map((delivery) => ({ delivery, error, ok: false }));
          await this.giveBack(outcomes, outcomes);
        } else {
          await this.context.source.release(this.lock, { delaySeconds: 0 });
          this.context.stats.released += this.lock.deliveries.length;
        }
      } catch (error) {
        if (isLockGone(error)) this.lockLost(error);
        else this.context.report(error);
      }
    })();
    return this.settling;
  }

  /**
   * Calls the lock's handlers: their outcomes at once when every handler returned a value or
   * threw, else a promise of them once every promise returned settled.
   */
  private handleAll(): Outcome<T>[] | Promise<Outcome<T>[]> {
    const { deliveries } = this.lock;
    if (deliveries.length === 1) {
      const outcome = this.handle(deliveries[0]);
      return outcome instanceof Promise ? outcome.then(inArray) : [outcome];
    }
    const outcomes = deliveries.map((delivery) => this.handle(delivery));
    if (!outcomes.some((o) => o instanceof Promise)) return outcomes as Outcome<T>[];
    return Promise.all(outcomes.map((o) => (o instanceof Promise ? o : Promise.resolve(o))));
  }

  /** One item's handler: its outcome, at once when it returned a value or threw, else a promise of it. */
  private handle(delivery: Delivery<T>): Outcome<T> | Promise<Outcome<T>> {
    const { deliveryCount, headers } = delivery;
    const { queueId } = this.lock;
    const message = new ItemMessage(this, delivery);
    let returned: unknown;
    try {
      returned = handleItem(queueId, headers, deliveryCount, this.context.handler, message);
      // What `await` would do with it: wait for a thenable (reading its `then` may throw too).
      if (!isThenable(returned)) return { delivery, ok: true };
    } catch (error) {
      return { delivery, error, ok: false };
    }
    return Promise.resolve(returned).then(
      () => ({ delivery, ok: true }),
      (error: unknown) => ({ delivery, error, ok: false }),
    );
  }

  /**
   * Acknowledges a lock whose handlers all succeeded; otherwise gives it back by the failure
   * rules: with the delay of its worst failure, or to the dead-letter queue when every item of
   * it is to be dead-lettered (a lock is released as a whole). Then calls `done`.
   *
   * The acknowledgement, every item's own path, is chained by hand rather than awaited in an
   * async function, whose suspended frame was the largest allocation left per item.
   */
  private settleThenDone(outcomes: Outcome<T>[]): Promise<void> {
    for (const outcome of outcomes) if (!outcome.ok) return this.giveBackThenDone(outcomes);
    let acknowledged: Promise<unknown>;
    try {
      acknowledged = this.context.source.acknowledge(this.lock);
    } catch (error) {
      this.settleFailed(error);
      return Promise.resolve();
    }
    return acknowledged.then(
      () => this.completed(outcomes),
      (error: unknown) => this.settleFailed(error),
    );
  }

  /** The lock was acknowledged: `completed` per item, then `done`. */
  private completed(outcomes: Outcome<T>[]): void {
    const { stats } = this.context;
    try {
      for (const { delivery } of outcomes) {
        stats.completed++;
        this.context.emit('completed', this.itemEvent(delivery));
      }
    } catch (error) {
      this.settleFailed(error);
      return;
    }
    this.done(this);
  }

  /** Settling failed (or a listener of its events threw): the lock is lost, or the error reported; then `done`. */
  private settleFailed(error: unknown): void {
    try {
      if (isLockGone(error)) this.lockLost(error);
      else this.context.report(error);
    } finally {
      this.done(this);
    }
  }

  /** Gives the lock back by the failure rules, then `done` (a failure goes the way of a failed acknowledgement). */
  private giveBackThenDone(outcomes: Outcome<T>[]): Promise<void> {
    return this.giveBack(
      outcomes,
      outcomes.filter((o) => !o.ok),
    ).then(
      () => this.done(this),
      (error: unknown) => this.settleFailed(error),
    );
  }

  private async giveBack(outcomes: Outcome<T>[], failures: Outcome<T>[]): Promise<void> {
    const { source, stats } = this.context;
    const rules = await this.context.rules(this.lock.queueId);
    const verdicts = new Map(failures.map((f) => [f, decide(rules, f.delivery.deliveryCount, f.error)]));
    const all = [...verdicts.values()];
    // A lock is given back as a whole: to the dead letters only when every item of it goes there,
    // otherwise after its longest delay.
    const deadLetterAll = failures.length === outcomes.length && all.every((v) => v.deadLetter);
    const delaySeconds = Math.max(...all.map((v) => v.delaySeconds));
    const delayed: ReleaseOptions = all.every((v) => v.byQueue) ? {} : { delaySeconds };
    let how: ReleaseOptions = deadLetterAll ? { deadLetter: true } : delayed;
    let answer: ReleaseResult;
    try {
      answer = await source.release(this.lock, how);
    } catch (error) {
      // The dead-letter queue was removed since the settings were read: give the items back instead.
      if (!deadLetterAll || !isPushpopError(error, 'NO_DEAD_LETTER_QUEUE')) throw error;
      this.context.report(error);
      how = delayed;
      answer = await source.release(this.lock, how);
    }
    const serviceDeadLettered = (answer.items_dead_lettered ?? 0) > 0;
    for (const outcome of outcomes) {
      if (outcome.ok) {
        stats.released++;
        continue;
      }
      const event = { ...this.itemEvent(outcome.delivery), error: outcome.error };
      const deadLettered = how.deadLetter === true || (serviceDeadLettered && deadLetteredByQueue(rules.policy, outcome.delivery.deliveryCount));
      if (deadLettered) {
        stats.failed++;
        stats.deadLettered++;
        this.context.emit('failed', { ...event, deadLettered: true });
        this.context.emit('deadLettered', { ...event, deadLetterQueue: rules.policy.deadLetterQueue });
      } else if (verdicts.get(outcome)!.exhausted) {
        stats.failed++;
        this.context.emit('failed', { ...event, deadLettered: false, delaySeconds });
      } else {
        stats.retrying++;
        this.context.emit('retrying', { ...event, delaySeconds });
      }
    }
  }

  private itemEvent(delivery: Delivery<T>): ItemEvent<T> {
    const { lockId, queueId } = this.lock;
    return { item: delivery.item, deliveryCount: delivery.deliveryCount, lockId, queueId, headers: delivery.headers };
  }

  private async extendNow(): Promise<void> {
    if (this.lost || this.givenUp) return;
    try {
      await this.context.source.extend(this.lock);
    } catch (error) {
      if (this.lost || this.givenUp) return;
      if (isLockGone(error)) {
        this.lockLost(error);
        this.abort('lock-lost');
      } else this.context.report(error);
    }
  }

  private lockLost(error: unknown): void {
    if (this.lost) return;
    this.lost = true;
    this.context.stats.lockLost += this.lock.deliveries.length;
    this.context.emit('lockLost', { lockId: this.lock.lockId, queueId: this.lock.queueId, items: this.lock.deliveries.map((d) => d.item), error });
  }
}

/** The lock expired or is gone: its items are (or will be) back on the queue. */
function isLockGone(error: unknown): boolean {
  return error instanceof PushpopError && ['LOCK_EXPIRED', 'LOCK_NOT_FOUND', 'INVALID_LOCK_ID'].includes(error.errorCode);
}
