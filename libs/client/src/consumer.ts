import { EventEmitter } from 'node:events';
import { BASE_CAPABILITIES, type Capabilities } from './capabilities.js';
import { isPushpopError, isRetryDelay, PushpopError } from './errors.js';
import {
  type BackoffOptions,
  decide,
  deadLetteredByQueue,
  DEFAULT_QUEUE_POLICY,
  type FailureRules,
  QueuePolicies,
  type QueuePolicy,
  queuePolicyOf,
} from './failure-policy.js';
import { createLockSource, type Delivery, type HeldLock, type LockSource } from './lock-source.js';
import { PrefetchSource, prefixPops } from './prefetch-source.js';
import { inItemSpan } from './tracing.js';
import type { PushpopClient, Queue } from './client.js';
import type { Item, ReleaseOptions, ReleaseResult } from './types.js';
import type { ConsumerEvents, ConsumerOptions, ConsumerStats, GiveUpReason, Handler, ItemEvent } from './consumer-types.js';

export type { ConsumerEvents, ConsumerOptions, ConsumerStats, GiveUpReason, Handler, ItemEvent, Message } from './consumer-types.js';

const DEFAULTS = { concurrency: 1, ttlSeconds: 30, waitSeconds: 20, closeTimeoutMs: 30_000, idleDelayMs: 1000 };
const DEFAULT_BACKOFF: Required<BackoffOptions> = { type: 'exponential', delaySeconds: 1, maxDelaySeconds: 300 };
const DEFAULT_MAX_ATTEMPTS = 5;

/** Thrown into the failure path of a lock whose handlers ran past `maxProcessingSeconds`. */
export class HandlerTimeoutError extends Error {
  override readonly name = 'HandlerTimeoutError';
}

/** A lock a slot is working on, and the state of its handlers. */
class Work<T> {
  readonly controller = new AbortController();
  lost = false;
  givenUp = false;
  /** The release of a lock given up on, once it started. */
  settling: Promise<void> | undefined;
  /** Resolves when the lock is given up on or lost: the slot stops waiting for its handlers. */
  readonly abandoned: Promise<void>;

  constructor(readonly lock: HeldLock<T>) {
    this.abandoned = new Promise((resolve) => this.controller.signal.addEventListener('abort', () => resolve(), { once: true }));
  }
}

/** The queues under a prefix, consumed through fair pops ({@link PushpopClient.consumePrefix}). */
export interface PrefixTarget {
  client: PushpopClient;
  prefix: string;
}

/** A handler's outcome. */
type Outcome<T> = { delivery: Delivery<T>; error?: unknown; ok: boolean };

/**
 * A long-polling consumer of one queue, or of the queues under a prefix: takes items with
 * `require_ack`, runs their handlers, extends each lock while its handlers run, acknowledges each
 * item on success and gives it back with a delay on failure, dead-lettering it after
 * `maxAttempts`. Made by {@link PushpopClient.consume} and {@link PushpopClient.consumePrefix}.
 *
 * Per-item outcomes: on a shared queue every item has a lock of its own, so one item's failure
 * never sends another back. An exclusive queue hands out one lock at a time: the consumer takes
 * its items one at a time, in order, unless asked for batches (`batchSize`).
 *
 * When it starts it reads the queue's settings once (`GET /queue/{id}/settings`: lock mode,
 * retry delay, dead-letter queue, `max_deliveries`) and the service's {@link Capabilities}.
 *
 * Of a prefix, it takes items by fair pops (`POST /queues/pop?prefix=`, per-item locks, into a
 * prefetch buffer): it serves the shared queues under the prefix (the service passes exclusive
 * ones over), settles each item through its own queue, and reads a queue's settings (its retry
 * delay, dead-letter queue, `max_deliveries`) when one of its items first fails, keeping them.
 */
