import { EventEmitter } from 'node:events';
import { isPushpopError, PushpopError } from './errors.js';
import { inItemSpan } from './tracing.js';
import type { Queue } from './client.js';
import type { Item, PopResult } from './types.js';

/** What a handler gets for one item. */
export interface Message<T> {
  item: T;
  /** How many times the item has been handed out with a lock, this time included (1 the first time). */
  deliveryCount: number;
  /** The item's headers (`{}` when it has none). */
  headers: Record<string, string>;
  /** Fires when the consumer gives up on this handler: its lock was lost, `maxProcessingSeconds` passed, or `close()` timed out. */
  signal: AbortSignal;
  queueId: string;
  lockId: string;
}

/** Resolves (or returns) when the item is done: it is acknowledged. Throws to give it back (a {@link RetryLater} to choose the delay). */
export type Handler<T> = (message: Message<T>) => unknown;

export interface ConsumerOptions {
  /** Handlers running at once (default 1). */
  concurrency?: number;
  /** The lock's time to live, 1–300 (default 30). */
  ttlSeconds?: number;
  /** Extend each lock this often while its handlers run (default a third of `ttlSeconds`). */
  extendEverySeconds?: number;
  /** Long-poll wait per pop, 0–20 (default 20). */
  waitSeconds?: number;
  /** Give up on a lock whose handlers run longer than this (default: never): their signals abort, the lock is released. */
  maxProcessingSeconds?: number;
  /** How long `close()` waits for running handlers before it releases their items (default 30000). */
  closeTimeoutMs?: number;
  /**
   * The queue's lock mode. `auto` (default) reads the queue's settings (exclusive when it has
   * none yet or the key may not read them).
   */
  lockMode?: 'auto' | 'exclusive' | 'shared';
  /**
   * Ask for item headers (`include_headers`, default true; a service older than the third version
   * of the contract refuses it, and the consumer then pops without). A handler runs in a span
   * whose parent is its item's `traceparent` header.
   */
  includeHeaders?: boolean;
  /** Pause after a failed pop or an answer of "nothing now" (paused, limited, locked) before polling again (default 1000). */
  idleDelayMs?: number;
}

/** Why a consumer gave up on a handler, as its signal's `reason`. */
export type GiveUpReason = 'lock-lost' | 'timeout' | 'shutdown';

export interface ConsumerEvents<T> {
  /** A pop, acknowledge, extend or release failed (after the client's retries). */
  error: [error: unknown];
  /** A lock expired or disappeared while its handlers ran: their items will be delivered again. */
  lockLost: [info: { lockId: string; items: T[]; error: unknown }];
  /** A handler threw; its lock is released once the lock's other handlers are done. */
  failed: [info: { item: T; deliveryCount: number; error: unknown }];
  /** A lock's items were all handled and acknowledged. */
  completed: [info: { lockId: string; items: T[] }];
}

const DEFAULTS = { concurrency: 1, ttlSeconds: 30, waitSeconds: 20, closeTimeoutMs: 30_000, idleDelayMs: 1000 };

/** One lock and the handlers of its items. */
class Batch<T> {
  readonly controller = new AbortController();
  readonly running: Promise<void>[] = [];
  failures: unknown[] = [];
  delaySeconds: number | undefined;
  lost = false;
  givenUp = false;
  /** Settles when every handler of the batch has settled or the batch was given up. */
  done!: Promise<void>;

  constructor(
    readonly lockId: string,
    readonly items: T[],
  ) {}
}

/**
 * A long-polling consumer of one queue: pops with `require_ack`, runs up to `concurrency`
 * handlers at once, extends each lock while its handlers run, acknowledges on success and
 * releases on failure. Made by {@link PushpopClient.consume}.
 *
 * A lock is acknowledged or released as a whole (the service's rule):
 * - exclusive queues (one lock per queue): one pop of up to `concurrency` items at a time; the
 *   next pop waits until all handlers of that lock are done. The lock is acknowledged when
 *   every handler succeeded, otherwise released — so the items whose handlers succeeded are
 *   delivered again with the failed ones (handlers must be idempotent, as with any
 *   at-least-once queue).
 * - shared queues: `concurrency` pollers, each popping one item under a lock of its own, so
 *   each item is acknowledged or released on its own.
 */
export class Consumer<T extends Item = Item> extends EventEmitter<ConsumerEvents<T>> {
  private readonly options: Required<Omit<ConsumerOptions, 'maxProcessingSeconds' | 'extendEverySeconds'>> & {
    maxProcessingSeconds?: number;
    extendEverySeconds: number;
  };
  /** Aborted by close(): no new pops. */
  private readonly stopping = new AbortController();
  /** Aborted when close() times out: a long poll still in flight is cut. */
  private readonly cutting = new AbortController();
  private readonly batches = new Set<Batch<T>>();
  private loops: Promise<void>[] = [];
  private closing: Promise<void> | undefined;
  private started = false;
  /** Items handled and acknowledged, items whose handler threw. */
  readonly stats = { acknowledged: 0, failed: 0, released: 0, lockLost: 0 };

