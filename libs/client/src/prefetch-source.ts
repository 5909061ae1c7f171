import { performance } from 'node:perf_hooks';
import type { PushpopClient, Queue } from './client.js';
import { isPushpopError } from './errors.js';
import { LockBatcher } from './lock-batcher.js';
import { idle, popFailed, type Delivery, type HeldLock, type LockSource, type PrefetchOptions, type Report, type Take } from './lock-source.js';
import type { PopOptions, PopResult, ReleaseOptions, ReleaseResult } from './types.js';
import { releaseFields } from './queue.js';

/** A lock popped ahead of the handlers: waiting in the buffer, then taken by a slot. */
interface Prefetched<T> extends HeldLock<T> {
  /** When the lock expires (ms since the epoch), as last answered by the service, while it waits in the buffer. */
  expiresAt: number;
  /** When the lock was popped or last extended (ms since the epoch), while it waits in the buffer. */
  renewedAt: number;
  /** Taken by a slot whose handler runs: neither settled nor lost yet. */
  held: boolean;
  /** When a slot took it (`performance.now()`), until its handler's time was counted in the pace. */
  takenAt?: number;
}

/**
 * Acknowledgement requests of one queue in flight at once at most. With one, the consumer's
 * handlers, the service's turn and PostgreSQL's statement take turns: the next request goes out
 * only once the last is answered. With several, the handlers work through what the last `next`
 * brought while the service runs the turn before, and the service finds the next requests
 * waiting when a turn ends. Measured with `bench/consume-drain.mjs` (20,000 items, no-op
 * handlers, one 2-core machine, 1 and 4 alternating, three rounds): 12,400–14,500 against
 * 15,300–17,900 items/s at concurrency 1, 12,800–15,000 against 16,100–17,000 at 8,
 * 16,300–16,800 against 17,900–18,900 at 32.
 */
const ACKNOWLEDGEMENTS_IN_FLIGHT = 4;

/** A prefetched lock with less than this left is not handed to a handler: the service takes it back at its expiry. */
const MIN_LEFT_MS = 1000;

/**
 * An adaptive prefetch (the default, `adaptive`) buffers about this much of the handlers' work
 * at their measured pace: enough to keep the slots busy while a refill makes its round trip
 * (a turn of the queue: milliseconds), little enough that a consumer of slow handlers does not
 * hold items another consumer could run now.
 */
const PREFETCH_HORIZON_MS = 100;
/** The weight of a handler's time in the measured pace (a moving average of the last few dozen). */
const PACE_WEIGHT = 0.1;

/**
 * Where a {@link PrefetchSource} pops: one queue ({@link queuePops}), or the queues under a
 * prefix through fair pops ({@link prefixPops}).
 */
export interface Pops<T extends object> {
  /** A pop (with `lock_per_item`), and the queue its items come from (undefined when there are none). */
  pop(options: PopOptions & { signal: AbortSignal }): Promise<{ result: PopResult<T>; queueId: string | undefined }>;
  /** A queue popped locks may be of, to extend and settle them through. */
  queue(queueId: string): Queue<T>;
  /**
   * The one queue popped, whose acknowledgements pop its next items in the same request (`next`).
   * Undefined for a prefix: there the prefix's round robin picks the queue of each pop.
   */
  readonly only?: Queue<T>;
}

/** Pops of one queue. */
export function queuePops<T extends object>(queue: Queue<T>): Pops<T> {
  return { only: queue, queue: () => queue, pop: async (options) => ({ result: await queue.pop(options), queueId: queue.id }) };
}

/** Fair pops over the queues whose ids start with `prefix` (`POST /queues/pop?prefix=`). */
export function prefixPops<T extends object>(client: PushpopClient, prefix: string): Pops<T> {
  return {
    queue: (queueId) => client.queue<T>(queueId),
    pop: async (options) => {
      const result = await client.popFair<T>(prefix, options);
      return { result, queueId: result.queue_id };
    },
  };
}

