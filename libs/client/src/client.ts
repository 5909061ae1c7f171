import { createPushpopClient, type components, type PushpopClient as GeneratedClient } from '@pushpop/api-client';
import { PushpopError } from './errors.js';
import { Consumer, type ConsumerOptions, type Handler } from './consumer.js';
import { Producer, type ProducerOptions } from './producer.js';
import type {
  Item,
  PopOptions,
  PopResult,
  PushEntry,
  PushOptions,
  QueueInfo,
  QueueList,
  Schedule,
  ScheduleList,
  ScheduleUpdate,
  QueueSettings,
  QueueSettingsUpdate,
  RedriveResult,
  ReleaseResult,
} from './types.js';

type Schemas = components['schemas'];

/** How 429 and 503 answers are retried. */
export interface RetryOptions {
  /** Retries after the first attempt (default 5); 0 turns retrying off. */
  retries?: number;
  /** Wait when the answer has no `Retry-After`: `minDelayMs × 2^attempt` (default 200). */
  minDelayMs?: number;
  /** No wait is longer than this, whatever `Retry-After` says (default 30000). */
  maxDelayMs?: number;
  /** Each wait is shortened by a random fraction of up to this much, 0–1 (default 0.25), so clients told the same `Retry-After` do not come back together. */
  jitter?: number;
  /** Statuses retried (default 429 and 503). */
  statuses?: number[];
}

export interface PushpopClientOptions {
  /** Where the service listens, e.g. `http://127.0.0.1:8000` (default `PUSHPOP_URL` or that). */
  baseUrl?: string;
  /** Sent as `Authorization: Bearer <key>` (default `PUSHPOP_API_KEY`). */
  apiKey?: string;
  /** Per attempt, on top of a long poll's `wait_seconds` (default 30000). */
  timeoutMs?: number;
  retry?: RetryOptions;
  /** Extra headers on every call. */
  headers?: Record<string, string>;
  /** A `fetch` to use instead of the global one. */
  fetch?: typeof globalThis.fetch;
}

/** Options every call takes. */
export interface CallOptions {
  signal?: AbortSignal;
}

interface RawCall {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  params?: { path?: Record<string, string>; query?: Record<string, unknown> };
  body?: unknown;
  /** Added to the timeout (a long poll's wait). */
  extraTimeoutMs?: number;
  signal?: AbortSignal;
}

type LooseMethod = (
  path: string,
  init: { params?: unknown; body?: unknown; signal?: AbortSignal },
) => Promise<{ data?: unknown; error?: unknown; response: Response }>;

const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortError(signal));
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError(signal!));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });

function abortError(signal: AbortSignal): PushpopError {
  return new PushpopError('the call was aborted', 0, 'ABORTED', undefined, { cause: signal.reason });
}

/** `Retry-After` in milliseconds (seconds or an HTTP date), or undefined. */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** The wait before retry number `attempt` (0-based): `Retry-After` if given, else exponential; capped, then jittered down. */
export function retryDelayMs(attempt: number, retryAfter: number | undefined, options: Required<RetryOptions>, random = Math.random): number {
  const base = Math.min(options.maxDelayMs, retryAfter ?? options.minDelayMs * 2 ** attempt);
  return Math.round(base * (1 - options.jitter * random()));
}

/**
 * The pushpop client: every route of the service, typed, with API key, timeouts, an
 * `AbortSignal` on every call, and 429/503 retried after their `Retry-After`. Every other
 * non-2xx answer is thrown as a {@link PushpopError}.
 *
 * @example
 * ```ts
 * const client = new PushpopClient({ baseUrl: 'http://127.0.0.1:8000', apiKey: process.env.PUSHPOP_API_KEY });
 * const orders = client.queue<Order>('orders');
 * await orders.push({ id: 1 }, { priority: 1 });
 * ```
 */
export class PushpopClient {
  /** The generated openapi-fetch client this one is built on, for anything not wrapped here. */
  readonly raw: GeneratedClient;
  readonly baseUrl: string;
  private readonly timeoutMs: number;
  private readonly retry: Required<RetryOptions>;
  /** Calls made (attempts included), for measurements and tests. */
  requests = 0;

