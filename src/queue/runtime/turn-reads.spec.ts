import { describe, expect, it } from 'vitest';
import type { AppConfig } from '../../config/app-config.js';
import { OffloadStats } from '../../offload/offload-stats.js';
import type { OffloadStore } from '../../offload/offload-store.js';
import type { QueueCore } from '../core/queue-core.js';
import type { SegmentFetch, SegmentRef } from '../core/types.js';
import { SegmentReadAhead } from './segment-read-ahead.js';
import { refKey, StoreReadNeeded, TurnReads } from './turn-reads.js';

const readAheadConfig = (segments: number): AppConfig => ({ env: { READ_AHEAD_SEGMENTS: segments } }) as AppConfig;
const offload = (priority: number, segment: number): SegmentRef => ({ priority, segment, from: 'offload', purpose: 'use' });

/** Turn reads over a store whose loads of the keys in `failing` fail; records the keys loaded. */
function reads(failing: ReadonlySet<number>): { reads: TurnReads; loads: string[]; stats: OffloadStats; store: OffloadStore } {
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
  return { reads: new TurnReads(none, none, none, none, store, stats, new SegmentReadAhead(readAheadConfig(2), store, none, stats)), loads, stats, store };
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

  it('takes the reads made ahead of the turn for its core, and reads the rest itself', async () => {
    const { loads, store } = reads(new Set());
    const rowReads: string[] = [];
    const queueState = {
      loadSegments: (_q: string, segments: readonly { priority: number; segment: number }[]) => {
        rowReads.push(...segments.map((s) => `${s.priority}:${s.segment}`));
        return Promise.resolve(new Map());
      },
    } as never;
    const aheadStore = { load: (_q: string, key: string) => Promise.resolve({ items: [`"ahead ${/_seg_(\d+)_/.exec(key)![1]}"`] }) } as unknown as OffloadStore;
    const readAhead = new SegmentReadAhead(readAheadConfig(2), aheadStore, queueState, new OffloadStats());
    const core = { isPresent: true } as unknown as QueueCore;
    readAhead.committed('q', core, [offload(0, 3)], undefined, []);
    expect(rowReads, 'read ahead: the rows of segment 3').toEqual(['0:3']);
    const none = undefined as never;
    const r = new TurnReads(queueState, none, none, none, store, new OffloadStats(), readAhead);
    const loaded: SegmentRef[] = [];
    const state = (segment: number): SegmentRef => ({ priority: 0, segment, from: 'state', purpose: 'use' });
    const fetched = await r.segments('q', [state(3), offload(0, 3), state(4), offload(0, 4)], undefined, new Map(), loaded, core);
    expect(fetched).toEqual([{ entries: [] }, { entries: [{ position: 0, json: '"ahead 3"' }] }, { entries: [] }, { entries: [{ position: 0, json: '"4"' }] }]);
    expect(
      loads.map((k) => /_seg_(\d+)_/.exec(k)![1]),
      'the turn read only segment 4 from the store',
    ).toEqual(['4']);
    expect(rowReads, "and only segment 4's rows").toEqual(['0:3', '0:4']);
    expect(loaded, 'both count as loaded back').toEqual([offload(0, 3), offload(0, 4)]);
  });
});
