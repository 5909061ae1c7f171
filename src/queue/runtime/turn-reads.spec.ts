import { describe, expect, it } from 'vitest';
import { OffloadStats } from '../../offload/offload-stats.js';
import type { OffloadStore } from '../../offload/offload-store.js';
import type { SegmentFetch, SegmentRef } from '../core/types.js';
import { refKey, StoreReadNeeded, TurnReads } from './turn-reads.js';

const offload = (priority: number, segment: number): SegmentRef => ({ priority, segment, from: 'offload', purpose: 'use' });

/** Turn reads over a store whose loads of the keys in `failing` fail; records the keys loaded. */
function reads(failing: ReadonlySet<number>): { reads: TurnReads; loads: string[]; stats: OffloadStats } {
  const loads: string[] = [];
  const store = {
    load: (_queueId: string, key: string) => {
      loads.push(key);
      const segment = Number(/_seg_(\d+)_/.exec(key)![1]);
      return failing.has(segment) ? Promise.reject(new Error('store down')) : Promise.resolve({ items: [`"${segment}"`] });
    },
  } as unknown as OffloadStore;
  const stats = new OffloadStats();
  const none = undefined as never;
  return { reads: new TurnReads(none, none, none, none, store, stats), loads, stats };
}

describe('TurnReads', () => {
  it('reads offloaded segments in order, and nothing more of a priority past one that could not be read', async () => {
    const { reads: r, loads, stats } = reads(new Set([2]));
    const into = new Map<string, SegmentFetch>();
    await r.readStoreInOrder('q', [offload(0, 1), offload(0, 2), offload(0, 3), offload(1, 5)], into);
    expect(loads.map((k) => /_seg_(\d+)_/.exec(k)![1])).toEqual(['1', '2', '5']);
    expect(into.get(refKey(offload(0, 1)))).toEqual({ entries: [{ position: 0, json: '"1"' }] });
    expect(into.get(refKey(offload(0, 2)))).toEqual({ failed: true });
    expect(into.get(refKey(offload(0, 3))), 'past the failure: not read').toEqual({ failed: true });
    expect(into.get(refKey(offload(1, 5))), 'another priority goes on').toEqual({ entries: [{ position: 0, json: '"5"' }] });
    expect(stats.loadFailures, 'only the failed read counts').toBe(1);
  });

  it('takes what was read before the transaction from `prefetched`; under the row lock, asks for the store reads not made yet', async () => {
    const { reads: r, loads } = reads(new Set());
    const into = new Map<string, SegmentFetch>();
    const prefetched = new Map<string, SegmentFetch>([[refKey(offload(0, 1)), { entries: [{ position: 0, json: '"p"' }] }]]);
    await r.readStoreInOrder('q', [offload(0, 1), offload(0, 2)], into, prefetched);
    expect(loads).toHaveLength(1);
    expect(into.get(refKey(offload(0, 1)))).toEqual({ entries: [{ position: 0, json: '"p"' }] });
    const transaction = {} as never;
    const asked = await r.segments('q', [offload(0, 1), offload(0, 2)], transaction, prefetched, []).catch((error: unknown) => error);
    expect(asked).toBeInstanceOf(StoreReadNeeded);
    expect((asked as StoreReadNeeded).refs, 'only the one not read yet').toEqual([offload(0, 2)]);
  });
});
