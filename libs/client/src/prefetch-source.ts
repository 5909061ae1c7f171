import type { Queue } from './client.js';
import { isPushpopError } from './errors.js';
import { LockBatcher } from './lock-batcher.js';
import { idle, popFailed, type Delivery, type HeldLock, type LockSource, type Report, type SourceOptions, type Take } from './lock-source.js';
import type { PopResult, ReleaseOptions, ReleaseResult } from './types.js';
import { releaseFields } from './queue.js';

/** A lock popped ahead of the handlers, waiting in the buffer. */
interface Buffered<T> {
  lock: HeldLock<T>;
  /** When the lock expires (ms since the epoch), as last answered by the service. */
  expiresAt: number;
  /** When the lock was popped or last extended (ms since the epoch). */
  renewedAt: number;
}

/** A prefetched lock with less than this left is not handed to a handler: the service takes it back at its expiry. */
const MIN_LEFT_MS = 1000;

/**
 * A shared queue on a service with per-item locks and batch settling (the contract's fourth
 * additions): one pop of up to `depth` items, each under a lock of its own (`lock_per_item`),
 * fills a buffer that the consumer's slots take from, so a round trip brings many items.
 *
 * - The buffer holds at most `prefetch` locks beyond those the slots work on: a pop asks for
 *   what is missing up to `concurrency + prefetch`, at most 100. One pop is in flight at a time;
 *   slots that find the buffer empty wait for it (a long poll when the queue was empty).
 * - Locks waiting in the buffer are extended when they have waited `extendEverySeconds`; one
 *   too close to its expiry is dropped (the service takes it back then), never handed out.
 * - `acknowledge` goes through `acknowledge/batch` requests: one at once when none is in
 *   flight, else together with the others made meanwhile. A slot calls it only once its
 *   handler finished, so no item is acknowledged before that. Releases likewise, through
 *   `release/batch` (one batcher per delay or dead-lettering).
 * - `close` gives the buffered locks back at once (`release/batch`, no delay); after a crash
 *   they come back when their locks expire.
 */
export class PrefetchSource<T extends object> implements LockSource<T> {
  readonly settlesAhead = true;
  private readonly buffer: Buffered<T>[] = [];
  private popping: Promise<'got' | 'empty' | 'busy'> | undefined;
  /** Whether the last pop brought all it asked for (the queue probably has more). */
  private full = false;
  private readonly acks: LockBatcher;
  private readonly releases = new Map<string, LockBatcher>();
  private readonly extender: NodeJS.Timeout;
  private closed: Promise<void> | undefined;
  /** Locks taken by slots whose handlers run (not settled, nor lost). */
  private readonly held = new Set<string>();

  constructor(
    private readonly queue: Queue<T>,
    private readonly options: SourceOptions & { concurrency: number; prefetch: number; extendEverySeconds: number },
    private readonly stopping: AbortSignal,
    private readonly report: Report,
  ) {
    // Each acknowledgement request also pops what the buffer has room for, in the same turn.
    this.acks = new LockBatcher(queue, '/queue/{queue_id}/acknowledge/batch', undefined, {
      fields: () => {
        const room = this.room();
        if (room <= 0 || this.stopping.aborted) return {};
        return { next: { depth: room, lock_per_item: true, ttl_seconds: options.ttlSeconds, include_headers: options.includeHeaders } };
      },
      answered: async (answer) => {
        if (answer.next) await this.accept(answer.next, this.room());
      },
    });
    const everyMs = Math.max(200, Math.min(options.extendEverySeconds * 1000, 5000) / 2);
    this.extender = setInterval(() => void this.extendWaiting(), everyMs);
    this.extender.unref();
  }

  async take(wait: boolean): Promise<Take<T>> {
    for (;;) {
      if (this.stopping.aborted) return { stopped: true };
      const next = this.next();
      if (next) {
        this.held.add(next.lockId);
        if (this.full && this.buffer.length < this.options.prefetch / 2) void this.fill(false);
        return { lock: next };
      }
      const outcome = await this.fill(wait);
      if (outcome === 'got') continue;
      if (this.stopping.aborted) return { stopped: true };
      return { nothing: outcome };
    }
  }

  async acknowledge(lockId: string): Promise<void> {
    // Its handler finished: the buffer may refill in its place (in this very request, with `next`).
    this.held.delete(lockId);
    await this.acks.settle(lockId);
  }

  async release(lockId: string, how: ReleaseOptions): Promise<ReleaseResult> {
    try {
      const result = await this.releaser(how).settle(lockId);
      this.held.delete(lockId);
      return {
        success: true,
        items_returned: result.items_returned ?? 0,
        items_delayed: result.items_delayed,
        items_dead_lettered: result.items_dead_lettered,
      };
    } catch (error) {
      // A dead-lettering refused for want of a dead-letter queue leaves the lock held: it is released again.
      if (!isPushpopError(error, 'NO_DEAD_LETTER_QUEUE')) this.held.delete(lockId);
      throw error;
    }
  }