  constructor(
    readonly queue: Queue<T>,
    private readonly handler: Handler<T>,
    options: ConsumerOptions = {},
  ) {
    super();
    const ttlSeconds = options.ttlSeconds ?? DEFAULTS.ttlSeconds;
    this.options = {
      ...DEFAULTS,
      lockMode: 'auto',
      includeHeaders: true,
      ...options,
      ttlSeconds,
      extendEverySeconds: options.extendEverySeconds ?? ttlSeconds / 3,
    };
    if (!(this.options.concurrency >= 1)) throw new RangeError('concurrency must be at least 1');
  }

  /** Starts polling (done by {@link PushpopClient.consume}). */
  start(): void {
    if (this.started) return;
    this.started = true;
    const run = async () => {
      const shared = await this.isShared();
      if (this.stopping.signal.aborted) return;
      const pollers = shared ? this.options.concurrency : 1;
      const depth = shared ? 1 : this.options.concurrency;
      this.loops = Array.from({ length: pollers }, () => this.poll(depth));
      await Promise.all(this.loops);
    };
    this.loops = [run()];
  }

  /** Items being handled now. */
  get running(): number {
    let n = 0;
    for (const batch of this.batches) n += batch.items.length;
    return n;
  }

  /**
   * Stops taking new items, waits up to `timeoutMs` (default `closeTimeoutMs`) for the running
   * handlers (their locks are extended meanwhile and acknowledged or released as usual), then
   * aborts the handlers still running and releases their items. Resolves when nothing this
   * consumer holds is locked any more.
   */
  close(timeoutMs = this.options.closeTimeoutMs): Promise<void> {
    this.closing ??= (async () => {
      this.stopping.abort('shutdown');
      const all = () => Promise.all([...this.loops, ...[...this.batches].map((b) => b.done)]);
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
      const outcome = await Promise.race([all(), timedOut]);
      clearTimeout(timer);
      if (outcome === 'timeout') {
        this.cutting.abort('shutdown');
        await Promise.all([...this.batches].map((batch) => this.giveUp(batch, 'shutdown')));
        await all();
      }
    })();
    return this.closing;
  }

  private async isShared(): Promise<boolean> {
    if (this.options.lockMode !== 'auto') return this.options.lockMode === 'shared';
    try {
      const settings = await this.queue.settings({ signal: this.stopping.signal });
      return settings.lock_mode === 'shared';
    } catch (error) {
      if (!isPushpopError(error, 'QUEUE_NOT_FOUND', 'FORBIDDEN', 'ABORTED')) this.report(error);
      return false;
    }
  }

  private async poll(depth: number): Promise<void> {
    const signal = this.stopping.signal;
    while (!signal.aborted) {
      let result: PopResult<T>;
      try {
        result = await this.queue.pop({
          depth,
          requireAck: true,
          ttlSeconds: this.options.ttlSeconds,
          waitSeconds: this.options.waitSeconds,
          includeHeaders: this.options.includeHeaders,
          // Not cut by close() at once: a long poll cut while the service answers it would leave
          // its lock to expire, so close() waits for it (up to waitSeconds) within its timeout.
          signal: this.cutting.signal,
        });
      } catch (error) {
        if (signal.aborted) return;
        if (this.options.includeHeaders && isPushpopError(error, 'VALIDATION_FAILED') && /include_headers/.test(error.message)) {
          // A service that knows no item headers: pop without them.
          this.options.includeHeaders = false;
          continue;
        }
        if (isPushpopError(error, 'QUEUE_LOCKED')) {
          // Another consumer holds the exclusive lock: come back when it expires, or sooner.
          const expiresAt = Number(error.body?.lock_expires_at);
          const untilExpiry = Number.isFinite(expiresAt) ? expiresAt * 1000 - Date.now() : this.options.idleDelayMs;
          await this.idle(Math.max(50, Math.min(untilExpiry, this.options.idleDelayMs)));
        } else {
          this.report(error);
          await this.idle(this.options.idleDelayMs);
        }
        continue;
      }
      if (signal.aborted) {
        // Closing: items that came in meanwhile go straight back.
        if (result.lock_id) await this.queue.release(result.lock_id).catch((error: unknown) => this.report(error));
        return;
      }
      if (!result.lock_id || result.items.length === 0) {
        // Empty, paused or limited: "nothing now". A long poll already waited; a short answer must not spin.
        if (result.paused || result.limited || this.options.waitSeconds === 0) await this.idle(this.options.idleDelayMs);
        continue;
      }
      const batch = this.run(result);
      // Exclusive: the next pop would only be answered 423 while this lock lives. Shared: one lock per poller.
      await batch.done;
    }
  }

