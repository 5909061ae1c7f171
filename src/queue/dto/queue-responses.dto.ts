import { ApiExtraModels, ApiProperty, getSchemaPath } from '@nestjs/swagger';

/** Answer to a push. */
export class PushResponseDto {
  success: boolean;
  /** @example "Item pushed to queue orders at priority 0" */
  message: string;
  /**
   * Only when the push carried a `dedup_id`: true when that id was accepted on this queue within
   * `DEDUP_WINDOW_SECONDS`, so nothing was pushed; false when the item was pushed.
   * @example false
   */
  duplicate?: boolean;
}

/** Answer to a batch push. */
export class PushBatchResponseDto {
  success: boolean;
  /**
   * Items pushed (delayed ones included).
   * @example 2
   */
  @ApiProperty({ type: 'integer' })
  count: number;
  /**
   * Entries skipped because their `dedup_id` was a duplicate: accepted on this queue within
   * `DEDUP_WINDOW_SECONDS`, or by an earlier entry of the same batch.
   * @example 0
   */
  @ApiProperty({ type: 'integer' })
  duplicates: number;
  /** @example "2 item(s) pushed to queue orders" */
  message: string;
}

/** Answer to a pop. */
export class PopResponseDto {
  /** The popped items, in order. */
  @ApiProperty({ type: 'array', items: { type: 'object', additionalProperties: true } })
  items: Record<string, unknown>[];
  /**
   * With `include_headers`: each item's headers, parallel to `items` (`{}` for an item without).
   * @example [{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tenant": "acme"}]
   */
  @ApiProperty({ type: 'array', items: { type: 'object', additionalProperties: { type: 'string' } }, required: false })
  headers?: Record<string, string>[];
  /** Number of items returned. */
  @ApiProperty({ type: 'integer' })
  count: number;
  /** With `require_ack`: whether a lock now holds the items (false when the queue was empty). */
  locked?: boolean;
  /** With `require_ack` and items: the lock to acknowledge, extend or release (absent with `lock_per_item`). */
  lock_id?: string;
  /**
   * With `require_ack`, `lock_per_item` and items: each item's own lock, parallel to `items`;
   * each is acknowledged, extended and released as a lock of one item.
   * @example ["Xb3kQ9_zA1c", "pQ7_r2LmN0s"]
   */
  @ApiProperty({ type: 'array', items: { type: 'string' }, required: false })
  lock_ids?: string[];
  /** With `require_ack` and items: when the lock (or every lock of `lock_ids`) expires, unix seconds. */
  lock_expires_at?: number;
  /**
   * With `require_ack` and items: how many times each item has been handed out under a lock,
   * this time included (1 for an item never delivered before), parallel to `items`.
   */
  @ApiProperty({ type: 'array', items: { type: 'integer', minimum: 1 }, required: false })
  delivery_counts?: number[];
  /**
   * Present (true) when the queue is paused: nothing was handed out.
   * @example true
   */
  @ApiProperty({ type: 'boolean', required: false })
  paused?: boolean;
  /**
   * Present (true) when a delivery limit (`max_in_flight` for pops with `require_ack`, or
   * `max_pops_per_second`) left no room: nothing was handed out.
   * @example true
   */
  @ApiProperty({ type: 'boolean', required: false })
  limited?: boolean;
}

/** One priority of a queue. */
export class PriorityInfoDto {
  @ApiProperty({ type: 'integer' })
  count: number;
  @ApiProperty({ type: 'integer' })
  head_segment: number;
  @ApiProperty({ type: 'integer' })
  tail_segment: number;
  /** First offloaded segment, or null when nothing of this priority is offloaded. */
  @ApiProperty({ type: 'integer', nullable: true })
  head_offloaded_segment: number | null;
  /** Last offloaded segment, or null. */
  @ApiProperty({ type: 'integer', nullable: true })
  tail_offloaded_segment: number | null;
  /** Items in the head segment (segments between head and tail are full). */
  @ApiProperty({ type: 'integer' })
  head_segment_count: number;
  /** Items in the tail segment (equal to `head_segment_count` when head and tail are the same segment). */
  @ApiProperty({ type: 'integer' })
  tail_segment_count: number;
}

