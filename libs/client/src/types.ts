import type { components } from '@pushpop/api-client';

type Schemas = components['schemas'];

/**
 * An item: any JSON object. Generic parameters take any object type (`T extends object`), an
 * `interface` included: `client.queue<Order>('orders')`.
 */
export type Item = Record<string, unknown>;

/** Options of a push, or of one entry of a batch. */
export interface PushOptions {
  /** 0 (popped first) … the service's `MAX_PRIORITY`; default 0. */
  priority?: number;
  /** A push whose `dedupId` was accepted on the queue within the dedup window enqueues nothing. */
  dedupId?: string;
  /** Invisible to pops for this long. */
  delaySeconds?: number;
  /** Invisible to pops until then (unix seconds); not with `delaySeconds`. */
  deliverAt?: number;
  /** Up to 16 string values kept with the item (`include_headers` pops answer them). */
  headers?: Record<string, string>;
}

export interface PushEntry<T> extends PushOptions {
  item: T;
}

export interface PopOptions {
  /** 1–100 items at most (default 1). */
  depth?: number;
  /** Hold the items under a lock until acknowledged (default false: they are removed). */
  requireAck?: boolean;
  /** The lock's time to live, 1–300 (default 30). */
  ttlSeconds?: number;
  /** Long poll: on an empty queue wait up to this long, 0–20 (default 0). */
  waitSeconds?: number;
  /** Answer each item's headers. */
  includeHeaders?: boolean;
  /**
   * With `requireAck` on a shared queue: each item under a lock of its own (`lock_ids`, parallel
   * to `items`), the contract's fourth additions ({@link Capabilities.lockPerItem}).
   */
  lockPerItem?: boolean;
}

/** A pop's answer, items typed; `paused` and `limited` mean "nothing now, poll again". */
export interface PopResult<T> {
  items: T[];
  count: number;
  locked?: boolean;
  lock_id?: string;
  /** A pop with `lockPerItem`: each item's lock, parallel to `items` (and no `lock_id`). */
  lock_ids?: string[];
  lock_expires_at?: number;
  delivery_counts?: number[];
  headers?: Record<string, string>[];
  paused?: boolean;
  limited?: boolean;
}

/** A fair pop's answer: a pop's, and the queue its items come from (absent when there are none). */
export interface FairPopResult<T> extends PopResult<T> {
  queue_id?: string;
}

export interface ReleaseResult {
  success: boolean;
  items_returned: number;
  items_delayed?: number;
  /** Items that went to the queue's dead-letter queue (reached `max_deliveries`, or released with `dead_letter`). */
  items_dead_lettered?: number;
}

/** How a lock is given back by `release`. */
export interface ReleaseOptions {
  /** Seconds, 0–900, before the items are visible again; replaces the queue's retry delay for this release. */
  delaySeconds?: number;
  /**
   * Send the items to the queue's dead-letter queue now, whatever their delivery count (the
   * contract's fourth additions; 409 `NO_DEAD_LETTER_QUEUE` on a queue without one). Not with
   * `delaySeconds`. See {@link Capabilities.deadLetterRelease}.
   */
  deadLetter?: boolean;
}

/** What `acknowledge` pops in the same request once the acknowledgement succeeded (`next`, {@link Capabilities.acknowledgeNext}). */
export interface NextPop {
  depth?: number;
  ttlSeconds?: number;
  lockPerItem?: boolean;
  includeHeaders?: boolean;
}

export interface AcknowledgeResult<T> {
  success: boolean;
  items_acknowledged?: number;
  /** With `next`: that pop's answer. */
  next?: PopResult<T>;
}

/** One lock's result in an `acknowledge/batch` or `release/batch` answer: what the single call would answer for it. */
export interface LockResult {
  lock_id: string;
  status: number;
  error_code?: string;
  message?: string;
  items_acknowledged?: number;
  items_returned?: number;
  items_delayed?: number;
  items_dead_lettered?: number;
}

export interface BatchSettleResult {
  success: boolean;
  items_acknowledged?: number;
  results: LockResult[];
  /** An acknowledgement with `next`: that pop's answer. */
  next?: PopResult<never>;
}

export interface RedriveResult {
  success: boolean;
  items_moved: number;
  items_left: number;
}

/** The settings added by the third version of the contract (typed here until the generated types have them). */
export interface ProductionSettings {
  paused: boolean;
  retry_delay_seconds: number;
  retry_backoff: 'fixed' | 'exponential';
  retry_delay_max_seconds: number;
  max_in_flight: number | null;
  max_pops_per_second: number | null;
}

export type QueueSettings = Schemas['QueueSettingsDto'] & Partial<ProductionSettings>;
export type QueueSettingsUpdate = Schemas['QueueSettingsRequestDto'] & Partial<ProductionSettings>;
export type QueueInfo = Omit<Schemas['QueueInfoDto'], 'config'> & { config: QueueSettings };
export type QueueList = Schemas['QueueListDto'];

export type Schedule = Schemas['ScheduleDto'];
export type ScheduleList = Schemas['ScheduleListDto'];
export type ScheduleUpdate = Schemas['PutScheduleDto'];
