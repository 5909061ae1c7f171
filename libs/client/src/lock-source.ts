import type { Capabilities } from './capabilities.js';
import type { Queue } from './client.js';
import { isPushpopError } from './errors.js';
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
  acknowledge(lockId: string): Promise<void>;
  release(lockId: string, how: ReleaseOptions): Promise<ReleaseResult>;
  /** Extends a lock a slot holds to the consumer's TTL from now. */
  extend(lockId: string): Promise<void>;
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

/** Reports an error the source recovered from (the consumer's `error` event). */
type Report = (error: unknown) => void;

/** The lock source for what the service supports; today's API only, for now (see {@link LockSource}). */
export function createLockSource<T extends object>(
  queue: Queue<T>,
  _capabilities: Capabilities,
  options: SourceOptions,
  stopping: AbortSignal,
  report: Report,
): LockSource<T> {
  return new PollingSource(queue, options, stopping, report);
}

/** Today's API: one `pop` of `depth` items under one lock per `take`, settled one lock at a time. */
export class PollingSource<T extends object> implements LockSource<T> {
  constructor(
    private readonly queue: Queue<T>,
    private readonly options: SourceOptions,
    private readonly stopping: AbortSignal,
    private readonly report: Report,
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
      if (options.includeHeaders && isPushpopError(error, 'VALIDATION_FAILED') && /include_headers/.test(error.message)) {
        // A service older than item headers refuses the parameter by name: pop without it.
        options.includeHeaders = false;
        return { nothing: 'busy' };
      }
      if (isPushpopError(error, 'QUEUE_LOCKED')) {
        // Another consumer holds the exclusive lock: come back when it expires, or sooner.
        const expiresAt = Number(error.body?.lock_expires_at);
        const untilExpiry = Number.isFinite(expiresAt) ? expiresAt * 1000 - Date.now() : options.idleDelayMs;
        await this.idle(Math.max(50, Math.min(untilExpiry, options.idleDelayMs)));
      } else {
        this.report(error);
        await this.idle(options.idleDelayMs);
      }
      return this.stopping.aborted ? { stopped: true } : { nothing: 'busy' };
    }
    if (result.lock_id && this.stopping.aborted) {
      // Answered as close() began: the items go straight back, without the queue's retry delay.
      await this.release(result.lock_id, { delaySeconds: 0 }).catch((error: unknown) => this.report(error));
      return { stopped: true };
    }
    if (!result.lock_id || result.items.length === 0) {
      if (result.paused || result.limited) {
        await this.idle(options.idleDelayMs);
        return { nothing: 'busy' };
      }
      // A short poll must not spin on an empty queue.
      if (wait && options.waitSeconds === 0) await this.idle(options.idleDelayMs);
      return { nothing: 'empty' };
    }
    const deliveries = result.items.map((item, i) => ({
      item,
      deliveryCount: result.delivery_counts?.[i] ?? 1,
      headers: result.headers?.[i] ?? {},
    }));
    return { lock: { lockId: result.lock_id, deliveries } };
  }

  async acknowledge(lockId: string): Promise<void> {
    await this.queue.acknowledge(lockId);
  }

  release(lockId: string, how: ReleaseOptions): Promise<ReleaseResult> {
    return this.queue.release(lockId, how);
  }

  async extend(lockId: string): Promise<void> {
    await this.queue.extendLock(lockId, this.options.ttlSeconds);
  }

  async close(): Promise<void> {}

  /** Waits `ms`, or less when the consumer stops. */
  private idle(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const signal = this.stopping;
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
}
