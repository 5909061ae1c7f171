import type { Capabilities } from './capabilities.js';
import type { Queue } from './client.js';
import { isPushpopError } from './errors.js';
import { PrefetchSource, queuePops } from './prefetch-source.js';
import type { PopResult, ReleaseOptions, ReleaseResult } from './types.js';

/** One item handed to a consumer. */
export interface Delivery<T> {
  item: T;
  /** How many times the item has been handed out with a lock, this time included. */
  deliveryCount: number;
  headers: Record<string, string>;
}

/** A lock a consumer holds: one item (shared queues), or a batch (an exclusive queue's lock). */
export interface HeldLock<T> {
  lockId: string;
  /** The queue the lock is of (for a consumer of a prefix, the queue its fair pop served). */
  queueId: string;
  deliveries: Delivery<T>[];
}

/** What a slot gets when it asks for work. */
export type Take<T> = { lock: HeldLock<T> } | { nothing: 'empty' | 'busy' } | { stopped: true };

/**
 * The seam between a Consumer's slots (which run handlers and decide each item's outcome) and
 * the service's lock API: where locks come from, and how they are settled.
 *
 * Today's API ({@link PollingSource}): every slot long-polls for a lock of its own, of `depth`
 * items: depth 1 on a shared queue, so every item has a lock of its own; `batchSize` on an
 * exclusive queue (one lock at a time).
 *
 * With the contract's fourth additions ({@link Capabilities}), a second implementation drops in
 * here, chosen by {@link createLockSource}, without a change to the Consumer: on a shared queue
 * one pop of depth N with `lock_per_item` (N locks of one item each) fills a bounded prefetch
 * buffer that the slots take from (`take`); the buffered locks are extended while they wait and
 * given back by `close`; `acknowledge` gathers the slots' acknowledgements into
 * `acknowledge/batch` requests (never one for an item whose handler has not finished: a slot
 * calls it only then), and an exclusive queue's slot acknowledges with `next` to pop its next
 * item in the same request.
 */
export interface LockSource<T> {
  /**
   * The next lock for a slot. `wait`: long-poll when the queue is empty (otherwise answer
   * `empty` at once, so the consumer learns it drained). `busy`: nothing now for another reason
   * (paused, limited, locked by another consumer, a failed pop), after a pause.
   */
  take(wait: boolean): Promise<Take<T>>;
  /**
   * A lock the source holds ready for a slot, taken at once (what `take` would give first), or
   * undefined: then the slot asks `take`. Of a source that buffers locks, this spares a promise per lock.
   */
  takeReady?(): HeldLock<T> | undefined;
  /** Settling waits for company (a batch request): a slot goes on to its next lock meanwhile. */
  readonly settlesAhead?: boolean;
  /** Acknowledges the lock; resolves (with no meaning to the value) once it is acknowledged. */
  acknowledge(lock: HeldLock<T>): Promise<unknown>;
  release(lock: HeldLock<T>, how: ReleaseOptions): Promise<ReleaseResult>;
  /** Extends a lock a slot holds to the consumer's TTL from now. */
  extend(lock: HeldLock<T>): Promise<void>;
  /** Gives back what the source holds that no slot has taken (nothing, for the polling source). */
  close(): Promise<void>;
}

export interface SourceOptions {
  depth: number;
  ttlSeconds: number;
  waitSeconds: number;
  includeHeaders: boolean;
  idleDelayMs: number;
}

/** What a source that prefetches needs besides (see {@link PrefetchSource}). */
export interface PrefetchOptions extends SourceOptions {
  concurrency: number;
  /** The most locks buffered beyond those the slots work on (0: no prefetch). */
  prefetch: number;
  /** The bound follows the handlers' pace, up to `prefetch` (the consumer's default). */
  adaptive?: boolean;
  extendEverySeconds: number;
}

/** Reports an error the source recovered from (the consumer's `error` event). */
export type Report = (error: unknown) => void;

/**
 * The lock source for the queue's mode and what the service supports: a shared queue on a
 * service with per-item locks and batch settling prefetches ({@link PrefetchSource}); an
 * exclusive queue on a service with `next` on acknowledge pops its next lock in the
 * acknowledging request ({@link NextSource}); otherwise {@link PollingSource}.
 */
export function createLockSource<T extends object>(
  queue: Queue<T>,
  mode: 'exclusive' | 'shared',
  capabilities: Capabilities,
  options: PrefetchOptions,
  stopping: AbortSignal,
  report: Report,
): LockSource<T> {
  if (mode === 'shared' && options.prefetch > 0 && capabilities.lockPerItem && capabilities.batchLocks)
    return new PrefetchSource(queuePops(queue), options, stopping, report);
  if (mode === 'exclusive' && capabilities.acknowledgeNext) return new NextSource(queue, options, stopping, report);
  return new PollingSource(queue, options, stopping, report);
}

/**
 * After a failed pop: drops `include_headers` for a service that refuses it by name, waits for
 * another consumer's exclusive lock (until it expires, or `idleDelayMs`), else reports the error
 * and pauses `idleDelayMs`.
 */
