import { describe, expect, it } from 'vitest';
import type { StoredTurnWrite } from '../database/stored-queue.js';
import { FIRST_POSITION, WHOLE_SEGMENT } from '../queue/core/write-set.js';
import { storedWrite } from '../../test/support/stored-writes.js';
import { packedSegmentKey, rowsOverPacked, withPackedSegments } from './packed-segments.js';

/** A write that changes nothing but what a test gives it. */
const write = (w: Partial<StoredTurnWrite>): StoredTurnWrite => storedWrite({ settings: { segmentSize: 4, bufferSegments: 1 }, ...w });

const whole = (priority: number, segment: number) => ({ priority, segment, from: FIRST_POSITION, through: WHOLE_SEGMENT });

describe('withPackedSegments', () => {
  it("keys a packed segment by the seed's state key, never an offloaded segment's", () => {
    expect(packedSegmentKey(3, 12)).toBe('queue_3_seg_12');
    expect(packedSegmentKey(3, 12).startsWith('offloaded_')).toBe(false);
  });

  it('leaves a write with no pack and no whole-segment delete as it is', () => {
    const w = write({ deletes: [{ priority: 0, segment: 1, from: 0, through: 5 }], inserts: [{ priority: 0, segment: 2, position: 0, json: '{}' }] });
    expect(withPackedSegments(w, true)).toBe(w);
    expect(withPackedSegments(w, false)).toBe(w);
  });

  it('saves each pack under its key after the offload saves, with its tags; deletes the packed row of every segment deleted whole but one packed by the write', () => {
    const w = write({
      packs: [
        { priority: 0, segment: 4, items: ['a', 'b'] },
        { priority: 1, segment: 2, items: ['c'], from: ['dlq'], headers: ['{"h":"1"}'] },
      ],
      deletes: [whole(0, 3), { priority: 0, segment: 4, from: 0, through: 0 }, whole(1, 2)],
      storeSaves: [{ key: 'offloaded_queue_0_seg_9_q', items: ['z'] }],
      storeDeletes: ['offloaded_queue_0_seg_4_q'],
    });
    const stored = withPackedSegments(w, true);
    expect(stored.storeSaves).toEqual([
      { key: 'offloaded_queue_0_seg_9_q', items: ['z'] },
      { key: 'queue_0_seg_4', items: ['a', 'b'] },
      { key: 'queue_1_seg_2', items: ['c'], from: ['dlq'], headers: ['{"h":"1"}'] },
    ]);
    // 1:2 is saved by this write (packed after its whole delete): the statement saves before it deletes.
    expect(stored.storeDeletes).toEqual(['offloaded_queue_0_seg_4_q', 'queue_0_seg_3']);
    expect(stored.inserts).toEqual([]);
    expect(stored.deletes).toBe(w.deletes);
  });

  it('a whole-segment delete alone deletes the packed row the segment may have', () => {
    expect(withPackedSegments(write({ deletes: [whole(2, 7)] }), true).storeDeletes).toEqual(['queue_2_seg_7']);
  });

  it('with packing off, writes each pack as rows after what the write deletes of it, tags kept, and still deletes packed rows', () => {
    const w = write({
      packs: [
        { priority: 0, segment: 4, items: ['a', 'b', 'c'], from: [null, 'dlq', null], headers: [null, null, '{"h":"1"}'] },
        { priority: 0, segment: 5, items: ['d'] },
      ],
      deletes: [{ priority: 0, segment: 4, from: 0, through: 0 }, whole(0, 3), { priority: 0, segment: 5, from: -3, through: -2 }],
      inserts: [{ priority: 0, segment: 6, position: 0, json: 'x' }],
    });
    const stored = withPackedSegments(w, false);
    expect(stored.packs).toEqual([]);
    expect(stored.storeSaves).toEqual([]);
    expect(stored.inserts).toEqual([
      { priority: 0, segment: 6, position: 0, json: 'x' },
      { priority: 0, segment: 4, position: 1, json: 'b', from: 'dlq' },
      { priority: 0, segment: 4, position: 2, json: 'c', headers: '{"h":"1"}' },
      { priority: 0, segment: 5, position: 0, json: 'd' },
    ]);
    expect(stored.storeDeletes).toEqual(['queue_0_seg_3']);
  });
});

describe('rowsOverPacked', () => {
  const entry = (position: number, json: string) => ({ position, json });
  const packed = ['{"p":0}', '{"p":1}', '{"p":2}', '{"p":3}'].map((json, position) => entry(position, json));

  it('is the packed items where no row has their position, the rows where one has', () => {
    expect(rowsOverPacked([entry(1, '{"r":1}'), entry(3, '{"r":3}')], packed)).toEqual([
      entry(0, '{"p":0}'),
      entry(1, '{"r":1}'),
      entry(2, '{"p":2}'),
      entry(3, '{"r":3}'),
    ]);
  });

  it('keeps rows past the packed items, and rows alone when nothing is packed', () => {
    const rows = [entry(3, '{"r":3}'), entry(4, '{"r":4}'), entry(7, '{"r":7}')];
    expect(rowsOverPacked(rows, packed).map((e) => e.json)).toEqual(['{"p":0}', '{"p":1}', '{"p":2}', '{"r":3}', '{"r":4}', '{"r":7}']);
    expect(rowsOverPacked(rows, [])).toEqual(rows);
    expect(rowsOverPacked([], packed)).toEqual(packed);
  });
});