/**
 * Shared queues on a service with per-item locks and batch settling (the contract's fourth
 * additions): one pop of up to `depth` items, each under a lock of its own (`lock_per_item`),
 * fills a buffer that the consumer's slots take from, so a round trip brings many items. It pops
 * one queue, or the queues under a prefix (fair pops: each answer's items come from one queue,
 * the queues with items taken in turn; exclusive queues are passed over by the service).
 *
 * - The buffer holds at most `prefetch` locks beyond those the slots work on: a pop asks for
 *   what is missing up to `concurrency + prefetch`, at most 100. An adaptive prefetch
 *   (`adaptive`, the consumer's default) takes as its bound, up to `prefetch`, what the slots get
 *   through in {@link PREFETCH_HORIZON_MS} at the pace their handlers have taken so far (a moving
 *   average of the time from a slot taking a lock to its handler finishing), at least 1;
 *   `concurrency` until a handler finished. Handlers that take microseconds fill it to
 *   `prefetch`, handlers that take a second keep it at 1. One pop is in flight at a time; slots
 *   that find the buffer empty wait for it (a long poll when nothing was found).
 * - While the handlers' pace keeps an adaptive prefetch below `prefetch`, what requests in flight
 *   asked for counts against the bound from the moment they ask: otherwise acknowledgements
 *   that overlap would each bring what the buffer had room for when they left (measured: two
 *   consumers of 50 ms handlers held up to 66 of 150 items at once between them, 24–26 with
 *   it). At `prefetch`
 *   (handlers that take no time, or a prefetch given) it counts once answered, so while a pop
 *   and acknowledgements with `next` are in flight together the buffer may briefly hold more
 *   (with no-op handlers, where {@link ACKNOWLEDGEMENTS_IN_FLIGHT} was measured, the most held
 *   and buffered at once stayed `concurrency + prefetch` at concurrency 1, 8 and 32); counting
 *   it there too tripled the requests per item and cost a third of the items per second.
 * - The buffer hands its locks out by queue in turn (one queue's: first in, first out), so the
 *   many items one fair pop brings from a queue do not hold up those of the next one.
 * - Locks waiting in the buffer are extended when they have waited `extendEverySeconds`; one
 *   too close to its expiry is dropped (the service takes it back then), never handed out.
 * - `acknowledge` goes through each queue's `acknowledge/batch` requests: one at once while fewer
 *   than {@link ACKNOWLEDGEMENTS_IN_FLIGHT} are in flight, else together with the others made
 *   meanwhile. A slot calls it only once its handler finished, so no item is acknowledged before
 *   that. Releases likewise, through `release/batch` (one batcher per queue and delay or
 *   dead-lettering), one request at a time. Of one queue, each
 *   acknowledgement request also pops what the buffer has room for (`next`); of a prefix, the
 *   buffer refills by fair pops only, so that the round robin decides which queue is next.
 * - `close` gives the buffered locks back at once (`release/batch`, no delay); after a crash
 *   they come back when their locks expire.
 */
export class PrefetchSource<T extends object> implements LockSource<T> {
  readonly settlesAhead = true;
  /** Buffered locks by queue. */
  private readonly buffer = new Map<string, Prefetched<T>[]>();
  /** The queues of {@link buffer} in the order they take turns, the queue to take from next first. */
  private readonly turns: string[] = [];
  private buffered = 0;
  private popping: Promise<'got' | 'empty' | 'busy'> | undefined;
  /** Whether the last pop suggests there is more to pop now (it brought items; of one queue, all it asked for). */
  private full = false;
  /** Batchers by queue (acknowledgements), by queue and how (releases); idle ones are dropped now and then. */
  private readonly acks = new Map<string, LockBatcher>();
  private readonly releases = new Map<string, LockBatcher>();
  private readonly extender: NodeJS.Timeout;
  private closed: Promise<void> | undefined;
  /** Locks taken by slots whose handlers run (not settled, nor lost): a count of those marked `held`. */
  private held = 0;
  /** Slots waiting for a pop, told when locks reach the buffer by another way (see {@link fillOrArrival}). */
  private readonly arrivals = new Set<() => void>();
  /** Items asked for by requests in flight (a pop, acknowledgements' `next`), not answered yet. */
  private asking = 0;
  /** The handlers' pace: a moving average of the ms from a slot taking a lock to its handler finishing (undefined: none finished yet). */
  private paceMs: number | undefined;

