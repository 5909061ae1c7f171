import type { CallOptions, Queue } from './client.js';
import { toEntry } from './client.js';
import { PushpopError } from './errors.js';
import { withActiveTraceparent } from './tracing.js';
import type { Item, PushEntry, PushOptions } from './types.js';

export interface ProducerOptions {
  /**
   * Gather concurrent pushes into `push/batch` requests (default true). A push made while no
   * request of this producer is in flight goes out at once, on its own (`push`); pushes made
   * while one is in flight go out together as the next request once it is answered. So a lone
   * push never waits, and many concurrent ones cost a request per round trip instead of one each.
   * `false`: every push is a request of its own, sent at once, many in flight (no order between them).
   */
  batch?: boolean;
  /**
   * How long a push waits for others to share its request (default 0: no waiting, see `batch`).
   * With `lingerMs` > 0, pushes made within that time go out as one `push/batch` (like Kafka's linger).
   */
  lingerMs?: number;
  /** Entries per `push/batch` at most, 1–1000 (default 1000). */
  maxBatch?: number;
  /** Serialized bytes per batch at most, below the service's 1 MiB body limit (default 900000). */
  maxBatchBytes?: number;
}

/** The outcome of one push. */
export interface PushResult {
  /**
   * True when the service skipped the entry as a duplicate of its `dedupId`. In a batch the
   * service answers only how many entries were duplicates: when some but not all of a batch's
   * entries with a `dedupId` were, `duplicate` is `undefined` for those entries.
   */
  duplicate: boolean | undefined;
}

interface Pending<T> {
  entry: PushEntry<T>;
  /** The entry's JSON (the body of a single push, an element of a batch's `items`). */
  json: string;
  resolve(result: PushResult): void;
  reject(error: unknown): void;
}

/**
 * Pushes to one queue. By default concurrent `push` calls are gathered into `push/batch`
 * requests while an earlier request is in flight, in call order, one request in flight at a
 * time so the queue receives them in that order (see {@link ProducerOptions.batch}). The service
 * takes a batch all or nothing: when it refuses one with 400 or 413, its entries are sent again
 * one by one, so only the bad entry's caller gets the error.
 *
 * Each item carries the trace context active where `push` was called (its W3C `traceparent`,
 * when an OpenTelemetry SDK is registered), as its header `traceparent` unless it sets one:
 * a {@link Consumer} runs its handler in that trace.
 */
export class Producer<T extends object = Item> {
  private readonly batch: boolean;
  private readonly lingerMs: number;
  private readonly maxBatch: number;
  private readonly maxBatchBytes: number;
  private pending: Pending<T>[] = [];
  /** How many of `pending` (from the front) may go out: all, without linger; with it, those whose linger ended. */
  private ready = 0;
  private timer: NodeJS.Timeout | undefined;
  private inFlight = false;
  /** Callers of {@link flush} waiting for everything pushed so far to be answered. */
  private idle: (() => void)[] = [];

  constructor(
    readonly queue: Queue<T>,
    options: ProducerOptions = {},
  ) {
    this.batch = options.batch ?? true;
    this.lingerMs = options.lingerMs ?? 0;
    this.maxBatch = Math.min(1000, Math.max(1, options.maxBatch ?? 1000));
    this.maxBatchBytes = options.maxBatchBytes ?? 900_000;
  }

  /** Pushes one item; resolves when the service committed it (or skipped it as a duplicate). */
  push(item: T, options: PushOptions & CallOptions = {}): Promise<PushResult> {
    if (!this.batch || options.signal) {
      return this.queue.push(item, options).then((answer) => ({ duplicate: answer.duplicate === true }));
    }
    // Maybe sent later, outside the caller's context: the entry carries the caller's trace context itself.
    const headers = withActiveTraceparent(options.headers);
    const entry: PushEntry<T> = { item, ...options, ...(headers ? { headers } : {}) };
    const json = JSON.stringify(toEntry(entry));
    return new Promise<PushResult>((resolve, reject) => {
      this.pending.push({ entry, json, resolve, reject });
      if (this.lingerMs <= 0) this.ready = this.pending.length;
      else if (this.pending.length - this.ready >= this.maxBatch) this.release();
      else this.timer ??= setTimeout(() => this.release(), this.lingerMs);
      this.pump();
    });
  }

