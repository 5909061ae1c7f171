import { isPushpopError, PushpopError } from './errors.js';
import { decide, deadLetteredByQueue, type FailureRules } from './failure-policy.js';
import type { Delivery, HeldLock, LockSource } from './lock-source.js';
import { inItemSpan } from './tracing.js';
import type { ReleaseOptions, ReleaseResult } from './types.js';
import type { ConsumerEvents, ConsumerStats, GiveUpReason, Handler, ItemEvent } from './consumer-types.js';

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
  readonly extendEverySeconds: number;
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
  private abandon!: () => void;
  /** Resolves when the lock is given up on or lost: the slot stops waiting for its handlers. */
  private readonly abandoned = new Promise<void>((resolve) => (this.abandon = resolve));

  /** `done` is called once, when the lock left the work in hand: settled, given back or lost. */
  constructor(
    readonly lock: HeldLock<T>,
    private readonly context: LockWorkContext<T>,
    private readonly done: () => void,
  ) {}

  /** The signal the handlers get: aborted with the reason when the work gives up on them or the lock is lost. */
  private get signal(): AbortSignal {
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
    this.abandon();
  }

  /**
   * Runs the lock's handlers (extending it meanwhile) and settles it. Resolves when it is settled,
   * given up on or lost; of a source that settles ahead ({@link LockSource.settlesAhead}), as soon
   * as its handlers finished, with the settlement still under way as `settlingAhead`.
   */
  async run(): Promise<{ settlingAhead?: Promise<void> }> {
    const { source, extendEverySeconds, maxProcessingSeconds } = this.context;
    const extender = setInterval(() => void this.extend(), extendEverySeconds * 1000);
    const maxTimer = maxProcessingSeconds !== undefined ? setTimeout(() => void this.giveUp('timeout'), maxProcessingSeconds * 1000) : undefined;
    let settling: Promise<void> | undefined;
    try {
      const outcomes = Promise.all(this.lock.deliveries.map((delivery) => this.handle(delivery)));
      // A lock given up on settles without waiting for its handlers (they may ignore their signal).
      const settled = await Promise.race([outcomes, this.abandoned]);
      clearInterval(extender);
      clearTimeout(maxTimer);
      if (settled && !this.givenUp && !this.lost) {
        // Its handlers finished: from here on it is settled, never given up on.
        this.givenUp = true;
        settling = this.settling = this.settle(settled).finally(() => this.done());
        if (source.settlesAhead) return { settlingAhead: settling };
        await settling;
      } else if (this.settling) await this.settling;
    } finally {
      clearInterval(extender);
      clearTimeout(maxTimer);
      if (!settling) this.done();
    }
    return {};
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

  private async handle(delivery: Delivery<T>): Promise<Outcome<T>> {
    const { item, deliveryCount, headers } = delivery;
    const { queueId, lockId } = this.lock;
    // `signal` is read through a getter, so that a handler that never reads it costs no controller.
    const signal = (): AbortSignal => this.signal;
    const message = {
      item,
      deliveryCount,
      headers,
      queueId,
      lockId,
      get signal(): AbortSignal {
        return signal();
      },
    };
    try {
      await inItemSpan(queueId, headers, deliveryCount, async () => this.context.handler(message));
      return { delivery, ok: true };
    } catch (error) {
      return { delivery, error, ok: false };
    }
  }

  /**
   * Acknowledges a lock whose handlers all succeeded; otherwise gives it back by the failure
   * rules: with the delay of its worst failure, or to the dead-letter queue when every item of
   * it is to be dead-lettered (a lock is released as a whole).
   */
  private async settle(outcomes: Outcome<T>[]): Promise<void> {
    const { source, stats } = this.context;
    const failures = outcomes.filter((o) => !o.ok);
    try {
      if (failures.length === 0) {
        await source.acknowledge(this.lock);
        for (const { delivery } of outcomes) {
          stats.completed++;
          this.context.emit('completed', this.itemEvent(delivery));
        }
        return;
      }
      await this.giveBack(outcomes, failures);
    } catch (error) {
      if (isLockGone(error)) this.lockLost(error);
      else this.context.report(error);
    }
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

  private async extend(): Promise<void> {
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