export class Consumer<T extends object = Item> extends EventEmitter<ConsumerEvents<T>> {
  private readonly options: Required<
    Omit<ConsumerOptions, 'maxProcessingSeconds' | 'extendEverySeconds' | 'batchSize' | 'maxAttempts' | 'backoff' | 'prefetch'>
  > & {
    maxProcessingSeconds?: number;
    prefetch?: number;
    extendEverySeconds: number;
    batchSize?: number;
    maxAttempts?: number;
    backoff: Required<BackoffOptions>;
  };
  /** Aborted by close(): no new pops, and a waiting long poll is cut. */
  private readonly stopping = new AbortController();
  private readonly working = new Set<Work<T>>();
  /** Settlements of finished locks that their slots did not wait for ({@link LockSource.settlesAhead}). */
  private readonly settlements = new Set<Promise<void>>();
  private run: Promise<void> | undefined;
  private source: LockSource<T> | undefined;
  /** The service's `dead_letter` on release, once known. */
  private deadLetterRelease = false;
  /** Each queue's failure settings: the queue's read when it starts; of a prefix, each queue's when first needed. */
  private readonly policies: QueuePolicies;
  private closing: Promise<void> | undefined;
  /** Whether items were handled since the last `drained`. */
  private busy = false;
  /** A look found the queue empty while locks were still being worked on or settled: `drained` comes when the last is settled. */
  private drainedOnSettle = false;
  /** The queue's lock mode, once known (`shared` for a prefix). */
  lockMode: 'exclusive' | 'shared' | undefined;
  readonly stats: ConsumerStats = { completed: 0, retrying: 0, failed: 0, deadLettered: 0, lockLost: 0, released: 0 };
  /** The queue consumed (undefined for a prefix). */
  readonly queue: Queue<T> | undefined;
  /** The prefix whose queues are consumed (undefined for one queue). */
  readonly prefix: string | undefined;
  readonly client: PushpopClient;

  constructor(
    target: Queue<T> | PrefixTarget,
    private readonly handler: Handler<T>,
    options: ConsumerOptions = {},
  ) {
    super();
    if ('prefix' in target) {
      this.prefix = target.prefix;
      this.client = target.client;
    } else {
      this.queue = target;
      this.client = target.client;
    }
    this.policies = new QueuePolicies(async (queueId) => {
      try {
        return queuePolicyOf(await this.client.queue(queueId).settings({ signal: this.stopping.signal }));
      } catch (error) {
        // Deleted meanwhile, or no read scope: the contract's defaults.
        if (isPushpopError(error, 'QUEUE_NOT_FOUND') || isPushpopError(error, 'FORBIDDEN')) return DEFAULT_QUEUE_POLICY;
        throw error;
      }
    });
    const ttlSeconds = options.ttlSeconds ?? DEFAULTS.ttlSeconds;
    this.options = {
      ...DEFAULTS,
      lockMode: 'auto',
      includeHeaders: true,
      ...options,
      ttlSeconds,
      extendEverySeconds: options.extendEverySeconds ?? ttlSeconds / 3,
      backoff: { ...DEFAULT_BACKOFF, ...options.backoff },
    };
    const { concurrency, batchSize, maxAttempts, backoff } = this.options;
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError('concurrency must be a positive integer');
    if (batchSize !== undefined && (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 100))
      throw new RangeError('batchSize must be an integer from 1 to 100');
    if (maxAttempts !== undefined && (!Number.isInteger(maxAttempts) || maxAttempts < 1)) throw new RangeError('maxAttempts must be a positive integer');
    const { prefetch } = this.options;
    if (prefetch !== undefined && (!Number.isInteger(prefetch) || prefetch < 0)) throw new RangeError('prefetch must be an integer from 0');
    if (!isRetryDelay(backoff.delaySeconds) || !isRetryDelay(backoff.maxDelaySeconds)) {
      throw new RangeError('backoff.delaySeconds and backoff.maxDelaySeconds are whole seconds from 0 to 900');
    }
  }

  /** Starts polling (done by {@link PushpopClient.consume}). */
  start(): void {
    this.run ??= (async () => {
      const prepared = await this.prepare();
      if (!prepared) return;
      const { mode, policy, capabilities } = prepared;
      this.lockMode = mode;
      this.deadLetterRelease = capabilities.deadLetterRelease;
      if (this.queue && policy) this.policies.set(this.queue.id, policy);
      if (mode === 'exclusive') this.warnIfExclusiveConcurrency();
      if (mode === 'shared' && this.options.batchSize !== undefined && this.options.batchSize > 1) {
        const what = this.queue ? `queue ${this.queue.id} is shared` : `the queues of prefix ${this.prefix} are consumed as shared ones`;
        this.warn(`batchSize applies to exclusive queues; ${what}, so every item has a lock of its own`);
      }
      const prefetch = mode === 'shared' ? (this.options.prefetch ?? Math.max(64, 2 * this.options.concurrency)) : 0;
      const sourceOptions = {
        depth: mode === 'shared' ? 1 : (this.options.batchSize ?? 1),
        ttlSeconds: this.options.ttlSeconds,
        waitSeconds: this.options.waitSeconds,
        includeHeaders: this.options.includeHeaders,
        idleDelayMs: this.options.idleDelayMs,
        concurrency: this.options.concurrency,
        prefetch,
        extendEverySeconds: this.options.extendEverySeconds,
      };
      const report = (error: unknown) => this.report(error);
      // A prefix's queues are popped fairly with per-item locks, into a buffer (of `concurrency` locks at least).
      const source = this.queue
        ? createLockSource(this.queue, mode, capabilities, sourceOptions, this.stopping.signal, report)
        : new PrefetchSource(prefixPops<T>(this.client, this.prefix!), sourceOptions, this.stopping.signal, report);
      this.source = source;
      const slots = mode === 'shared' ? this.options.concurrency : 1;
      await Promise.all(Array.from({ length: slots }, () => this.slot(source)));
      while (this.settlements.size > 0) await Promise.all([...this.settlements]);
    })();
  }

