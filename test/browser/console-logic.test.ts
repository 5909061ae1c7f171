import { describe, expect, it } from 'vitest';
import { headline, rate, sumSamples } from '../../apps/admin/src/metrics.js';
import { segmentChain, segmentKey, type PriorityInfo } from '../../apps/admin/src/segments.js';

// The admin console's pure parts, without a browser: the segment picture and the /metrics numbers.

const config = { segment_size: 100, buffer_segments: 1 };

function priority(p: Partial<PriorityInfo>): PriorityInfo {
  return {
    count: 0,
    head_segment: 0,
    tail_segment: 0,
    head_offloaded_segment: null,
    tail_offloaded_segment: null,
    head_segment_count: 0,
    tail_segment_count: 0,
    ...p,
  };
}

const describeBlocks = (p: PriorityInfo, c = config) =>
  segmentChain(p, c).blocks.map((b) => `${b.kind} ${b.first}-${b.last} ${b.items}${b.collapsed ? ' collapsed' : ''}`);

describe('segment chain', () => {
  it('one segment is head and tail at once', () => {
    expect(describeBlocks(priority({ count: 7, head_segment_count: 7, tail_segment_count: 7 }))).toEqual(['head-tail 0-0 7']);
  });

  it('600 items: head, one buffer segment, 2-4 offloaded one by one, tail', () => {
    const p = priority({ count: 600, tail_segment: 5, head_offloaded_segment: 2, tail_offloaded_segment: 4, head_segment_count: 100, tail_segment_count: 100 });
    expect(describeBlocks(p)).toEqual(['head 0-0 100', 'buffer 1-1 100', 'offloaded 2-2 100', 'offloaded 3-3 100', 'offloaded 4-4 100', 'tail 5-5 100']);
    expect(segmentChain(p, config)).toMatchObject({ segments: 6, offloaded: 3 });
  });

  it('a long offloaded range is one block, whatever its length', () => {
    const p = priority({ head_segment: 40, tail_segment: 1_000_040, head_offloaded_segment: 42, tail_offloaded_segment: 1_000_039, head_segment_count: 3, tail_segment_count: 9 });
    expect(describeBlocks(p)).toEqual(['head 40-40 3', 'buffer 41-41 100', 'offloaded 42-1000039 99999800 collapsed', 'tail 1000040-1000040 9']);
  });

  it('middle segments not offloaded (yet) are drawn in state, collapsed when many', () => {
    const p = priority({ tail_segment: 10, head_segment_count: 100, tail_segment_count: 1 });
    expect(describeBlocks(p)).toEqual(['head 0-0 100', 'buffer 1-1 100', 'state 2-9 800 collapsed', 'tail 10-10 1']);
    const partly = priority({ tail_segment: 12, head_offloaded_segment: 2, tail_offloaded_segment: 8, head_segment_count: 100, tail_segment_count: 1 });
    expect(describeBlocks(partly)).toEqual(['head 0-0 100', 'buffer 1-1 100', 'offloaded 2-8 700 collapsed', 'state 9-9 100', 'state 10-10 100', 'state 11-11 100', 'tail 12-12 1']);
  });

  it('more buffer segments: each drawn up to three, then collapsed', () => {
    const p = priority({ tail_segment: 3, head_segment_count: 50, tail_segment_count: 20 });
    expect(describeBlocks(p, { segment_size: 100, buffer_segments: 5 })).toEqual(['head 0-0 50', 'buffer 1-1 100', 'buffer 2-2 100', 'tail 3-3 20']);
    expect(describeBlocks(priority({ tail_segment: 9, tail_segment_count: 1 }), { segment_size: 10, buffer_segments: 6 })).toEqual([
      'head 0-0 0',
      'buffer 1-6 60 collapsed',
      'state 7-7 10',
      'state 8-8 10',
      'tail 9-9 1',
    ]);
  });

  it('names segments by their state keys', () => {
    expect(segmentKey('orders', 0, 3, false)).toBe('queue_0_seg_3');
    expect(segmentKey('orders', '2', 3, true)).toBe('offloaded_queue_2_seg_3_orders');
  });
});

describe('/metrics headline', () => {
  const text = [
    '# HELP pushpop_operations_total HTTP operations by operation and outcome',
    '# TYPE pushpop_operations_total counter',
    'pushpop_operations_total{operation="push",outcome="ok"} 40',
    'pushpop_operations_total{operation="pop",outcome="QUEUE_LOCKED"} 2',
    'pushpop_operations_total{operation="pop",outcome="ok"} 8 1700000000000',
    'pushpop_items_in_memory 300',
    'pushpop_offloaded_segments 21',
    'pushpop_active_actors 3',
    'pushpop_operation_duration_seconds_bucket{operation="push",le="+Inf"} 40',
  ].join('\n');

  it('sums every sample of a name, over label sets and with timestamps', () => {
    expect(sumSamples(text).get('pushpop_operations_total')).toBe(50);
    expect(headline(text)).toEqual({ operations: 50, itemsInMemory: 300, offloadedSegments: 21, activeActors: 3 });
    expect(headline('')).toEqual({ operations: 0, itemsInMemory: 0, offloadedSegments: 0, activeActors: 0 });
  });

  it('operations per second from two scrapes; none after a counter reset', () => {
    expect(rate(undefined, 50, 1000)).toBeUndefined();
    expect(rate({ value: 50, at: 1000 }, 75, 6000)).toBe(5);
    expect(rate({ value: 50, at: 1000 }, 10, 6000)).toBeUndefined();
  });
});
