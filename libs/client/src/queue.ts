import type { components } from '@pushpop/api-client';
import type { CallOptions, PushpopClient } from './client.js';
import { peek, type PeekResult } from './peek.js';
import { activeTraceparent } from './tracing.js';
import type {
  AcknowledgeResult,
  BatchSettleResult,
  Item,
  NextPop,
  PopOptions,
  PopResult,
  PushEntry,
  PushOptions,
  QueueInfo,
  QueueSettings,
  QueueSettingsUpdate,
  RedriveResult,
  ReleaseOptions,
  ReleaseResult,
} from './types.js';

type Schemas = components['schemas'];

/** The query of a pop, a queue's or a fair one's (`PushpopClient.popFair`). */
export function popQuery(options: PopOptions): Record<string, string | number | boolean | undefined> {
  const query: Record<string, string | number | boolean | undefined> = {};
  if (options.depth !== undefined) query.depth = options.depth;
  if (options.requireAck) query.require_ack = true;
  if (options.ttlSeconds !== undefined) query.ttl_seconds = options.ttlSeconds;
  if (options.waitSeconds !== undefined) query.wait_seconds = options.waitSeconds;
  if (options.includeHeaders) query.include_headers = true;
  if (options.lockPerItem) query.lock_per_item = true;
  return query;
}

/**
 * One queue of a {@link PushpopClient}, its items typed as `T`. Every method is one call of the
 * service's HTTP API, named after its operation.
 */
export class Queue<T extends object = Item> {
  constructor(
    readonly client: PushpopClient,
    readonly id: string,
  ) {}

  private get path() {
    return { path: { queue_id: this.id } };
  }

  /**
   * `POST /queue/{id}/push`, one request per call: `duplicate` is true when its `dedupId` was seen
   * within the window. To push often or from many places at once, use a {@link Producer}.
   * Sends the active OpenTelemetry context's `traceparent` (kept as the item's header), if any.
   */
  push(item: T, options: PushOptions & CallOptions = {}): Promise<Schemas['PushResponseDto']> {
    const body = toEntry({ item, ...options });
    return this.client.call({ method: 'POST', path: '/queue/{queue_id}/push', params: this.path, body, headers: traceHeaders(), signal: options.signal });
  }

  /** `POST /queue/{id}/push/batch`: 1–1000 entries, all or nothing, in order; with the active `traceparent`, as {@link push}. */
  pushBatch(entries: PushEntry<T>[], options: CallOptions = {}): Promise<Schemas['PushBatchResponseDto']> {
    const body = { items: entries.map(toEntry) };
    return this.client.call({ method: 'POST', path: '/queue/{queue_id}/push/batch', params: this.path, body, headers: traceHeaders(), ...options });
  }

  /** `POST /queue/{id}/pop`. With `requireAck`, hold the items under the answer's `lock_id`; with `waitSeconds`, long-poll. */
  pop(options: PopOptions & CallOptions = {}): Promise<PopResult<T>> {
    return this.client.call({
      method: 'POST',
      path: '/queue/{queue_id}/pop',
      params: { ...this.path, query: popQuery(options) },
      extraTimeoutMs: (options.waitSeconds ?? 0) * 1000,
      signal: options.signal,
    });
  }

  /**
   * `POST /queue/{id}/acknowledge`: the lock's items are gone for good. With `next` (a service
   * with {@link Capabilities.acknowledgeNext}), the same request then pops the queue with
   * `require_ack` and answers that pop as `next`.
   */
  acknowledge(lockId: string, options: { next?: NextPop } & CallOptions = {}): Promise<AcknowledgeResult<T>> {
    const body: Record<string, unknown> = { lock_id: lockId };
    if (options.next) body.next = nextBody(options.next);
    return this.client.call({ method: 'POST', path: '/queue/{queue_id}/acknowledge', params: this.path, body, signal: options.signal });
  }

  /** `POST /queue/{id}/acknowledge/batch`: 1–1000 locks; a result per lock, in order (a service with {@link Capabilities.batchLocks}). */
  acknowledgeBatch(lockIds: string[], options: CallOptions = {}): Promise<BatchSettleResult> {
    return this.client.call({ method: 'POST', path: '/queue/{queue_id}/acknowledge/batch', params: this.path, body: { lock_ids: lockIds }, ...options });
  }

  /** `POST /queue/{id}/release/batch`: 1–1000 locks given back as {@link release} gives one back; a result per lock, in order. */
  releaseBatch(lockIds: string[], options: ReleaseOptions & CallOptions = {}): Promise<BatchSettleResult> {
    return this.client.call({
      method: 'POST',
      path: '/queue/{queue_id}/release/batch',
      params: this.path,
      body: { lock_ids: lockIds, ...releaseFields(options) },
      signal: options.signal,
    });
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

  /**
   * `POST /queue/{id}/release`: the items come back now, or after `delaySeconds` (replacing the
   * queue's retry delay); with `deadLetter`, they go to the queue's dead-letter queue now (a
   * service with {@link Capabilities.deadLetterRelease} only).
   */
  release(lockId: string, options: ReleaseOptions & CallOptions = {}): Promise<ReleaseResult> {
    const body = { lock_id: lockId, ...releaseFields(options) };
    return this.client.call({ method: 'POST', path: '/queue/{queue_id}/release', params: this.path, body, signal: options.signal });
  }

  /**
   * The next `limit` items (default 10) in pop order, without taking them: read through the
   * inspection routes (`GET /queue/{id}`, `…/state/{key}`, scope `read`). Items held by locks
   * and delayed items are not shown; nor are items given back to a shared queue's front
   * (counted in `hidden`).
   */
  peek(limit = 10, options: CallOptions = {}): Promise<PeekResult<T>> {
    return peek(this, limit, options);
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

/** A release's fields besides the lock id(s). */
export function releaseFields(how: ReleaseOptions): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  if (how.delaySeconds !== undefined) fields.delay_seconds = how.delaySeconds;
  if (how.deadLetter) fields.dead_letter = true;
  return fields;
}

/** The contract's `next` of an acknowledgement. */
function nextBody(next: NextPop): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (next.depth !== undefined) body.depth = next.depth;
  if (next.ttlSeconds !== undefined) body.ttl_seconds = next.ttlSeconds;
  if (next.lockPerItem) body.lock_per_item = true;
  if (next.includeHeaders) body.include_headers = true;
  return body;
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

/** The active OpenTelemetry context's `traceparent` as a request header; undefined when there is none. */
function traceHeaders(): Record<string, string> | undefined {
  const traceparent = activeTraceparent();
  return traceparent === undefined ? undefined : { traceparent };
}
