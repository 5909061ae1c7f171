import { createPushpopClient, type components, type PushpopClient as GeneratedClient } from '@pushpop/api-client';
import { readCapabilities, type Capabilities } from './capabilities.js';
import { PushpopError } from './errors.js';
import { Consumer, type ConsumerOptions, type Handler } from './consumer.js';
import { Producer, type ProducerOptions } from './producer.js';
import { popQuery, Queue } from './queue.js';
import { type Answer, type Exchange, fetchTransport, nodeTransport, type Transport, TransportTimeout } from './transport.js';
import type { FairPopResult, Item, PopOptions, QueueList, Schedule, ScheduleList, ScheduleUpdate } from './types.js';

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
  /**
   * What the service supports beyond the third version of its contract, when it is known
   * (default: read once from the service's `GET /openapi.json`; see {@link PushpopClient.capabilities}).
   */
  capabilities?: Capabilities;
  /** A `fetch` to send the calls with, instead of Node's `http`/`https` with a keep-alive agent (the default, cheaper per call). */
  fetch?: typeof globalThis.fetch;
}

/** Options every call takes. */
export interface CallOptions {
  signal?: AbortSignal;
}

/** One call of {@link PushpopClient.call}. @internal */
export interface RawCall {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** A route of the OpenAPI document, e.g. `/queue/{queue_id}/pop`; `params.path` fills it in. */
  path: string;
  params?: { path?: Record<string, string>; query?: Record<string, string | number | boolean | undefined> };
  body?: unknown;
  /** The body already serialized as JSON (instead of `body`). */
  json?: string;
  /** Headers of this call only. */
  headers?: Record<string, string>;
  /** Added to the timeout (a long poll's wait). */
  extraTimeoutMs?: number;
  signal?: AbortSignal;
}

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
  /** The generated openapi-fetch client, for anything not wrapped here (this client's own calls do not go through it). */
  readonly raw: GeneratedClient;
  readonly baseUrl: string;
  private readonly timeoutMs: number;
  private readonly retry: Required<RetryOptions>;
  private readonly transport: Transport;
  /** Headers of every call without a body, and of every call with one (built once). */
  private readonly headers: { plain: Record<string, string>; json: Record<string, string> };
  private capabilitiesRead: Promise<Capabilities> | undefined;
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
    if (options.capabilities) this.capabilitiesRead = Promise.resolve({ ...options.capabilities });
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.retry = { retries: 5, minDelayMs: 200, maxDelayMs: 30_000, jitter: 0.25, statuses: [429, 503], ...options.retry };
    this.transport = options.fetch ? fetchTransport(options.fetch, this.baseUrl) : nodeTransport(this.baseUrl);
    const plain: Record<string, string> = { accept: 'application/json', ...options.headers, ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}) };
    this.headers = { plain, json: { ...plain, 'content-type': 'application/json' } };
  }

  /** A queue, its items typed as `T` (any object type, an `interface` included). */
  queue<T extends object = Item>(queueId: string): Queue<T> {
    return new Queue<T>(this, queueId);
  }

  /** Starts a {@link Consumer} on `queueId`; stop it with `close()`. */
  consume<T extends object = Item>(queueId: string, handler: Handler<T>, options: ConsumerOptions = {}): Consumer<T> {
    const consumer = new Consumer<T>(this.queue<T>(queueId), handler, options);
    consumer.start();
    return consumer;
  }

  /**
   * Starts a {@link Consumer} of the queues whose ids start with `prefix` (1–200 characters of the
   * queue id alphabet): fair pops (`POST /queues/pop?prefix=`) take the queues that have items in
   * turn, each item under a lock of its own, prefetched; each is settled through its own queue,
   * with that queue's retry delay, dead-letter queue and `max_deliveries` (read when one of its
   * items first fails). A handler's `queueId` names the item's queue. Serves the shared queues
   * under the prefix: the service passes exclusive ones over in such pops. Stop it with `close()`.
   */
  consumePrefix<T extends object = Item>(prefix: string, handler: Handler<T>, options: ConsumerOptions = {}): Consumer<T> {
    if (!/^[A-Za-z0-9._:@-]{1,200}$/.test(prefix)) throw new RangeError('prefix must be 1-200 characters of A-Z a-z 0-9 . _ : @ -');
    const consumer = new Consumer<T>({ client: this, prefix }, handler, options);
    consumer.start();
    return consumer;
  }

  /** A {@link Producer} for `queueId`: concurrent pushes share `push/batch` requests, a lone push goes out at once. */
  producer<T extends object = Item>(queueId: string, options: ProducerOptions = {}): Producer<T> {
    return new Producer<T>(this.queue<T>(queueId), options);
  }

  /**
   * What the service supports beyond the third version of its contract (per-item locks, batch
   * acknowledgements, dead-lettering on purpose), read once from its OpenAPI document.
   */
  capabilities(): Promise<Capabilities> {
    this.capabilitiesRead ??= readCapabilities(this);
    return this.capabilitiesRead;
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

  /**
   * `POST /queues/pop?prefix=`: pops from the next queue whose id starts with `prefix` and has
   * items to hand out (round robin over them); `queue_id` names it, and its lock is that queue's
   * (acknowledge through `queue(queue_id)`). Nothing found: no items and no `queue_id`.
   */
  popFair<T extends object = Item>(prefix: string, options: PopOptions & CallOptions = {}): Promise<FairPopResult<T>> {
    return this.call({
      method: 'POST',
      path: '/queues/pop',
      params: { query: { prefix, ...popQuery(options) } },
      extraTimeoutMs: (options.waitSeconds ?? 0) * 1000,
      signal: options.signal,
    });
  }

  /** `GET /health/ready`: resolves when the service and its database answer. */
  ready(options: CallOptions = {}): Promise<Record<string, unknown>> {
    return this.call({ method: 'GET', path: '/health/ready', ...options });
  }

  /**
   * One call: retried on the retry statuses after their `Retry-After` (bounded, jittered),
   * each attempt bounded by the timeout; any other non-2xx answer thrown as a {@link PushpopError}
   * naming the method and the path called. Sent by the client's {@link Transport} (Node's
   * `http`, or the `fetch` option), not the generated client: its typing is of no use here
   * (answers are typed by the methods), and its request objects cost more than the call itself
   * on a busy producer.
   * @internal
   */
  async call<R>(request: RawCall): Promise<R> {
    const { signal } = request;
    const path = fillPath(request.path, request.params?.path);
    const json = request.json ?? (request.body === undefined ? undefined : JSON.stringify(request.body));
    const hasBody = json !== undefined;
    const base = hasBody ? this.headers.json : this.headers.plain;
    const exchange: Exchange = {
      method: request.method,
      path: path + queryString(request.params?.query),
      headers: request.headers ? { ...base, ...request.headers } : base,
      timeoutMs: this.timeoutMs + (request.extraTimeoutMs ?? 0),
      ...(hasBody ? { body: json } : {}),
      ...(signal ? { signal } : {}),
    };
    const what = `${request.method} ${path}`;
    for (let attempt = 0; ; attempt++) {
      if (signal?.aborted) throw abortError(signal);
      this.requests++;
      let answer: Answer;
      try {
        answer = await this.transport(exchange);
      } catch (error) {
        if (signal?.aborted) throw abortError(signal);
        if (error instanceof TransportTimeout)
          throw new PushpopError(`no answer from ${this.baseUrl} to ${what} within ${exchange.timeoutMs} ms`, 0, 'TIMEOUT', undefined, { cause: error });
        throw new PushpopError(`cannot reach ${this.baseUrl} (${what}): ${networkCause(error)}`, 0, 'NETWORK_ERROR', undefined, { cause: error });
      }
      const { status, text } = answer;
      if (status >= 200 && status < 300) return (text === '' ? undefined : parseJson(text, text)) as R;
      const parsed = parseJson(text, undefined);
      const body = (typeof parsed === 'object' && parsed !== null ? parsed : {}) as Record<string, unknown>;
      if (this.retry.statuses.includes(status) && attempt < this.retry.retries) {
        await sleep(retryDelayMs(attempt, retryAfterMs(answer.retryAfter), this.retry), signal);
        continue;
      }
      const code = typeof body.error_code === 'string' ? body.error_code : `HTTP_${status}`;
      const message = typeof body.message === 'string' ? body.message : text.trim().slice(0, 200) || answer.statusText;
      throw new PushpopError(`${what}: ${status} ${code}: ${message}`, status, code, body);
    }
  }
}