/** A queue's settings (`GET`/`PUT /queue/{queue_id}/settings`, and `config` in `GET /queue/{queue_id}`). */
export class QueueSettingsDto {
  /** Items per segment (1-10000). */
  @ApiProperty({ type: 'integer', minimum: 1, maximum: 10000 })
  segment_size: number;
  /** Segments after the head kept out of the offload store (1-1000). */
  @ApiProperty({ type: 'integer', minimum: 1, maximum: 1000 })
  buffer_segments: number;
  /** `exclusive`: one lock at a time, every pop 423 while it lives; `shared`: competing consumers, each pop with ack takes a lock of its own. */
  @ApiProperty({ enum: ['exclusive', 'shared'] })
  lock_mode: 'exclusive' | 'shared';
  /** Deliveries after which an item given back goes to `dead_letter_queue`; null: no limit. */
  @ApiProperty({ type: 'integer', minimum: 1, maximum: 1000, nullable: true })
  max_deliveries: number | null;
  /** The queue items go to after `max_deliveries` deliveries; null: none. */
  @ApiProperty({ type: 'string', nullable: true })
  dead_letter_queue: string | null;
  /**
   * Pops hand out nothing while true.
   * @example false
   */
  paused: boolean;
  /**
   * Seconds an item given back (expiry or release) waits before it is visible again (0-900; 0: at once).
   * @example 0
   */
  @ApiProperty({ type: 'integer', minimum: 0, maximum: 900 })
  retry_delay_seconds: number;
  /**
   * How the retry delay grows with an item's deliveries.
   * @example "exponential"
   */
  @ApiProperty({ enum: ['fixed', 'exponential'] })
  retry_backoff: 'fixed' | 'exponential';
  /**
   * Ceiling of an exponential retry delay, seconds (1-900).
   * @example 900
   */
  @ApiProperty({ type: 'integer', minimum: 1, maximum: 900 })
  retry_delay_max_seconds: number;
  /**
   * Items held by live locks at most; null: no limit.
   * @example null
   */
  @ApiProperty({ type: 'integer', minimum: 1, maximum: 100000, nullable: true })
  max_in_flight: number | null;
  /**
   * Items handed out by pops per second at most (all processes together); null: no limit.
   * @example null
   */
  @ApiProperty({ type: 'number', minimum: 0.1, maximum: 100000, nullable: true })
  max_pops_per_second: number | null;
}

/** The settings as `GET /queue/{queue_id}` shows them. */
export class QueueConfigDto extends QueueSettingsDto {}

/** The acknowledgement lock of a queue (never its id). */
export class LockInfoDto {
  /** Unix seconds. */
  expires_at: number;
  /** Unix seconds. */
  created_at: number;
  /** Items held by the lock. */
  @ApiProperty({ type: 'integer' })
  item_count: number;
}

/** The shared locks of a queue in shared lock mode. */
export class SharedLocksInfoDto {
  /** Live locks. */
  @ApiProperty({ type: 'integer' })
  count: number;
  /** Items they hold. */
  @ApiProperty({ type: 'integer' })
  item_count: number;
  /** Earliest expiry of a live lock, unix seconds; null when there is none. */
  @ApiProperty({ type: 'number', nullable: true })
  next_expires_at: number | null;
}

/** A queue's state. */
@ApiExtraModels(PriorityInfoDto)
export class QueueInfoDto {
  queue_id: string;
  /** Items waiting (items held by a lock are counted in `lock.item_count`). */
  @ApiProperty({ type: 'integer' })
  count: number;
  /** Keyed by priority. */
  @ApiProperty({ type: 'object', additionalProperties: { $ref: getSchemaPath(PriorityInfoDto) } })
  priorities: Record<string, PriorityInfoDto>;
  config: QueueConfigDto;
  /** Exclusive lock mode: the lock, or null (absent in shared mode). */
  @ApiProperty({ type: LockInfoDto, nullable: true, required: false })
  lock?: LockInfoDto | null;
  /** Shared lock mode: the live locks (absent in exclusive mode). */
  locks?: SharedLocksInfoDto;
  /**
   * Items pushed with `delay_seconds` that are not visible yet (not in `count`, not popped).
   * @example 0
   */
  @ApiProperty({ type: 'integer' })
  delayed: number;
}

export class QueueSummaryDto {
  queue_id: string;
  @ApiProperty({ type: 'integer' })
  count: number;
  locked: boolean;
  /**
   * The queue is paused: pops hand out nothing.
   * @example false
   */
  paused: boolean;
}

/** A page of queues. */
export class QueueListDto {
  queues: QueueSummaryDto[];
  /** Pass as `cursor` for the next page; null on the last page. */
  next_cursor: string | null;
}

export class DeleteQueueResponseDto {
  success: boolean;
  /** Items deleted, including any held by a lock. */
  @ApiProperty({ type: 'integer' })
  items_deleted: number;
}