  constructor(options: PushpopClientOptions = {}) {
    this.baseUrl = (options.baseUrl ?? process.env.PUSHPOP_URL ?? 'http://127.0.0.1:8000').replace(/\/+$/, '');
    const apiKey = options.apiKey ?? process.env.PUSHPOP_API_KEY;
    this.raw = createPushpopClient(this.baseUrl, {
      ...(apiKey ? { apiKey } : {}),
      ...(options.headers ? { headers: options.headers } : {}),
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.retry = { retries: 5, minDelayMs: 200, maxDelayMs: 30_000, jitter: 0.25, statuses: [429, 503], ...options.retry };
  }

  /** A queue, its items typed as `T`. */
  queue<T extends Item = Item>(queueId: string): Queue<T> {
    return new Queue<T>(this, queueId);
  }

  /** Starts a {@link Consumer} on `queueId`; stop it with `close()`. */
  consume<T extends Item = Item>(queueId: string, handler: Handler<T>, options: ConsumerOptions = {}): Consumer<T> {
    const consumer = new Consumer<T>(this.queue<T>(queueId), handler, options);
    consumer.start();
    return consumer;
  }

  /** A {@link Producer} for `queueId` (with `lingerMs` > 0, concurrent pushes go out in batches). */
  producer<T extends Item = Item>(queueId: string, options: ProducerOptions = {}): Producer<T> {
    return new Producer<T>(this.queue<T>(queueId), options);
  }

  /** `GET /queues`: queues by id, `prefix`, `limit` 1–1000, `cursor` from the previous page. */
  listQueues(query: { prefix?: string; limit?: number; cursor?: string } = {}, options: CallOptions = {}): Promise<QueueList> {
    return this.call({ method: 'GET', path: '/queues', params: { query }, ...options });
  }

  /** Every queue, following `next_cursor`. */
  async *allQueues(query: { prefix?: string } = {}, options: CallOptions = {}): AsyncGenerator<QueueList['queues'][number]> {
    let cursor: string | undefined;
    do {
      const page = await this.listQueues({ ...query, limit: 1000, ...(cursor ? { cursor } : {}) }, options);
      yield* page.queues;
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
  }

  /** `GET /schedules`: schedules by id, `limit` 1–1000, `cursor` from the previous page. */
  listSchedules(query: { limit?: number; cursor?: string } = {}, options: CallOptions = {}): Promise<ScheduleList> {
    return this.call({ method: 'GET', path: '/schedules', params: { query }, ...options });
  }

  /** Every schedule, following `next_cursor`. */
  async *allSchedules(options: CallOptions = {}): AsyncGenerator<Schedule> {
    let cursor: string | undefined;
    do {
      const page = await this.listSchedules({ limit: 1000, ...(cursor ? { cursor } : {}) }, options);
      yield* page.schedules;
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
  }

  /** `GET /schedules/{id}`: one schedule with its next and last run. */
  getSchedule(scheduleId: string, options: CallOptions = {}): Promise<Schedule> {
    return this.call({ method: 'GET', path: '/schedules/{schedule_id}', params: { path: { schedule_id: scheduleId } }, ...options });
  }

  /** `PUT /schedules/{id}`: creates or replaces a schedule (cron with 5 or 6 fields, in `timezone`, default UTC). */
  putSchedule(scheduleId: string, schedule: ScheduleUpdate, options: CallOptions = {}): Promise<Schedule> {
    return this.call({ method: 'PUT', path: '/schedules/{schedule_id}', params: { path: { schedule_id: scheduleId } }, body: schedule, ...options });
  }

  /** `DELETE /schedules/{id}`. */
  deleteSchedule(scheduleId: string, options: CallOptions = {}): Promise<{ success: boolean }> {
    return this.call({ method: 'DELETE', path: '/schedules/{schedule_id}', params: { path: { schedule_id: scheduleId } }, ...options });
  }

  /** `GET /whoami`: the key's name and scopes. */
  whoami(options: CallOptions = {}): Promise<Schemas['WhoAmIDto']> {
    return this.call({ method: 'GET', path: '/whoami', ...options });
  }

  /** `GET /health/ready`: resolves when the service and its database answer. */
  ready(options: CallOptions = {}): Promise<Record<string, unknown>> {
    return this.call({ method: 'GET', path: '/health/ready', ...options });
  }

  /**
   * One call: retried on the retry statuses after their `Retry-After` (bounded, jittered),
   * each attempt bounded by the timeout; any other non-2xx answer thrown as a {@link PushpopError}.
   * @internal
   */
  async call<R>(request: RawCall): Promise<R> {
    const { signal } = request;
    for (let attempt = 0; ; attempt++) {
      if (signal?.aborted) throw abortError(signal);
      // One controller per attempt, aborted by the caller's signal or the timeout (not
      // AbortSignal.any, which on Node 20 is slow and keeps composites alive on a long-lived signal).
      const attempt$ = new AbortController();
      let timedOut = false;
      const timer = setTimeout(
        () => {
          timedOut = true;
          attempt$.abort();
        },
        this.timeoutMs + (request.extraTimeoutMs ?? 0),
      );
      const onAbort = () => attempt$.abort(signal?.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.requests++;
      let result: Awaited<ReturnType<LooseMethod>>;
      try {
        const method = (this.raw as unknown as Record<string, LooseMethod>)[request.method];
        result = await method(request.path, {
          ...(request.params ? { params: request.params } : {}),
          ...(request.body !== undefined ? { body: request.body } : {}),
          signal: attempt$.signal,
        });
      } catch (error) {
        if (signal?.aborted) throw abortError(signal);
        if (timedOut) throw new PushpopError(`no answer from ${this.baseUrl} within ${this.timeoutMs} ms`, 0, 'TIMEOUT', undefined, { cause: error });
        throw new PushpopError(`cannot reach ${this.baseUrl}: ${(error as Error).message}`, 0, 'NETWORK_ERROR', undefined, { cause: error });
      } finally {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      }
      const { response } = result;
      if (response.ok) return result.data as R;
      const body = (typeof result.error === 'object' && result.error !== null ? result.error : {}) as Record<string, unknown>;
      if (this.retry.statuses.includes(response.status) && attempt < this.retry.retries) {
        await sleep(retryDelayMs(attempt, retryAfterMs(response.headers.get('retry-after')), this.retry), signal);
        continue;
      }
      const code = typeof body.error_code === 'string' ? body.error_code : `HTTP_${response.status}`;
      const message = typeof body.message === 'string' ? body.message : typeof result.error === 'string' ? result.error : response.statusText;
      throw new PushpopError(`${request.method} ${request.path}: ${response.status} ${code}: ${message}`, response.status, code, body);
    }
  }
}

/**
 * One queue of a {@link PushpopClient}, its items typed as `T`. Every method is one call of the
 * service's HTTP API, named after its operation.
 */
export class Queue<T extends Item = Item> {
  constructor(
    readonly client: PushpopClient,
    readonly id: string,
  ) {}

  private get path() {
    return { path: { queue_id: this.id } };
  }

  /** `POST /queue/{id}/push`: `duplicate` is true when its `dedupId` was seen within the window. */
  push(item: T, options: PushOptions & CallOptions = {}): Promise<Schemas['PushResponseDto']> {
    return this.client.call({ method: 'POST', path: '/queue/{queue_id}/push', params: this.path, body: toEntry({ item, ...options }), signal: options.signal });
  }

  /** `POST /queue/{id}/push/batch`: 1–1000 entries, all or nothing, in order. */
  pushBatch(entries: PushEntry<T>[], options: CallOptions = {}): Promise<Schemas['PushBatchResponseDto']> {
    return this.client.call({ method: 'POST', path: '/queue/{queue_id}/push/batch', params: this.path, body: { items: entries.map(toEntry) }, ...options });
  }

  /** `POST /queue/{id}/pop`. With `requireAck`, hold the items under the answer's `lock_id`; with `waitSeconds`, long-poll. */
  pop(options: PopOptions & CallOptions = {}): Promise<PopResult<T>> {
    const query: Record<string, unknown> = {};
    if (options.depth !== undefined) query.depth = options.depth;
    if (options.requireAck) query.require_ack = true;
    if (options.ttlSeconds !== undefined) query.ttl_seconds = options.ttlSeconds;
    if (options.waitSeconds !== undefined) query.wait_seconds = options.waitSeconds;
    if (options.includeHeaders) query.include_headers = true;
    return this.client.call({
      method: 'POST',
      path: '/queue/{queue_id}/pop',
      params: { ...this.path, query },
      extraTimeoutMs: (options.waitSeconds ?? 0) * 1000,
      signal: options.signal,
    });
  }

  /** `POST /queue/{id}/acknowledge`: the lock's items are gone for good. */
  acknowledge(lockId: string, options: CallOptions = {}): Promise<Schemas['AcknowledgeResponseDto']> {
    return this.client.call({ method: 'POST', path: '/queue/{queue_id}/acknowledge', params: this.path, body: { lock_id: lockId }, ...options });
  }

  /** `POST /queue/{id}/extend-lock`: the lock now expires `ttlSeconds` from now. */
  extendLock(lockId: string, ttlSeconds: number, options: CallOptions = {}): Promise<Schemas['ExtendLockResponseDto']> {
    return this.client.call({
      method: 'POST',
      path: '/queue/{queue_id}/extend-lock',
      params: this.path,
      body: { lock_id: lockId, ttl_seconds: ttlSeconds },
      ...options,
    });
  }

  /** `POST /queue/{id}/release`: the items come back now, or after `delaySeconds` (replacing the queue's retry delay). */
  release(lockId: string, options: { delaySeconds?: number } & CallOptions = {}): Promise<ReleaseResult> {
    return this.client.call({
      method: 'POST',
      path: '/queue/{queue_id}/release',
      params: this.path,
      body: { lock_id: lockId, ...(options.delaySeconds !== undefined ? { delay_seconds: options.delaySeconds } : {}) },
      signal: options.signal,
    });
  }

  /** `GET /queue/{id}`: counts, priorities, settings, lock(s). */
  info(options: CallOptions = {}): Promise<QueueInfo> {
    return this.client.call({ method: 'GET', path: '/queue/{queue_id}', params: this.path, ...options });
  }

  /** `GET /queue/{id}/state/{key}`: the raw state under a seed key name. */
  state(key: string, options: CallOptions = {}): Promise<unknown> {
    return this.client.call({ method: 'GET', path: '/queue/{queue_id}/state/{key}', params: { path: { queue_id: this.id, key } }, ...options });
  }

  /** `GET /queue/{id}/settings`. */
  settings(options: CallOptions = {}): Promise<QueueSettings> {
    return this.client.call({ method: 'GET', path: '/queue/{queue_id}/settings', params: this.path, ...options });
  }

  /** `PUT /queue/{id}/settings`: changes the given settings (creating the queue if needed), answers all of them. */
  updateSettings(settings: QueueSettingsUpdate, options: CallOptions = {}): Promise<QueueSettings> {
    return this.client.call({ method: 'PUT', path: '/queue/{queue_id}/settings', params: this.path, body: settings, ...options });
  }

  /** Pauses pops (`paused: true`). */
  pause(options: CallOptions = {}): Promise<QueueSettings> {
    return this.updateSettings({ paused: true }, options);
  }

  resume(options: CallOptions = {}): Promise<QueueSettings> {
    return this.updateSettings({ paused: false }, options);
  }

  /** `POST /queue/{id}/redrive`: moves items (of a dead-letter queue) to `destination` or back where they came from. */
  redrive(body: { destination?: string; max_items?: number } = {}, options: CallOptions = {}): Promise<RedriveResult> {
    return this.client.call({ method: 'POST', path: '/queue/{queue_id}/redrive', params: this.path, body, ...options });
  }

  /** `DELETE /queue/{id}`: the queue, its items and lock(s). */
  delete(options: CallOptions = {}): Promise<Schemas['DeleteQueueResponseDto']> {
    return this.client.call({ method: 'DELETE', path: '/queue/{queue_id}', params: this.path, ...options });
  }
}

/** The contract's snake_case body of one push entry. */
export function toEntry<T>(entry: PushEntry<T>): Record<string, unknown> {
  const body: Record<string, unknown> = { item: entry.item };
  if (entry.priority !== undefined) body.priority = entry.priority;
  if (entry.dedupId !== undefined) body.dedup_id = entry.dedupId;
  if (entry.delaySeconds !== undefined) body.delay_seconds = entry.delaySeconds;
  if (entry.deliverAt !== undefined) body.deliver_at = entry.deliverAt;
  if (entry.headers !== undefined) body.headers = entry.headers;
  return body;
}