  async extend(lockId: string): Promise<void> {
    try {
      await this.queue.extendLock(lockId, this.options.ttlSeconds);
    } catch (error) {
      if (isPushpopError(error) && error.status >= 400 && error.status < 500) this.held.delete(lockId);
      throw error;
    }
  }

  /** Gives back at once what no slot has taken, and what a pop still brings. */
  close(): Promise<void> {
    this.closed ??= (async () => {
      clearInterval(this.extender);
      await this.popping?.catch(() => undefined);
      await this.giveBack(this.buffer.splice(0).map((b) => b.lock.lockId));
      await this.acks.idle();
      for (const batcher of this.releases.values()) await batcher.idle();
    })();
    return this.closed;
  }

  /** The next buffered lock with time left; drops those without. */
  private next(): HeldLock<T> | undefined {
    const now = Date.now();
    for (let b = this.buffer.shift(); b; b = this.buffer.shift()) if (b.expiresAt - now > MIN_LEFT_MS) return b.lock;
    return undefined;
  }

  private releaser(how: ReleaseOptions): LockBatcher {
    const fields = releaseFields(how);
    const key = JSON.stringify(fields);
    let batcher = this.releases.get(key);
    if (!batcher) this.releases.set(key, (batcher = new LockBatcher(this.queue, '/queue/{queue_id}/release/batch', fields)));
    return batcher;
  }

  /** One pop at a time, shared by every slot that waits for it. */
  private fill(wait: boolean): Promise<'got' | 'empty' | 'busy'> {
    this.popping ??= this.pop(wait).finally(() => (this.popping = undefined));
    return this.popping;
  }

  private async pop(wait: boolean): Promise<'got' | 'empty' | 'busy'> {
    const { options } = this;
    const depth = Math.max(1, this.room());
    let result: PopResult<T>;
    try {
      result = await this.queue.pop({
        depth,
        requireAck: true,
        lockPerItem: true,
        ttlSeconds: options.ttlSeconds,
        waitSeconds: wait ? options.waitSeconds : 0,
        includeHeaders: options.includeHeaders,
        signal: this.stopping,
      });
    } catch (error) {
      if (this.stopping.aborted) return 'busy';
      await popFailed(error, options, this.stopping, this.report);
      return 'busy';
    }
    const got = await this.accept(result, depth);
    // A short poll must not spin on an empty queue.
    if (got === 'empty' && wait && options.waitSeconds === 0) await idle(options.idleDelayMs, this.stopping);
    return got;
  }

  /** Items a pop may ask for now: up to `concurrency + prefetch` locks held, at most 100. */
  private room(): number {
    const { concurrency, prefetch } = this.options;
    return Math.min(100, concurrency + prefetch - this.held.size - this.buffer.length);
  }

  /** A pop's answer (a pop's, or an acknowledgement's `next`) into the buffer. */
  private async accept(result: PopResult<T>, depth: number): Promise<'got' | 'empty' | 'busy'> {
    const { options } = this;
    const lockIds = result.lock_ids ?? [];
    if (lockIds.length > 0 && this.stopping.aborted) {
      // Answered as close() began: straight back, without the queue's retry delay.
      await this.giveBack(lockIds);
      return 'busy';
    }
    if (lockIds.length === 0 || result.items.length === 0) {
      this.full = false;
      if (result.paused || result.limited) {
        await idle(options.idleDelayMs, this.stopping);
        return 'busy';
      }
      return 'empty';
    }
    this.full = result.items.length >= depth;
    const now = Date.now();
    const expiresAt = result.lock_expires_at !== undefined ? result.lock_expires_at * 1000 : now + options.ttlSeconds * 1000;
    result.items.forEach((item, i) => {
      const delivery: Delivery<T> = { item, deliveryCount: result.delivery_counts?.[i] ?? 1, headers: result.headers?.[i] ?? {} };
      this.buffer.push({ lock: { lockId: lockIds[i], deliveries: [delivery] }, expiresAt, renewedAt: now });
    });
    return 'got';
  }

  /** Extends the buffered locks that have waited `extendEverySeconds` since they were popped or last extended. */
  private async extendWaiting(): Promise<void> {
    const due = Date.now() - this.options.extendEverySeconds * 1000;
    for (const b of this.buffer.filter((x) => x.renewedAt <= due)) {
      try {
        const answer = await this.queue.extendLock(b.lock.lockId, this.options.ttlSeconds);
        b.renewedAt = Date.now();
        const expiresAt = (answer as { lock_expires_at?: number }).lock_expires_at;
        b.expiresAt = expiresAt !== undefined ? expiresAt * 1000 : b.renewedAt + this.options.ttlSeconds * 1000;
      } catch (error) {
        // Gone (expired, or the queue was deleted): drop it; the service has the item back.
        const at = this.buffer.indexOf(b);
        if (at >= 0) this.buffer.splice(at, 1);
        this.report(error);
      }
    }
  }

  private async giveBack(lockIds: string[]): Promise<void> {
    for (let i = 0; i < lockIds.length; i += 1000) {
      try {
        await this.queue.releaseBatch(lockIds.slice(i, i + 1000), { delaySeconds: 0 });
      } catch (error) {
        this.report(error);
      }
    }
  }
}