/** Routes split at their `{name}` parameters once (odd parts are names): a call fills them in without a regular expression. */
const splitRoutes = new Map<string, string[]>();

/** `route` with its `{name}` parameters filled in, each URL-encoded. */
function fillPath(route: string, params: Record<string, string> | undefined): string {
  if (!params) return route;
  let parts = splitRoutes.get(route);
  if (!parts) splitRoutes.set(route, (parts = route.split(/\{(\w+)\}/)));
  let path = parts[0];
  for (let i = 1; i < parts.length; i += 2) {
    const value = params[parts[i]];
    path += (value === undefined ? `{${parts[i]}}` : encodeURIComponent(value)) + parts[i + 1];
  }
  return path;
}

/** `?a=1&b=true` of the defined values, or ''. */
function queryString(query: Record<string, string | number | boolean | undefined> | undefined): string {
  if (!query) return '';
  let out = '';
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined) continue;
    out += `${out ? '&' : '?'}${encodeURIComponent(key)}=${encodeURIComponent(String(value))}`;
  }
  return out;
}

function parseJson(text: string, fallback: unknown): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return fallback;
  }
}

/** Why a request got no answer, from fetch's "fetch failed" and its cause: `connect ECONNREFUSED 127.0.0.1:8000`. */
function networkCause(error: unknown): string {
  const causes: string[] = [];
  const visit = (e: unknown, depth: number) => {
    if (!(e instanceof Error) || depth > 4) return;
    if (e instanceof AggregateError && e.errors.length > 0) e.errors.forEach((inner) => visit(inner, depth + 1));
    else if (e.cause !== undefined) visit(e.cause, depth + 1);
    else if (e.message) causes.push(e.message);
    else if ((e as { code?: string }).code) causes.push(String((e as { code?: string }).code));
  };
  visit(error, 0);
  const unique = [...new Set(causes)];
  return unique.length > 0 ? unique.join('; ') : ((error as Error)?.message ?? String(error));
}

export { Queue, toEntry } from './queue.js';
