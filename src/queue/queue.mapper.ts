import type { PopOutcome, QueueView } from './core/queue-core.js';
import type { QueueSettings } from './core/types.js';
import type { QueueListRow } from '../database/stored-queue.js';
import { NO_HEADERS, popAnswer } from './pop-body.js';
import type { GiveBackOutcome } from './core/queue-core.js';
import type {
  AcknowledgeBatchResponseDto,
  AcknowledgeResultDto,
  ReleaseBatchResponseDto,
  ReleaseCountsDto,
  ReleaseResultDto,
  AcknowledgeResponseDto,
  DeleteQueueResponseDto,
  RedriveResponseDto,
  ExtendLockResponseDto,
  PopResponseDto,
  PriorityInfoDto,
  PushBatchResponseDto,
  PushResponseDto,
  QueueInfoDto,
  QueueListDto,
  QueueSettingsDto,
  ReleaseResponseDto,
} from './dto/queue-responses.dto.js';

/** Epoch milliseconds as the contract's unix seconds (with fractions). */
const seconds = (ms: number): number => ms / 1000;

/** The one place domain results become response bodies. */
export const QueueMapper = {
  /** `duplicate` is in the answer only when the push carried a dedup id. */
  push(queueId: string, priority: number, how: { delaySeconds?: number; dedup?: boolean; duplicate?: boolean } = {}): PushResponseDto {
    if (how.duplicate)
      return { success: true, message: `Duplicate of an item accepted on queue ${queueId} within the deduplication window; nothing pushed`, duplicate: true };
    const delay = how.delaySeconds ? `, visible in ${how.delaySeconds} s` : '';
    const message = `Item pushed to queue ${queueId} at priority ${priority}${delay}`;
    return how.dedup ? { success: true, message, duplicate: false } : { success: true, message };
  },

  pushBatch(queueId: string, count: number, duplicates = 0): PushBatchResponseDto {
    const skipped = duplicates > 0 ? `; ${duplicates} duplicate(s) skipped` : '';
    return { success: true, count, duplicates, message: `${count} item(s) pushed to queue ${queueId}${skipped}` };
  },

  /** `includeHeaders`: the answer carries each item's headers (`{}` for none), parallel to `items`. */
  pop(outcome: Extract<PopOutcome, { items: unknown }>, requireAck: boolean, includeHeaders = false): PopResponseDto {
    // The items (and headers) stay the JSON text they were stored as (see popAnswer).
    const items = outcome.items.map((i) => i.json);
    const headers = includeHeaders ? outcome.items.map((i) => i.headers ?? NO_HEADERS) : undefined;
    // Nothing handed out because of a control: said so (`paused` first, as the pop checks it first).
    const why = outcome.paused ? { paused: true } : outcome.limited ? { limited: true } : {};
    if (!requireAck) return popAnswer(items, { count: items.length, ...why }, headers);
    if (outcome.locks && outcome.locks.length > 0) {
      const lockIds = outcome.locks.map((l) => l.lockId);
      const rest = { count: items.length, locked: true, lock_ids: lockIds, lock_expires_at: seconds(outcome.locks[0].expiresAt) };
      return popAnswer(items, { ...rest, delivery_counts: outcome.items.map((i) => i.deliveries ?? 1) }, headers);
    }
    if (!outcome.lock) return popAnswer(items, { count: 0, locked: false, ...why }, headers);
    return popAnswer(
      items,
      {
        count: items.length,
        locked: true,
        lock_id: outcome.lock.lockId,
        lock_expires_at: seconds(outcome.lock.expiresAt),
        delivery_counts: outcome.items.map((i) => i.deliveries ?? 1),
      },
      headers,
    );
  },

  settings(settings: QueueSettings): QueueSettingsDto {
    return {
      segment_size: settings.segmentSize,
      buffer_segments: settings.bufferSegments,
      lock_mode: settings.lockMode ?? 'exclusive',
      max_deliveries: settings.maxDeliveries ?? null,
      dead_letter_queue: settings.deadLetterQueue ?? null,
      paused: settings.paused ?? false,
      retry_delay_seconds: settings.retryDelaySeconds ?? 0,
      retry_backoff: settings.retryBackoff ?? 'exponential',
      retry_delay_max_seconds: settings.retryDelayMaxSeconds ?? 900,
      max_in_flight: settings.maxInFlight ?? null,
      max_pops_per_second: settings.maxPopsPerSecond ?? null,
    };
  },

  acknowledge(count: number): AcknowledgeResponseDto {
    return { success: true, message: `Successfully acknowledged ${count} item(s)`, items_acknowledged: count };
  },

  extendLock(lockId: string, expiresAt: number): ExtendLockResponseDto {
    return { success: true, lock_id: lockId, lock_expires_at: seconds(expiresAt) };
  },

  /** `items_dead_lettered` only when some items went to the dead-letter queue; `items_delayed` always. */
  release(count: number, deadLettered = 0, delayed = 0): ReleaseResponseDto {
    return { success: true, ...QueueMapper.releaseCounts({ returned: count, deadLettered, delayed }) };
  },

  /** A release's counts, as a release answers them. */
  releaseCounts(outcome: GiveBackOutcome): ReleaseCountsDto {
    const { returned, deadLettered, delayed } = outcome;
    return deadLettered > 0
      ? { items_returned: returned, items_dead_lettered: deadLettered, items_delayed: delayed }
      : { items_returned: returned, items_delayed: delayed };
  },

  /** `next`: the answer of the pop made after the acknowledgement, if one was. */
  acknowledgeBatch(count: number, results: AcknowledgeResultDto[], next?: PopResponseDto): AcknowledgeBatchResponseDto {
    return { success: true, items_acknowledged: count, results, ...(next ? { next } : {}) };
  },

  releaseBatch(total: GiveBackOutcome, results: ReleaseResultDto[]): ReleaseBatchResponseDto {
    return { success: true, ...QueueMapper.releaseCounts(total), results };
  },

  queueInfo(queueId: string, view: QueueView): QueueInfoDto {
    const priorities: Record<string, PriorityInfoDto> = {};
    for (const [p, m] of view.priorities) {
      priorities[String(p)] = {
        // Items waiting at this priority: the view counts given-back ones (kept apart from the segments) too, as the queue's `count` does.
        count: m.count,
        head_segment: m.head_segment,
        tail_segment: m.tail_segment,
        head_offloaded_segment: m.head_offloaded_segment,
        tail_offloaded_segment: m.tail_offloaded_segment,
        head_segment_count: m.head_segment_count,
        tail_segment_count: m.tail_segment_count,
      };
    }
    const lock = view.lock?.state === 'active' ? view.lock : undefined;
    const config = QueueMapper.settings(view.settings);
    const base = { queue_id: queueId, count: view.count, priorities, config, delayed: view.delayed };
    if (view.locks) {
      const { count, itemCount, nextExpiresAt } = view.locks;
      return { ...base, locks: { count, item_count: itemCount, next_expires_at: nextExpiresAt === null ? null : seconds(nextExpiresAt) } };
    }
    return { ...base, lock: lock ? { expires_at: seconds(lock.expiresAt), created_at: seconds(lock.createdAt), item_count: lock.items.length } : null };
  },

  queueList(rows: readonly QueueListRow[], now: number, nextCursor: string | null): QueueListDto {
    return {
      queues: rows.map((r) => ({
        queue_id: r.queueId,
        count: r.count,
        locked: (r.lockExpiresAt !== null && r.lockExpiresAt > now) || r.liveLocks > 0,
        paused: r.paused,
      })),
      next_cursor: nextCursor,
    };
  },

  deleteQueue(itemsDeleted: number): DeleteQueueResponseDto {
    return { success: true, items_deleted: itemsDeleted };
  },

  redrive(itemsMoved: number, itemsLeft: number): RedriveResponseDto {
    return { success: true, items_moved: itemsMoved, items_left: itemsLeft };
  },
};