  /** Pushes many items as `push/batch` requests of at most `maxBatch` (all or nothing per request, in order). */
  async pushMany(entries: PushEntry<T>[], options: CallOptions = {}): Promise<{ count: number; duplicates: number }> {
    let count = 0;
    let duplicates = 0;
    for (let i = 0; i < entries.length; i += this.maxBatch) {
      const answer = await this.queue.pushBatch(entries.slice(i, i + this.maxBatch), options);
      count += answer.count;
      duplicates += answer.duplicates ?? 0;
    }
    return { count, duplicates };
  }

  /** Sends what is gathered now; resolves when everything pushed so far has been answered. */
  flush(): Promise<void> {
    this.release();
    this.pump();
    if (!this.inFlight && this.pending.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  /** Every entry gathered so far may go out (its linger ended, or a batch is full, or a flush). */
  private release(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.ready = this.pending.length;
    this.pump();
  }

  /** Sends the next request when none is in flight: the ready entries, up to `maxBatch` and `maxBatchBytes`. */
  private pump(): void {
    if (this.inFlight) return;
    if (this.ready === 0) {
      if (this.pending.length === 0) for (const resolve of this.idle.splice(0)) resolve();
      return;
    }
    let count = 0;
    let bytes = 0;
    while (count < Math.min(this.ready, this.maxBatch)) {
      const size = this.pending[count].json.length + 1;
      if (count > 0 && bytes + size > this.maxBatchBytes) break;
      bytes += size;
      count++;
    }
    const batch = this.pending.splice(0, count);
    this.ready -= count;
    if (this.pending.length > 0 && this.ready === 0 && this.timer === undefined) this.timer = setTimeout(() => this.release(), this.lingerMs);
    this.inFlight = true;
    void this.send(batch).finally(() => {
      this.inFlight = false;
      this.pump();
    });
  }

  private async send(batch: Pending<T>[]): Promise<void> {
    if (batch.length === 1) return this.sendOne(batch[0]);
    try {
      const answer = await this.queue.client.call<{ count: number; duplicates?: number }>({
        method: 'POST',
        path: '/queue/{queue_id}/push/batch',
        params: { path: { queue_id: this.queue.id } },
        json: `{"items":[${batch.map((p) => p.json).join(',')}]}`,
      });
      // Only entries with a dedup id can be duplicates: when none or all of them were, each knows.
      const duplicates = answer.duplicates ?? 0;
      const withId = batch.filter((p) => p.entry.dedupId !== undefined).length;
      for (const p of batch) {
        const duplicate = p.entry.dedupId === undefined || duplicates === 0 ? false : duplicates >= withId ? true : undefined;
        p.resolve({ duplicate });
      }
    } catch (error) {
      if (error instanceof PushpopError && (error.status === 400 || error.status === 413)) {
        for (const p of batch) await this.sendOne(p);
      } else {
        for (const p of batch) p.reject(error);
      }
    }
  }

  private async sendOne(p: Pending<T>): Promise<void> {
    try {
      const answer = await this.queue.client.call<{ duplicate?: boolean }>({
        method: 'POST',
        path: '/queue/{queue_id}/push',
        params: { path: { queue_id: this.queue.id } },
        json: p.json,
        // The request continues the trace of the caller's push, wherever it is sent from.
        ...(p.entry.headers?.traceparent ? { headers: { traceparent: p.entry.headers.traceparent } } : {}),
      });
      p.resolve({ duplicate: answer.duplicate === true });
    } catch (error) {
      p.reject(error);
    }
  }
}
