/**
 * Metadata of one priority of one queue, as stored in `queues.priorities` (keyed by the
 * priority as a decimal string). Field names follow seed 003's metadata document.
 *
 * Invariants (hold after every committed turn):
 * - `head_segment <= tail_segment`; items live in segments head..tail, popped from the head,
 *   pushed to the tail.
 * - every segment strictly between head and tail holds exactly `segment_size` items;
 * - the offloaded range, when set, is contiguous and lies inside
 *   `(head_segment + buffer_segments, tail_segment)`;
 * - the entry exists only while `count > 0`.
 */
export interface PriorityMetadata {
  count: number;
  head_segment: number;
  tail_segment: number;
  head_offloaded_segment: number | null;
  tail_offloaded_segment: number | null;
  /** Position the next pushed item gets in the tail segment; the tail is full at `segment_size`. */
  next_position: number;
  /** Position of the first item of the head segment; returned items go just below it. */
  head_position: number;
}

/** The queue row as the actor needs it. */
export interface QueueRow {
  version: string;
  segmentSize: number;
  bufferSegments: number;
  itemCount: number;
  priorities: Record<string, PriorityMetadata>;
  createdAt: Date;
}

/** One item row of a segment. `json` is the item's JSON text, exactly as stored. */
export interface SegmentEntry {
  position: number;
  json: string;
}

/** Rows to insert: all of one priority and segment, positions ascending. */
export interface SegmentInsert {
  priority: number;
  segment: number;
  entries: SegmentEntry[];
}

/** A listing row for `GET /queues`. */
export interface QueueListRow {
  queueId: string;
  count: number;
  /** Expiry (epoch ms) of the queue's active acknowledgement lock, or null. */
  lockExpiresAt: number | null;
}
