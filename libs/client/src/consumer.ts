import { EventEmitter } from 'node:events';
import { BASE_CAPABILITIES, type Capabilities } from './capabilities.js';
import { isPushpopError, isRetryDelay } from './errors.js';
import { type BackoffOptions, DEFAULT_QUEUE_POLICY, type FailureRules, QueuePolicies, type QueuePolicy, queuePolicyOf } from './failure-policy.js';
import { createLockSource, type LockSource } from './lock-source.js';
import { LockExtender } from './lock-extender.js';
import { LockWork, type LockWorkContext } from './lock-work.js';
import { PrefetchSource, prefixPops } from './prefetch-source.js';
import type { PushpopClient, Queue } from './client.js';
import type { Item } from './types.js';
import type { ConsumerEvents, ConsumerOptions, ConsumerStats, Handler } from './consumer-types.js';

export type { ConsumerEvents, ConsumerOptions, ConsumerStats, GiveUpReason, Handler, ItemEvent, Message } from './consumer-types.js';
export { HandlerTimeoutError } from './lock-work.js';

const DEFAULTS = { concurrency: 1, ttlSeconds: 30, waitSeconds: 20, closeTimeoutMs: 30_000, idleDelayMs: 1000 };
const DEFAULT_BACKOFF: Required<BackoffOptions> = { type: 'exponential', delaySeconds: 1, maxDelaySeconds: 300 };
const DEFAULT_MAX_ATTEMPTS = 5;

/** The queues under a prefix, consumed through fair pops ({@link PushpopClient.consumePrefix}). */
export interface PrefixTarget {
  client: PushpopClient;
  prefix: string;
}

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
  /** Locks being worked on or settled: a slot goes on to its next lock while a settlement waits for its batch ({@link LockSource.settlesAhead}). */
  private readonly working = new Set<LockWork<T>>();
  /** Called when the last lock of {@link working} is settled, while the consumer's run waits for that. */
  private allSettled: (() => void) | undefined;
  /** Takes a settled lock out of the work in hand (each lock's `done`). */
  private readonly onSettled = (work: LockWork<T>): void => this.settled(work);
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
      // No prefetch given: adaptive, up to four times the concurrency (at least 128), by the handlers' pace.
      const prefetch = mode === 'shared' ? (this.options.prefetch ?? Math.max(128, 4 * this.options.concurrency)) : 0;
      const sourceOptions = {
        depth: mode === 'shared' ? 1 : (this.options.batchSize ?? 1),
        ttlSeconds: this.options.ttlSeconds,
        waitSeconds: this.options.waitSeconds,
        includeHeaders: this.options.includeHeaders,
        idleDelayMs: this.options.idleDelayMs,
        concurrency: this.options.concurrency,
        prefetch,
        adaptive: this.options.prefetch === undefined,
        extendEverySeconds: this.options.extendEverySeconds,
      };
      const report = (error: unknown) => this.report(error);
      // A prefix's queues are popped fairly with per-item locks, into a buffer (of `concurrency` locks at least).
      const source = this.queue
        ? createLockSource(this.queue, mode, capabilities, sourceOptions, this.stopping.signal, report)
        : new PrefetchSource(prefixPops<T>(this.client, this.prefix!), sourceOptions, this.stopping.signal, report);
      this.source = source;
      const { extendEverySeconds, maxProcessingSeconds } = this.options;
      const context: LockWorkContext<T> = {
        source,
        handler: this.handler,
        extender: new LockExtender(extendEverySeconds * 1000),
        maxProcessingSeconds,
        stats: this.stats,
        rules: (queueId) => this.rules(queueId),
        emit: this.emit.bind(this),
        report,
      };
      const slots = mode === 'shared' ? this.options.concurrency : 1;
      await Promise.all(Array.from({ length: slots }, () => this.slot(context)));
      // What is left is settling ahead of its slot, which has stopped.
      if (this.working.size > 0) await new Promise<void>((resolve) => (this.allSettled = resolve));
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
      if (outcome === 'timeout') await Promise.all([...this.working].map((work) => work.giveUp('shutdown')));
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
  private async slot(context: LockWorkContext<T>): Promise<void> {
    const { source } = context;
    let wait = false;
    while (!this.stopping.signal.aborted) {
      // A lock the source holds ready is taken without a promise.
      let lock = source.takeReady?.();
      if (!lock) {
        const taken = await source.take(wait);
        if ('stopped' in taken) return;
        if ('nothing' in taken) {
          if (taken.nothing === 'empty') this.noteEmpty();
          wait = true;
          continue;
        }
        lock = taken.lock;
      }
      this.busy = true;
      this.drainedOnSettle = false;
      // Runs the lock's handlers (extending it meanwhile) and settles it; returns when it is settled,
      // given up on or lost, or, of a source that settles ahead, once its settlement is under way.
      const work: LockWork<T> = new LockWork(lock, context, this.onSettled);
      this.working.add(work);
      await work.run();
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
  private settled(work: LockWork<T>): void {
    this.working.delete(work);
    if (this.working.size > 0) return;
    if (this.drainedOnSettle) this.noteEmpty();
    this.allSettled?.();
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

  private report(error: unknown): void {
    if (this.listenerCount('error') > 0) this.emit('error', error);
    else console.error('pushpop consumer:', error instanceof Error ? error.message : error);
  }
}