export class RedriveResponseDto {
  success: boolean;
  /**
   * Items moved to the tails of their priorities on their destinations.
   * @example 250
   */
  @ApiProperty({ type: 'integer' })
  items_moved: number;
  /**
   * Items still on the queue afterwards, not counting items held by locks (as `count` does not).
   * @example 0
   */
  @ApiProperty({ type: 'integer' })
  items_left: number;
}

export class AcknowledgeResponseDto {
  success: boolean;
  /** @example "Successfully acknowledged 2 item(s)" */
  message: string;
  /** Items removed for good. */
  @ApiProperty({ type: 'integer' })
  items_acknowledged: number;
  /**
   * With `next`: the answer of the pop made after the acknowledgement (empty, `paused` or
   * `limited` as a pop answers).
   */
  next?: PopResponseDto;
}

/** What a batch acknowledge or release answers for one lock id: what the single route would answer for it. */
export class LockResultDto {
  /** @example "Xb3kQ9_zA1c" */
  lock_id: string;
  /**
   * The status the single route would answer: 200, or 400 (`LOCK_ID_REQUIRED`, `INVALID_LOCK_ID`),
   * 404 (`LOCK_NOT_FOUND`), 409 (`NO_DEAD_LETTER_QUEUE`), 410 (`LOCK_EXPIRED`).
   * @example 200
   */
  @ApiProperty({ type: 'integer' })
  status: number;
  /**
   * When `status` is not 200: the `error_code` the single route would answer.
   * @example "LOCK_EXPIRED"
   */
  error_code?: string;
}

/** One lock id's result in a batch acknowledge. */
export class AcknowledgeResultDto extends LockResultDto {
  /**
   * With status 200: the lock's items removed for good.
   * @example 1
   */
  @ApiProperty({ type: 'integer', required: false })
  items_acknowledged?: number;
}

/** Answer to a batch acknowledge. */
export class AcknowledgeBatchResponseDto {
  success: boolean;
  /**
   * Items removed for good, over all the locks acknowledged.
   * @example 1
   */
  @ApiProperty({ type: 'integer' })
  items_acknowledged: number;
  /**
   * One result per lock id, in the order of the request.
   * @example [{"lock_id": "Xb3kQ9_zA1c", "status": 200, "items_acknowledged": 1}, {"lock_id": "pQ7_r2LmN0s", "status": 410, "error_code": "LOCK_EXPIRED"}]
   */
  results: AcknowledgeResultDto[];
  /** With `next`, when at least one lock was acknowledged: the answer of the pop made after it. */
  next?: PopResponseDto;
}

export class ExtendLockResponseDto {
  success: boolean;
  lock_id: string;
  /** New expiry, unix seconds. */
  lock_expires_at: number;
}

/** The counts of a release (its answer, one lock's result in a batch release, and a batch release's totals). */
export class ReleaseCountsDto {
  /**
   * Items given back to the queue (exclusive mode: the front of their priorities; shared: where
   * they were in push order); 0 with `dead_letter`.
   * @example 1
   */
  @ApiProperty({ type: 'integer' })
  items_returned: number;
  /**
   * Items that went to the dead-letter queue (they had reached `max_deliveries`, or the release
   * asked for `dead_letter`); present only when there were some.
   * @example 1
   */
  @ApiProperty({ type: 'integer', required: false })
  items_dead_lettered?: number;
  /**
   * Of `items_returned`, items waiting out a retry delay before they are visible again (0 when none).
   * @example 0
   */
  @ApiProperty({ type: 'integer' })
  items_delayed: number;
}

/** One lock id's result in a batch release: with status 200 its counts as a single release answers them. */
export class ReleaseResultDto extends LockResultDto {
  /** @example 1 */
  @ApiProperty({ type: 'integer', required: false })
  items_returned?: number;
  /** @example 1 */
  @ApiProperty({ type: 'integer', required: false })
  items_dead_lettered?: number;
  /** @example 0 */
  @ApiProperty({ type: 'integer', required: false })
  items_delayed?: number;
}

/** Answer to a batch release: the counts over all the locks released, and one result per lock id. */
export class ReleaseBatchResponseDto extends ReleaseCountsDto {
  success: boolean;
  /**
   * One result per lock id, in the order of the request.
   * @example [{"lock_id": "Xb3kQ9_zA1c", "status": 200, "items_returned": 1, "items_delayed": 0}, {"lock_id": "pQ7_r2LmN0s", "status": 404, "error_code": "LOCK_NOT_FOUND"}]
   */
  results: ReleaseResultDto[];
}

/** Answer to a release. */
export class ReleaseResponseDto extends ReleaseCountsDto {
  success: boolean;
}