  constructor(
    private readonly pops: Pops<T>,
    private readonly options: PrefetchOptions,
    private readonly stopping: AbortSignal,
    private readonly report: Report,
  ) {
    const everyMs = Math.max(200, Math.min(options.extendEverySeconds * 1000, 5000) / 2);
    this.extender = setInterval(() => void this.extendWaiting(), everyMs);
    this.extender.unref();
  }

  async take(wait: boolean): Promise<Take<T>> {
    for (;;) {
      if (this.stopping.aborted) return { stopped: true };
      const next = this.takeReady();
      if (next) return { lock: next };
      const outcome = await this.fillOrArrival(wait);
      if (outcome === 'got') continue;
      if (this.stopping.aborted) return { stopped: true };
      return { nothing: outcome };
    }
  }

  /** The next buffered lock, if any (and none once closing); pops more when the buffer runs low. */
  takeReady(): HeldLock<T> | undefined {
    if (this.stopping.aborted) return undefined;
    const next = this.next();
    if (!next) return undefined;
    next.held = true;
    next.takenAt = performance.now();
    this.held += 1;
    if (this.full && this.buffered < this.prefetch / 2) void this.fill(false);
    return next;
  }

  /** The buffer's bound now: `prefetch`, or for an adaptive prefetch what the handlers' pace asks for (see the class doc). */
  get prefetch(): number {
    const { prefetch, adaptive, concurrency } = this.options;
    if (!adaptive) return prefetch;
    if (this.paceMs === undefined) return Math.min(prefetch, concurrency);
    return Math.max(1, Math.min(prefetch, Math.ceil((concurrency * PREFETCH_HORIZON_MS) / Math.max(this.paceMs, 0.001))));
  }

  acknowledge(lock: HeldLock<T>): Promise<unknown> {
    // Its handler finished: the buffer may refill in its place (of one queue, in this very request, with `next`).
    this.handled(lock);
    this.unhold(lock);
    return this.acknowledger(lock.queueId).settle(lock.lockId);
  }

  async release(lock: HeldLock<T>, how: ReleaseOptions): Promise<ReleaseResult> {
    this.handled(lock);
    try {
      const result = await this.releaser(lock.queueId, how).settle(lock.lockId);
      this.unhold(lock);
      return {
        success: true,
        items_returned: result.items_returned ?? 0,
        items_delayed: result.items_delayed,
        items_dead_lettered: result.items_dead_lettered,
      };
    } catch (error) {
      // A dead-lettering refused for want of a dead-letter queue leaves the lock held: it is released again.
      if (!isPushpopError(error, 'NO_DEAD_LETTER_QUEUE')) this.unhold(lock);
      throw error;
    }
  }

  async extend(lock: HeldLock<T>): Promise<void> {
    try {
      await this.pops.queue(lock.queueId).extendLock(lock.lockId, this.options.ttlSeconds);
    } catch (error) {
      if (isPushpopError(error) && error.status >= 400 && error.status < 500) this.unhold(lock);
      throw error;
    }
  }

  /** Gives back at once what no slot has taken, and what a pop still brings. */
  close(): Promise<void> {
    this.closed ??= (async () => {
      clearInterval(this.extender);
      await this.popping?.catch(() => undefined);
      const waiting = [...this.buffer];
      this.buffer.clear();
      this.turns.length = 0;
      this.buffered = 0;
      await Promise.all(
        waiting.map(([queueId, list]) =>
          this.giveBack(
            queueId,
            list.map((b) => b.lockId),
          ),
        ),
      );
      for (const batcher of [...this.acks.values(), ...this.releases.values()]) await batcher.idle();
    })();
    return this.closed;
  }

  /** The next buffered lock with time left, of the queue whose turn it is; drops those without. */
  private next(): Prefetched<T> | undefined {
    const { turns, buffer } = this;
    if (turns.length === 0) return undefined;
    const now = Date.now();
    while (turns.length > 0) {
      const queueId = turns[0];
      const list = buffer.get(queueId)!;
      for (let b = list.shift(); b; b = list.shift()) {
        this.buffered -= 1;
        if (b.expiresAt - now <= MIN_LEFT_MS) continue;
        // While it has more, it goes last: the queues take turns.
        if (list.length === 0) this.dropTurn();
        else if (turns.length > 1) turns.push(turns.shift()!);
        return b;
      }
      this.dropTurn();
    }
    return undefined;
  }