export async function popFailed(error: unknown, options: SourceOptions, stopping: AbortSignal, report: Report): Promise<void> {
  if (options.includeHeaders && isPushpopError(error, 'VALIDATION_FAILED') && /include_headers/.test(error.message)) {
    // A service older than item headers refuses the parameter by name: pop without it.
    options.includeHeaders = false;
  } else if (isPushpopError(error, 'QUEUE_LOCKED')) {
    // Another consumer holds the exclusive lock: come back when it expires, or sooner.
    const expiresAt = Number(error.body?.lock_expires_at);
    const untilExpiry = Number.isFinite(expiresAt) ? expiresAt * 1000 - Date.now() : options.idleDelayMs;
    await idle(Math.max(50, Math.min(untilExpiry, options.idleDelayMs)), stopping);
  } else {
    report(error);
    await idle(options.idleDelayMs, stopping);
  }
}

/** Waits `ms`, or less when `signal` aborts. */
export function idle(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
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

/** Today's API: one `pop` of `depth` items under one lock per `take`, settled one lock at a time. */
export class PollingSource<T extends object> implements LockSource<T> {
  constructor(
    protected readonly queue: Queue<T>,
    protected readonly options: SourceOptions,
    protected readonly stopping: AbortSignal,
    protected readonly report: Report,
  ) {}

  async take(wait: boolean): Promise<Take<T>> {
    const { options } = this;
    let result: PopResult<T>;
    try {
      result = await this.queue.pop({
        depth: options.depth,
        requireAck: true,
        ttlSeconds: options.ttlSeconds,
        waitSeconds: wait ? options.waitSeconds : 0,
        includeHeaders: options.includeHeaders,
        // Cut by close() at once. The service takes no items for a poll whose client has gone,
        // and gives back a lock made in the turn during which it left; an answer already on its
        // way when the poll is cut is lost with its lock, whose items come back at its expiry.
        signal: this.stopping,
      });
    } catch (error) {
      if (this.stopping.aborted) return { stopped: true };
      await popFailed(error, options, this.stopping, this.report);
      return this.stopping.aborted ? { stopped: true } : { nothing: 'busy' };
    }
    const taken = await this.taken(result);
    // A short poll must not spin on an empty queue.
    if ('nothing' in taken && taken.nothing === 'empty' && wait && options.waitSeconds === 0) await idle(options.idleDelayMs, this.stopping);
    return taken;
  }

  /** What a pop's answer gives a slot. */
  protected async taken(result: PopResult<T>): Promise<Take<T>> {
    const { options } = this;
    if (result.lock_id && this.stopping.aborted) {
      // Answered as close() began: the items go straight back, without the queue's retry delay.
      await this.queue.release(result.lock_id, { delaySeconds: 0 }).catch((error: unknown) => this.report(error));
      return { stopped: true };
    }
    if (!result.lock_id || result.items.length === 0) {
      if (result.paused || result.limited) {
        await idle(options.idleDelayMs, this.stopping);
        return { nothing: 'busy' };
      }
      return { nothing: 'empty' };
    }
    const deliveries = result.items.map((item, i) => ({
      item,
      deliveryCount: result.delivery_counts?.[i] ?? 1,
      headers: result.headers?.[i] ?? {},
    }));
    return { lock: { lockId: result.lock_id, queueId: this.queue.id, deliveries } };
  }

  async acknowledge(lock: HeldLock<T>): Promise<void> {
    await this.queue.acknowledge(lock.lockId);
  }

  release(lock: HeldLock<T>, how: ReleaseOptions): Promise<ReleaseResult> {
    return this.queue.release(lock.lockId, how);
  }

  async extend(lock: HeldLock<T>): Promise<void> {
    await this.queue.extendLock(lock.lockId, this.options.ttlSeconds);
  }

  async close(): Promise<void> {}
}

/**
 * An exclusive queue on a service with `next` on acknowledge: each acknowledgement pops the
 * queue's next lock in the same request, so a slot moves one item per round trip. The pop's
 * answer is what the slot's next `take` gives (an empty answer tells it the queue ran dry);
 * `close` gives back a lock so popped that no slot took.
 */
export class NextSource<T extends object> extends PollingSource<T> {
  private ready: PopResult<T> | undefined;

  override async take(wait: boolean): Promise<Take<T>> {
    const next = this.ready;
    this.ready = undefined;
    return next ? this.taken(next) : super.take(wait);
  }

  override async acknowledge(lock: HeldLock<T>): Promise<void> {
    if (this.stopping.aborted) {
      await this.queue.acknowledge(lock.lockId);
      return;
    }
    const { depth, ttlSeconds, includeHeaders } = this.options;
    const answer = await this.queue.acknowledge(lock.lockId, { next: { depth, ttlSeconds, includeHeaders } });
    if (!answer.next) return;
    if (this.stopping.aborted) await this.giveBack(answer.next);
    else this.ready = answer.next;
  }

  override async close(): Promise<void> {
    const next = this.ready;
    this.ready = undefined;
    if (next) await this.giveBack(next);
  }

  private async giveBack(result: PopResult<T>): Promise<void> {
    if (result.lock_id) await this.queue.release(result.lock_id, { delaySeconds: 0 }).catch((error: unknown) => this.report(error));
  }
}
