import type { Queue } from './client.js';
import { PushpopError } from './errors.js';
import type { BatchSettleResult, LockResult } from './types.js';

interface Waiting {
  lockId: string;
  resolve(result: LockResult): void;
  reject(error: unknown): void;
}

/** At most this many lock ids per request (the contract's limit). */
const MAX_LOCKS = 1000;

/** More fields of a batcher's requests, decided as each goes out (an acknowledgement's `next`), and what to do with each one's whole answer. */
export interface EachRequest {
  fields?: () => Record<string, unknown>;
  /**
   * Called once per request with the fields {@link fields} gave it, and its answer (undefined when
   * the request failed), before the request's locks get their results.
   */
  answered?: (answer: BatchSettleResult | undefined, sent: Record<string, unknown>) => Promise<void>;
  /** Gets what {@link answered} threw: the request's locks get their results all the same. */
  failed?: (error: unknown) => void;
}

/**
 * Settles locks of one queue through a batch route (`acknowledge/batch`, `release/batch`), with
 * the same body fields for all (a release's delay, `dead_letter`): a lock settled while fewer than
 * `maxInFlight` of this batcher's requests are in flight goes out at once; locks settled while
 * that many are go out together once one is answered. No timer: settling never waits for
 * company. Each caller gets its own lock's result, or a {@link PushpopError} made of it when its
 * status is not 200.
 */
export class LockBatcher {
  private waiting: Waiting[] = [];
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly queue: Queue<object>,
    private readonly route: '/queue/{queue_id}/acknowledge/batch' | '/queue/{queue_id}/release/batch',
    private readonly fields: Record<string, unknown> = {},
    private readonly each: EachRequest = {},
    /** Requests in flight at once at most. */
    private readonly maxInFlight = 1,
  ) {}

  /** Settles `lockId`; resolves with its result when it is 200, rejects with its error otherwise. */
  settle(lockId: string): Promise<LockResult> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ lockId, resolve, reject });
      this.pump();
    });
  }

  /** Settles many locks; each one's result or error, in order. */
  settleAll(lockIds: string[]): Promise<PromiseSettledResult<LockResult>[]> {
    return Promise.allSettled(lockIds.map((lockId) => this.settle(lockId)));
  }

  /** Whether a lock waits or a request is in flight. */
  get busy(): boolean {
    return this.inFlight.size > 0 || this.waiting.length > 0;
  }

  /** Resolves when nothing is waiting or in flight. */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all(this.inFlight);
  }

  private pump(): void {
    if (this.inFlight.size >= this.maxInFlight || this.waiting.length === 0) return;
    const batch = this.waiting.splice(0, MAX_LOCKS);
    const request: Promise<void> = this.send(batch).finally(() => {
      this.inFlight.delete(request);
      this.pump();
    });
    this.inFlight.add(request);
  }

  private async send(batch: Waiting[]): Promise<void> {
    const sent = this.each.fields?.() ?? {};
    let answer: BatchSettleResult;
    try {
      answer = await this.queue.client.call({
        method: 'POST',
        path: this.route,
        params: { path: { queue_id: this.queue.id } },
        body: { lock_ids: batch.map((w) => w.lockId), ...this.fields, ...sent },
      });
    } catch (error) {
      for (const w of batch) w.reject(error);
      await this.hook(undefined, sent);
      return;
    }
    await this.hook(answer, sent);
    const results = answer.results ?? [];
    // The contract answers a result per lock, in order: looked up by id only when one is not where it should be.
    let byId: Map<string, LockResult> | undefined;
    for (let i = 0; i < batch.length; i++) {
      const w = batch[i];
      let result: LockResult | undefined = results[i];
      if (result?.lock_id !== w.lockId) {
        byId ??= new Map(results.map((r) => [r.lock_id, r]));
        result = byId.get(w.lockId);
      }
      if (result && result.status >= 200 && result.status < 300) w.resolve(result);
      else w.reject(this.failure(w.lockId, result));
    }
  }

  /** Runs the {@link EachRequest.answered} hook; what it throws goes to {@link EachRequest.failed}, never into the request (whose locks would get no result). */
  private async hook(answer: BatchSettleResult | undefined, sent: Record<string, unknown>): Promise<void> {
    try {
      await this.each.answered?.(answer, sent);
    } catch (error) {
      this.each.failed?.(error);
    }
  }

  /** The error of a lock whose result is not 200, or missing. */
  private failure(lockId: string, result: LockResult | undefined): PushpopError {
    const what = `POST ${this.route.replace('{queue_id}', encodeURIComponent(this.queue.id))}`;
    if (!result) return new PushpopError(`${what}: no result for lock ${lockId}`, 0, 'NO_RESULT');
    const code = result.error_code ?? `HTTP_${result.status}`;
    return new PushpopError(`${what}: lock ${lockId}: ${result.status} ${code}: ${result.message ?? ''}`.trim(), result.status, code, { ...result });
  }
}