  /** The handler of a lock a slot took finished: its time counts in the pace (once per lock). */
  private handled(lock: HeldLock<T>): void {
    const taken = lock as Prefetched<T>;
    if (taken.takenAt === undefined) return;
    const ms = performance.now() - taken.takenAt;
    taken.takenAt = undefined;
    this.paceMs = this.paceMs === undefined ? ms : this.paceMs + PACE_WEIGHT * (ms - this.paceMs);
  }

  /** A lock taken by a slot was settled or lost (once per lock, however often it is said). */
  private unhold(lock: HeldLock<T>): void {
    const taken = lock as Prefetched<T>;
    if (!taken.held) return;
    taken.held = false;
    this.held -= 1;
  }

  /** The queue whose turn it is has nothing buffered any more. */
  private dropTurn(): void {
    this.buffer.delete(this.turns.shift()!);
  }

  private acknowledger(queueId: string): LockBatcher {
    let batcher = this.acks.get(queueId);
    if (batcher) return batcher;
    const only = this.pops.only;
    const queue = this.pops.queue(queueId);
    // Of one queue, each acknowledgement request also pops what the buffer has room for, in the same turn.
    batcher = new LockBatcher(
      queue,
      '/queue/{queue_id}/acknowledge/batch',
      undefined,
      only
        ? {
            fields: () => {
              const room = this.room();
              if (room <= 0 || this.stopping.aborted) return {};
              this.asking += room;
              const { ttlSeconds, includeHeaders } = this.options;
              return { next: { depth: room, lock_per_item: true, ttl_seconds: ttlSeconds, include_headers: includeHeaders } };
            },
            // Called once per request, answered or failed.
            answered: async (answer, sent) => {
              const asked = (sent.next as { depth: number } | undefined)?.depth ?? 0;
              this.asking -= asked;
              if (answer?.next) await this.accept(answer.next, only.id, asked);
            },
            failed: this.report,
          }
        : {},
      ACKNOWLEDGEMENTS_IN_FLIGHT,
    );
    this.acks.set(queueId, batcher);
    return batcher;
  }

  private releaser(queueId: string, how: ReleaseOptions): LockBatcher {
    const fields = releaseFields(how);
    const key = `${queueId}\n${JSON.stringify(fields)}`;
    let batcher = this.releases.get(key);
    if (!batcher) this.releases.set(key, (batcher = new LockBatcher(this.pops.queue(queueId), '/queue/{queue_id}/release/batch', fields)));
    return batcher;
  }

  /**
   * Waits for the pop in flight (or a new one), or for locks that reach the buffer meanwhile by
   * another way, whichever comes first: an acknowledgement's `next` may bring the item a long
   * poll waits for (its turn ran first), and the slot takes it at once instead of waiting for
   * the poll to end (at the next push, or after `waitSeconds`).
   */
  private async fillOrArrival(wait: boolean): Promise<'got' | 'empty' | 'busy'> {
    let arrived!: () => void;
    const arrival = new Promise<'got'>((resolve) => (arrived = () => resolve('got')));
    this.arrivals.add(arrived);
    try {
      return await Promise.race([this.fill(wait), arrival]);
    } finally {
      this.arrivals.delete(arrived);
    }
  }

  /** One pop at a time, shared by every slot that waits for it. */
  private fill(wait: boolean): Promise<'got' | 'empty' | 'busy'> {
    this.popping ??= this.pop(wait).finally(() => (this.popping = undefined));
    return this.popping;
  }

  private async pop(wait: boolean): Promise<'got' | 'empty' | 'busy'> {
    const { options } = this;
    const depth = Math.max(1, this.room());
    this.asking += depth;
    let popped: Awaited<ReturnType<Pops<T>['pop']>>;
    try {
      popped = await this.pops.pop({
        depth,
        requireAck: true,
        lockPerItem: true,
        ttlSeconds: options.ttlSeconds,
        waitSeconds: wait ? options.waitSeconds : 0,
        includeHeaders: options.includeHeaders,
        signal: this.stopping,
      });
    } catch (error) {
      this.asking -= depth;
      if (this.stopping.aborted) return 'busy';
      await popFailed(error, options, this.stopping, this.report);
      return 'busy';
    }
    this.asking -= depth;
    const got = await this.accept(popped.result, popped.queueId, depth);
    // A short poll must not spin on an empty queue.
    if (got === 'empty' && wait && options.waitSeconds === 0) await idle(options.idleDelayMs, this.stopping);
    return got;
  }