  private idle(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const signal = this.stopping.signal;
      if (signal.aborted) return resolve();
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done, { once: true });
    });
  }

  private run(result: PopResult<T>): Batch<T> {
    const lockId = result.lock_id!;
    const batch = new Batch<T>(lockId, result.items);
    this.batches.add(batch);
    const extender = setInterval(() => void this.extend(batch), this.options.extendEverySeconds * 1000);
    const maxTimer =
      this.options.maxProcessingSeconds !== undefined
        ? setTimeout(() => void this.giveUp(batch, 'timeout'), this.options.maxProcessingSeconds * 1000)
        : undefined;
    const handlers = result.items.map((item, i) => this.handle(batch, item, i, result));
    batch.done = (async () => {
      // A batch given up on settles without waiting for its handlers (they may ignore their signal).
      await Promise.race([Promise.all(handlers), new Promise<void>((resolve) => batch.controller.signal.addEventListener('abort', () => resolve()))]);
      clearInterval(extender);
      clearTimeout(maxTimer);
      if (!batch.givenUp && !batch.lost) await this.finish(batch);
      this.batches.delete(batch);
    })();
    return batch;
  }

  private async handle(batch: Batch<T>, item: T, index: number, result: PopResult<T>): Promise<void> {
    const deliveryCount = result.delivery_counts?.[index] ?? 1;
    const headers = result.headers?.[index] ?? {};
    try {
      await inItemSpan(this.queue.id, headers, deliveryCount, async () =>
        this.handler({ item, deliveryCount, headers, signal: batch.controller.signal, queueId: this.queue.id, lockId: batch.lockId }),
      );
    } catch (error) {
      batch.failures.push(error);
      const delay = (error as { delaySeconds?: unknown } | null)?.delaySeconds;
      if (typeof delay === 'number') batch.delaySeconds = Math.max(batch.delaySeconds ?? 0, delay);
      this.stats.failed++;
      if (!batch.givenUp) this.emit('failed', { item, deliveryCount, error });
    }
  }

  /** Acknowledges a batch whose handlers all succeeded, releases one with a failure. */
  private async finish(batch: Batch<T>): Promise<void> {
    try {
      if (batch.failures.length === 0) {
        await this.queue.acknowledge(batch.lockId);
        this.stats.acknowledged += batch.items.length;
        this.emit('completed', { lockId: batch.lockId, items: batch.items });
      } else {
        await this.releaseWithDelay(batch);
        this.stats.released += batch.items.length;
      }
    } catch (error) {
      if (isLockGone(error)) this.lockLost(batch, error);
      else this.report(error);
    }
  }

  /**
   * Releases a failed batch with the delay its handlers chose. A service older than the third
   * version of the contract refuses `delay_seconds` (400): the items are then released without
   * it rather than left locked until the lock expires.
   */
  private async releaseWithDelay(batch: Batch<T>): Promise<void> {
    if (batch.delaySeconds === undefined) {
      await this.queue.release(batch.lockId);
      return;
    }
    try {
      await this.queue.release(batch.lockId, { delaySeconds: batch.delaySeconds });
    } catch (error) {
      if (!isPushpopError(error, 'VALIDATION_FAILED')) throw error;
      this.report(error);
      await this.queue.release(batch.lockId);
    }
  }

  private async extend(batch: Batch<T>): Promise<void> {
    if (batch.lost || batch.givenUp) return;
    try {
      await this.queue.extendLock(batch.lockId, this.options.ttlSeconds);
    } catch (error) {
      if (batch.lost || batch.givenUp) return;
      if (isLockGone(error)) {
        this.lockLost(batch, error);
        batch.controller.abort('lock-lost' satisfies GiveUpReason);
      } else this.report(error);
    }
  }

  private lockLost(batch: Batch<T>, error: unknown): void {
    if (batch.lost) return;
    batch.lost = true;
    this.stats.lockLost += batch.items.length;
    this.emit('lockLost', { lockId: batch.lockId, items: batch.items, error });
  }

  /** Stops waiting for a batch's handlers: aborts their signal and releases the lock. */
  private async giveUp(batch: Batch<T>, reason: GiveUpReason): Promise<void> {
    if (batch.givenUp || batch.lost) return;
    batch.givenUp = true;
    batch.controller.abort(reason);
    try {
      await this.queue.release(batch.lockId);
      this.stats.released += batch.items.length;
    } catch (error) {
      if (isLockGone(error)) this.lockLost(batch, error);
      else this.report(error);
    }
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
