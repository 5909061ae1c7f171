import type { CallOptions, Queue } from './client.js';
import { toEntry } from './client.js';
import { PushpopError } from './errors.js';
import { withActiveTraceparent } from './tracing.js';
import type { Item, PushEntry, PushOptions } from './types.js';

export interface ProducerOptions {
  /**
   * How long a push waits for others to share its request (default 0: every push is a request
   * of its own). With `lingerMs` > 0, pushes made within that time go out as one `push/batch`.
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
   * service answers only how many entries were duplicates: when some but not all were,
   * `duplicate` is `undefined` for the entries that had a `dedupId`.
   */
  duplicate: boolean | undefined;
}

interface Pending<T> {
  entry: PushEntry<T>;
  bytes: number;
  resolve(result: PushResult): void;
  reject(error: unknown): void;
}

/**
 * Pushes to one queue. With `lingerMs` > 0 concurrent `push` calls are gathered into
 * `push/batch` requests (like Kafka's linger), in call order, one request in flight at a time
 * so the queue receives them in that order. The service takes a batch all or nothing: when it
 * refuses one with 400 or 413, its entries are sent again one by one, so only the bad entry's
 * caller gets the error.
 *
 * Each item carries the trace context active where `push` was called (its W3C `traceparent`,
 * when an OpenTelemetry SDK is registered), as its header `traceparent` unless it sets one:
 * a {@link Consumer} runs its handler in that trace.
 */
export class Producer<T extends object = Item> {
  private readonly lingerMs: number;
  private readonly maxBatch: number;
  private readonly maxBatchBytes: number;
  private pending: Pending<T>[] = [];
  private pendingBytes = 0;
  private timer: NodeJS.Timeout | undefined;
  private sending: Promise<void> = Promise.resolve();

  constructor(
    readonly queue: Queue<T>,
    options: ProducerOptions = {},
  ) {
    this.lingerMs = options.lingerMs ?? 0;
    this.maxBatch = Math.min(1000, Math.max(1, options.maxBatch ?? 1000));
    this.maxBatchBytes = options.maxBatchBytes ?? 900_000;
  }

  /** Pushes one item; resolves when the service committed it (or skipped it as a duplicate). */
  push(item: T, options: PushOptions & CallOptions = {}): Promise<PushResult> {
    if (this.lingerMs <= 0 || options.signal) {
      return this.queue.push(item, options).then((answer) => ({ duplicate: answer.duplicate === true }));
    }
    // Sent later, outside the caller's context: the entry carries the caller's trace context itself.
    const headers = withActiveTraceparent(options.headers);
    const entry: PushEntry<T> = headers ? { item, ...options, headers } : { item, ...options };
    const bytes = JSON.stringify(toEntry(entry)).length + 1;
    return new Promise<PushResult>((resolve, reject) => {
      if (this.pending.length > 0 && this.pendingBytes + bytes > this.maxBatchBytes) void this.flush();
      this.pending.push({ entry, bytes, resolve, reject });
      this.pendingBytes += bytes;
      if (this.pending.length >= this.maxBatch) void this.flush();
      else this.timer ??= setTimeout(() => void this.flush(), this.lingerMs);
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
  async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending.length > 0) {
      const batch = this.pending;
      this.pending = [];
      this.pendingBytes = 0;
      this.sending = this.sending.then(() => this.send(batch));
    }
    return this.sending;
  }

  private async send(batch: Pending<T>[]): Promise<void> {
    if (batch.length === 1) return this.sendOne(batch[0]);
    try {
      const answer = await this.queue.pushBatch(batch.map((p) => p.entry));
      const duplicates = answer.duplicates ?? 0;
      for (const p of batch) {
        const duplicate = p.entry.dedupId === undefined ? false : duplicates === 0 ? false : answer.count === 0 ? true : undefined;
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
      const answer = await this.queue.push(p.entry.item, p.entry);
      p.resolve({ duplicate: answer.duplicate === true });
    } catch (error) {
      p.reject(error);
    }
  }
}