  /** Items a pop (or an acknowledgement's `next`) may ask for now: up to `concurrency + prefetch` locks held or buffered, at most 100 (see the class doc). */
  private room(): number {
    const { concurrency, prefetch: most } = this.options;
    const prefetch = this.prefetch;
    const asked = prefetch < most ? this.asking : 0;
    return Math.min(100, concurrency + prefetch - this.held - this.buffered - asked);
  }

  /** A pop's answer (a pop's, or an acknowledgement's `next`) into the buffer. */
  private async accept(result: PopResult<T>, queueId: string | undefined, depth: number): Promise<'got' | 'empty' | 'busy'> {
    const { options } = this;
    const lockIds = result.lock_ids ?? [];
    if (lockIds.length > 0 && queueId !== undefined && this.stopping.aborted) {
      // Answered as close() began: straight back, without the queue's retry delay.
      await this.giveBack(queueId, lockIds);
      return 'busy';
    }
    if (lockIds.length === 0 || result.items.length === 0 || queueId === undefined) {
      this.full = false;
      if (result.paused || result.limited) {
        await idle(options.idleDelayMs, this.stopping);
        return 'busy';
      }
      return 'empty';
    }
    // Of a prefix, another queue may have items even when this one had fewer than asked.
    this.full = this.pops.only ? result.items.length >= depth : true;
    const now = Date.now();
    const expiresAt = result.lock_expires_at !== undefined ? result.lock_expires_at * 1000 : now + options.ttlSeconds * 1000;
    let list = this.buffer.get(queueId);
    if (!list) {
      this.buffer.set(queueId, (list = []));
      this.turns.push(queueId);
    }
    const { items, delivery_counts: counts, headers } = result;
    for (let i = 0; i < items.length; i++) {
      const delivery: Delivery<T> = { item: items[i], deliveryCount: counts?.[i] ?? 1, headers: headers?.[i] ?? {} };
      list.push({ lockId: lockIds[i], queueId, deliveries: [delivery], expiresAt, renewedAt: now, held: false });
    }
    this.buffered += items.length;
    for (const arrived of this.arrivals) arrived();
    return 'got';
  }

  /** Extends the buffered locks that have waited `extendEverySeconds` since they were popped or last extended; drops idle batchers. */
  private async extendWaiting(): Promise<void> {
    for (const batchers of [this.acks, this.releases]) for (const [key, batcher] of batchers) if (!batcher.busy) batchers.delete(key);
    const due = Date.now() - this.options.extendEverySeconds * 1000;
    const waiting = [...this.buffer.values()].flatMap((list) => list.filter((b) => b.renewedAt <= due).map((b) => ({ b, list })));
    for (const { b, list } of waiting) {
      try {
        const answer = await this.pops.queue(b.queueId).extendLock(b.lockId, this.options.ttlSeconds);
        b.renewedAt = Date.now();
        const expiresAt = (answer as { lock_expires_at?: number }).lock_expires_at;
        b.expiresAt = expiresAt !== undefined ? expiresAt * 1000 : b.renewedAt + this.options.ttlSeconds * 1000;
      } catch (error) {
        // Gone (expired, or the queue was deleted): drop it; the service has the item back.
        const at = list.indexOf(b);
        if (at >= 0) {
          list.splice(at, 1);
          this.buffered -= 1;
        }
        this.report(error);
      }
    }
  }

  private async giveBack(queueId: string, lockIds: string[]): Promise<void> {
    const queue = this.pops.queue(queueId);
    for (let i = 0; i < lockIds.length; i += 1000) {
      try {
        await queue.releaseBatch(lockIds.slice(i, i + 1000), { delaySeconds: 0 });
      } catch (error) {
        this.report(error);
      }
    }
  }
}
