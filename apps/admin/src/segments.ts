import type { QueueInfo } from '@pushpop/api-client';

export type PriorityInfo = QueueInfo['priorities'][string];
export type QueueConfig = QueueInfo['config'];

/** Where a segment is: the head or tail, a buffer segment next to the head, another middle segment in the actor's state, or in the offload store. */
export type SegmentKind = 'head' | 'tail' | 'head-tail' | 'buffer' | 'state' | 'offloaded';

/** One block of the picture: a single segment, or a run of segments of one kind collapsed into one. */
export interface SegmentBlock {
  kind: SegmentKind;
  first: number;
  last: number;
  /** Items in the block (middle segments are full: `segment_size` each). */
  items: number;
  collapsed: boolean;
}

export interface PriorityChain {
  blocks: SegmentBlock[];
  segments: number;
  offloaded: number;
}

/** Runs longer than this are drawn as one block ("segments 2–998 offloaded (99,700 items)"). */
export const COLLAPSE_AFTER = 3;

/**
 * The segment chain of one priority, from the pointers `GET /queue/{id}` gives: the head, the
 * buffer segments (`n <= head + buffer_segments`), the offloaded range, any other middle
 * segments still in state, and the tail. Segments strictly between head and tail are full.
 * Works from the pointers alone, so a chain of a million segments costs a handful of blocks.
 */
export function segmentChain(p: PriorityInfo, config: Pick<QueueConfig, 'segment_size' | 'buffer_segments'>): PriorityChain {
  const { head_segment: head, tail_segment: tail } = p;
  const size = config.segment_size;
  if (head === tail) {
    return { blocks: [{ kind: 'head-tail', first: head, last: head, items: p.head_segment_count, collapsed: false }], segments: 1, offloaded: 0 };
  }
  const blocks: SegmentBlock[] = [{ kind: 'head', first: head, last: head, items: p.head_segment_count, collapsed: false }];
  const lo = head + 1;
  const hi = tail - 1;
  let offloaded = 0;
  if (lo <= hi) {
    const bufferEnd = head + config.buffer_segments;
    const inState = (from: number, to: number) => {
      run(blocks, 'buffer', from, Math.min(to, bufferEnd), size);
      run(blocks, 'state', Math.max(from, bufferEnd + 1), to, size);
    };
    const oFrom = p.head_offloaded_segment == null ? null : Math.max(p.head_offloaded_segment, lo);
    const oTo = p.tail_offloaded_segment == null ? null : Math.min(p.tail_offloaded_segment, hi);
    if (oFrom !== null && oTo !== null && oFrom <= oTo) {
      inState(lo, oFrom - 1);
      run(blocks, 'offloaded', oFrom, oTo, size);
      inState(oTo + 1, hi);
      offloaded = oTo - oFrom + 1;
    } else {
      inState(lo, hi);
    }
  }
  blocks.push({ kind: 'tail', first: tail, last: tail, items: p.tail_segment_count, collapsed: false });
  return { blocks, segments: tail - head + 1, offloaded };
}

function run(blocks: SegmentBlock[], kind: SegmentKind, first: number, last: number, size: number): void {
  if (first > last) return;
  const length = last - first + 1;
  if (length > COLLAPSE_AFTER) {
    blocks.push({ kind, first, last, items: length * size, collapsed: true });
    return;
  }
  for (let n = first; n <= last; n++) blocks.push({ kind, first: n, last: n, items: size, collapsed: false });
}

/** The state key of one segment, as `GET /queue/{id}/state/{key}` names it. */
export function segmentKey(queueId: string, priority: string | number, segment: number, offloaded: boolean): string {
  return offloaded ? `offloaded_queue_${priority}_seg_${segment}_${queueId}` : `queue_${priority}_seg_${segment}`;
}

export const KIND_LABEL: Record<SegmentKind, string> = {
  head: 'head',
  tail: 'tail',
  'head-tail': 'head · tail',
  buffer: 'buffer',
  state: 'in state',
  offloaded: 'offloaded',
};