  /** Items being handled now. */
  get running(): number {
    let n = 0;
    for (const work of this.working) n += work.lock.deliveries.length;
    return n;
  }

  /**
   * Stops taking new items (a waiting long poll is cut at once; what it brings after that is
   * given back), waits up to `timeoutMs` (default `closeTimeoutMs`) for the running handlers
   * (their locks are extended meanwhile and settled as usual), then aborts the handlers still
   * running and gives their items back without delay. Resolves when nothing this consumer holds
   * is locked any more: at once for an idle consumer.
   */
  close(timeoutMs = this.options.closeTimeoutMs): Promise<void> {
    this.closing ??= (async () => {
      this.stopping.abort('shutdown');
      // What was popped ahead of the handlers goes back now, not after they finish.
      const givenBack = this.source?.close();
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
      const outcome = await Promise.race([this.run, timedOut]);
      clearTimeout(timer);
      if (outcome === 'timeout') await Promise.all([...this.working].map((work) => this.giveUp(work, 'shutdown')));
      await this.run;
      await givenBack;
      await this.source?.close();
    })();
    return this.closing;
  }

  /**
   * The queue's lock mode and failure settings, and the service's capabilities; undefined when
   * closed first. A prefix: shared (fair pops with per-item locks), each queue's settings read later.
   */
  private async prepare(): Promise<{ mode: 'exclusive' | 'shared'; policy?: QueuePolicy; capabilities: Capabilities } | undefined> {
    const signal = this.stopping.signal;
    const capabilities = this.client.capabilities().catch(() => ({ ...BASE_CAPABILITIES }));
    const queue = this.queue;
    if (!queue) return { mode: 'shared', capabilities: await capabilities };
    const fallbackMode = this.options.lockMode === 'shared' ? 'shared' : 'exclusive';
    while (!signal.aborted) {
      try {
        const settings = await queue.settings({ signal });
        if (this.options.lockMode !== 'auto' && this.options.lockMode !== settings.lock_mode) {
          this.warn(`lockMode '${this.options.lockMode}' was given, but queue ${queue.id} is ${settings.lock_mode}: the consumer follows the queue`);
        }
        return { mode: settings.lock_mode, policy: queuePolicyOf(settings), capabilities: await capabilities };
      } catch (error) {
        // Not created yet: exclusive by default until someone sets it. No read scope: as told.
        if (isPushpopError(error, 'QUEUE_NOT_FOUND')) return { mode: 'exclusive', policy: DEFAULT_QUEUE_POLICY, capabilities: await capabilities };
        if (isPushpopError(error, 'FORBIDDEN')) return { mode: fallbackMode, policy: DEFAULT_QUEUE_POLICY, capabilities: await capabilities };
        if (signal.aborted) break;
        this.report(error);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, this.options.idleDelayMs);
          signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
        });
      }
    }
    return undefined;
  }

  private warnIfExclusiveConcurrency(): void {
    const { concurrency, batchSize } = this.options;
    if (concurrency <= 1 || batchSize !== undefined) return;
    const id = this.queue!.id;
    this.warn(
      `queue ${id} is exclusive (one lock at a time, FIFO), so this consumer handles its items one at a time, not ${concurrency} at once. ` +
        `For ${concurrency} at once with each item acknowledged on its own, make the queue shared: ` +
        `queue.updateSettings({ lock_mode: 'shared' }) (PUT /queue/${id}/settings {"lock_mode":"shared"}, or pushpop settings set ${id} lock_mode=shared). ` +
        `To take batches under the exclusive lock instead, pass batchSize (a failed item gives its whole batch back).`,
    );
  }

  private warn(message: string): void {
    if (this.listenerCount('warning') === 0) return process.emitWarning(`pushpop consumer: ${message}`, { code: 'PUSHPOP_CONSUMER' });
    this.emitSafely(() => this.emit('warning', message));
  }

  /** Emits where a listener's exception must not stop a slot (it is reported instead). */
  private emitSafely(emit: () => void): void {
    try {
      emit();
    } catch (error) {
      this.report(error);
    }
  }

  /** One slot: takes a lock, handles it, settles it, again; looks without waiting after work, so `drained` comes when the queue runs dry. */
  private async slot(source: LockSource<T>): Promise<void> {
    let wait = false;
    while (!this.stopping.signal.aborted) {
      const taken = await source.take(wait);
      if ('stopped' in taken) return;
      if ('nothing' in taken) {
        if (taken.nothing === 'empty') this.noteEmpty();
        wait = true;
        continue;
      }
      this.busy = true;
      this.drainedOnSettle = false;
      await this.work(source, taken.lock);
      wait = false;
    }
  }

  /**
   * A look found the queue empty: `drained` once nothing is being worked on either. Locks whose
   * settlements are still in flight (they wait for their batch) hold it back until the last of
   * them is settled ({@link settled}), not until a long poll's wait runs out.
   */
  private noteEmpty(): void {
    if (!this.busy) return;
    if (this.working.size > 0) {
      this.drainedOnSettle = true;
      return;
    }
    this.busy = false;
    this.drainedOnSettle = false;
    this.emitSafely(() => this.emit('drained'));
  }

  /** A lock left the work in hand: if the queue was found empty meanwhile and it was the last one, the consumer drained. */
  private settled(work: Work<T>): void {
    this.working.delete(work);
    if (this.drainedOnSettle && this.working.size === 0) this.noteEmpty();
  }

  /** Runs a lock's handlers (extending it meanwhile) and settles it; returns when it is settled, given up on or lost. */
  private async work(source: LockSource<T>, lock: HeldLock<T>): Promise<void> {
    const work = new Work(lock);
    this.working.add(work);
    const extender = setInterval(() => void this.extend(source, work), this.options.extendEverySeconds * 1000);
    const maxTimer =
      this.options.maxProcessingSeconds !== undefined
        ? setTimeout(() => void this.giveUp(work, 'timeout'), this.options.maxProcessingSeconds * 1000)
        : undefined;
    let settling: Promise<void> | undefined;
    try {
      const outcomes = Promise.all(lock.deliveries.map((delivery) => this.handle(work, delivery)));
      // A lock given up on settles without waiting for its handlers (they may ignore their signal).
      const settled = await Promise.race([outcomes, work.abandoned]);
      clearInterval(extender);
      clearTimeout(maxTimer);
      if (settled && !work.givenUp && !work.lost) {
        // Its handlers finished: from here on it is settled, never given up on.
        work.givenUp = true;
        settling = work.settling = this.settle(work, settled).finally(() => this.settled(work));
        if (source.settlesAhead) {
          // The slot takes its next item while the settlement waits for its batch.
          this.settlements.add(settling);
          void settling.finally(() => this.settlements.delete(settling!));
          return;
        }
        await settling;
      } else if (work.settling) await work.settling;
    } finally {
      clearInterval(extender);
      clearTimeout(maxTimer);
      if (!settling) this.settled(work);
    }
  }

  private async handle(work: Work<T>, delivery: Delivery<T>): Promise<Outcome<T>> {
    const { item, deliveryCount, headers } = delivery;
    const { queueId, lockId } = work.lock;
    try {
      await inItemSpan(queueId, headers, deliveryCount, async () =>
        this.handler({ item, deliveryCount, headers, signal: work.controller.signal, queueId, lockId }),
      );
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
  private async settle(work: Work<T>, outcomes: Outcome<T>[]): Promise<void> {
    const failures = outcomes.filter((o) => !o.ok);
    try {
      if (failures.length === 0) {
        await this.source!.acknowledge(work.lock);
        for (const { delivery } of outcomes) {
          this.stats.completed++;
          this.emit('completed', this.itemEvent(work, delivery));
        }
        return;
      }
      await this.giveBack(work, outcomes, failures);
    } catch (error) {
      if (isLockGone(error)) this.lockLost(work, error);
      else this.report(error);
    }
  }

  /** The failure rules of a queue's items (reading its settings, of a prefix, when first needed). */
  private async rules(queueId: string): Promise<FailureRules> {
    let policy: QueuePolicy;
    try {
      policy = await this.policies.get(queueId);
    } catch (error) {
      // Unreadable now: this failure goes by the defaults, and the next one reads again.
      this.report(error);
      policy = DEFAULT_QUEUE_POLICY;
    }
    const maxAttempts = this.options.maxAttempts ?? policy.maxDeliveries ?? DEFAULT_MAX_ATTEMPTS;
    return { maxAttempts, backoff: this.options.backoff, policy, deadLetterRelease: this.deadLetterRelease };
  }

  private async giveBack(work: Work<T>, outcomes: Outcome<T>[], failures: Outcome<T>[]): Promise<void> {
    const rules = await this.rules(work.lock.queueId);
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
      answer = await this.source!.release(work.lock, how);
    } catch (error) {
      // The dead-letter queue was removed since the settings were read: give the items back instead.
      if (!deadLetterAll || !isPushpopError(error, 'NO_DEAD_LETTER_QUEUE')) throw error;
      this.report(error);
      how = delayed;
      answer = await this.source!.release(work.lock, how);
    }
    const serviceDeadLettered = (answer.items_dead_lettered ?? 0) > 0;
    for (const outcome of outcomes) {
      if (outcome.ok) {
        this.stats.released++;
        continue;
      }
      const event = { ...this.itemEvent(work, outcome.delivery), error: outcome.error };
      const deadLettered = how.deadLetter === true || (serviceDeadLettered && deadLetteredByQueue(rules.policy, outcome.delivery.deliveryCount));
      if (deadLettered) {
        this.stats.failed++;
        this.stats.deadLettered++;
        this.emit('failed', { ...event, deadLettered: true });
        this.emit('deadLettered', { ...event, deadLetterQueue: rules.policy.deadLetterQueue });
      } else if (verdicts.get(outcome)!.exhausted) {
        this.stats.failed++;
        this.emit('failed', { ...event, deadLettered: false, delaySeconds });
      } else {
        this.stats.retrying++;
        this.emit('retrying', { ...event, delaySeconds });
      }
    }
  }

  private itemEvent(work: Work<T>, delivery: Delivery<T>): ItemEvent<T> {
    const { lockId, queueId } = work.lock;
    return { item: delivery.item, deliveryCount: delivery.deliveryCount, lockId, queueId, headers: delivery.headers };
  }

  private async extend(source: LockSource<T>, work: Work<T>): Promise<void> {
    if (work.lost || work.givenUp) return;
    try {
      await source.extend(work.lock);
    } catch (error) {
      if (work.lost || work.givenUp) return;
      if (isLockGone(error)) {
        this.lockLost(work, error);
        work.controller.abort('lock-lost' satisfies GiveUpReason);
      } else this.report(error);
    }
  }

  private lockLost(work: Work<T>, error: unknown): void {
    if (work.lost) return;
    work.lost = true;
    this.stats.lockLost += work.lock.deliveries.length;
    this.emit('lockLost', { lockId: work.lock.lockId, queueId: work.lock.queueId, items: work.lock.deliveries.map((d) => d.item), error });
  }

  /**
   * Stops waiting for a lock's handlers and aborts their signals. At shutdown the items go back
   * at once (no delay: nothing failed); past `maxProcessingSeconds` it is a failed attempt of
   * every item of the lock, settled by the failure rules.
   */
  private giveUp(work: Work<T>, reason: 'timeout' | 'shutdown'): Promise<void> {
    if (work.givenUp || work.lost) return work.settling ?? Promise.resolve();
    work.givenUp = true;
    work.controller.abort(reason);
    work.settling = (async () => {
      try {
        if (reason === 'timeout') {
          const error = new HandlerTimeoutError(`handler ran past maxProcessingSeconds (${this.options.maxProcessingSeconds} s)`);
          const outcomes = work.lock.deliveries.map((delivery) => ({ delivery, error, ok: false }));
          await this.giveBack(work, outcomes, outcomes);
        } else {
          await this.source!.release(work.lock, { delaySeconds: 0 });
          this.stats.released += work.lock.deliveries.length;
        }
      } catch (error) {
        if (isLockGone(error)) this.lockLost(work, error);
        else this.report(error);
      }
    })();
    return work.settling;
  }

  private report(error: unknown): void {
    if (this.listenerCount('error') > 0) this.emit('error', error);
    else console.error('pushpop consumer:', error instanceof Error ? error.message : error);
  }
}

/** The lock expired or is gone: its items are (or will be) back on the queue. */
function isLockGone(error: unknown): boolean {
  return error instanceof PushpopError && ['LOCK_EXPIRED', 'LOCK_NOT_FOUND', 'INVALID_LOCK_ID'].includes(error.errorCode);
}
