import type { CallOptions, Queue } from './client.js';
import { isPushpopError } from './errors.js';

/** What {@link Queue.peek} shows. */
export interface PeekResult<T> {
  /** The next items in pop order (lowest priority number first, FIFO within one), with their priority. */
  items: { priority: number; item: T }[];
  /** Items the queue holds (not counting delayed items or items held by locks). */
  count: number;
  /**
   * Items at the front of their priority that the inspection routes do not show: items given
   * back to a shared queue (a release or an expiry) wait outside the segments until popped
   * again. When it is above 0, a pop takes those first.
   */
  hidden: number;
}

interface PriorityMetadata {
  count: number;
  head_segment: number;
  tail_segment: number;
  head_offloaded_segment?: number | null;
  tail_offloaded_segment?: number | null;
}

/**
 * Reads the front of a queue without taking anything: the queue's `metadata` state (its
 * segment pointers per priority), then its segments from the head, each from the actor's state
 * or, when offloaded, from the offload store, until `limit` items are found.
 */
export async function peek<T extends object>(queue: Queue<T>, limit: number, options: CallOptions = {}): Promise<PeekResult<T>> {
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError('peek: limit must be a positive integer');
  const [info, metadata] = await Promise.all([
    queue.info(options),
    queue.state('metadata', options).catch((error: unknown) => {
      if (isPushpopError(error, 'STATE_KEY_NOT_FOUND')) return { queues: {} };
      throw error;
    }) as Promise<{ queues?: Record<string, { metadata: PriorityMetadata }> }>,
  ]);
  const items: PeekResult<T>['items'] = [];
  let hidden = 0;
  const priorities = Object.keys(info.priorities)
    .map(Number)
    .sort((a, b) => a - b);
  for (const priority of priorities) {
    const meta = metadata.queues?.[`queue_${priority}`]?.metadata;
    hidden += info.priorities[String(priority)].count - (meta?.count ?? 0);
    if (!meta || items.length >= limit) continue;
    for (let segment = meta.head_segment; segment <= meta.tail_segment && items.length < limit; segment++) {
      const offloaded =
        meta.head_offloaded_segment != null &&
        meta.tail_offloaded_segment != null &&
        segment >= meta.head_offloaded_segment &&
        segment <= meta.tail_offloaded_segment;
      const key = offloaded ? `offloaded_queue_${priority}_seg_${segment}_${queue.id}` : `queue_${priority}_seg_${segment}`;
      let stored: unknown;
      try {
        stored = await queue.state(key, options);
      } catch (error) {
        // Popped, offloaded or loaded back since the metadata was read: the rest of this priority moved on.
        if (isPushpopError(error, 'STATE_KEY_NOT_FOUND')) continue;
        throw error;
      }
      for (const item of Array.isArray(stored) ? (stored as T[]) : []) {
        if (items.length >= limit) break;
        items.push({ priority, item });
      }
    }
  }
  return { items, count: info.count, hidden: Math.max(0, hidden) };
}
