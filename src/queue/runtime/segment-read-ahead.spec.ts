import { describe, expect, it } from 'vitest';
import { OffloadStats } from '../../offload/offload-stats.js';
import type { OffloadStore } from '../../offload/offload-store.js';
import type { QueueStateRepository } from '../../storage/queue-state.repository.js';
import type { QueueCore } from '../core/queue-core.js';
import type { SegmentEntry, SegmentFetch, SegmentRef, TurnWrite } from '../core/types.js';
import type { AppConfig } from '../../config/app-config.js';
import { SegmentReadAhead } from './segment-read-ahead.js';

const READ_AHEAD_SEGMENTS = 3;
const readAheadConfig = (segments: number): AppConfig => ({ env: { READ_AHEAD_SEGMENTS: segments } }) as AppConfig;

const offload = (segment: number, priority = 0): SegmentRef => ({ priority, segment, from: 'offload', purpose: 'use' });
const state = (segment: number, priority = 0): SegmentRef => ({ priority, segment, from: 'state', purpose: 'use' });
const segmentOf = (key: string): number => Number(/_seg_(\d+)_/.exec(key)![1]);

/** A read ahead over a store and a table that record what they were asked; the store's segments in `failing` fail, those in `missing` are not there. */
function readAhead(options: { failing?: number[]; missing?: number[]; rows?: Record<string, SegmentEntry[]> } = {}) {
  const storeLoads: number[] = [];
  const rowReads: string[][] = [];
  const store = {
    load: (_queueId: string, key: string) => {
      const segment = segmentOf(key);
      storeLoads.push(segment);
      if (options.failing?.includes(segment)) return Promise.reject(new Error('store down'));
      return Promise.resolve(options.missing?.includes(segment) ? undefined : { items: [`"${segment}"`] });
    },
  } as unknown as OffloadStore;
  const queueState = {
    loadSegments: (_queueId: string, segments: readonly { priority: number; segment: number }[]) => {
      rowReads.push(segments.map((s) => `${s.priority}:${s.segment}`));
      return Promise.resolve(new Map(Object.entries(options.rows ?? {})));
    },
  } as unknown as QueueStateRepository;
  const stats = new OffloadStats();
  return { ahead: new SegmentReadAhead(readAheadConfig(READ_AHEAD_SEGMENTS), store, queueState, stats), storeLoads, rowReads, stats };
}

const core = (present = true): QueueCore => ({ isPresent: present }) as unknown as QueueCore;
const take = (a: SegmentReadAhead, c: QueueCore, ref: SegmentRef): Promise<SegmentFetch | undefined> | undefined => a.take(c, ref);
const rowsWritten = (segments: number[]): TurnWrite =>
  ({ inserts: segments.map((segment) => ({ priority: 0, segment, position: 0, json: '1' })), deletes: [] }) as unknown as TurnWrite;

describe('SegmentReadAhead', () => {
  it('reads the store segment and the table rows of every upcoming segment (the rows in one query); each read serves one turn', async () => {
    const { ahead, storeLoads, rowReads } = readAhead({ rows: { '0:4': [{ position: 3, json: '"back"' }] } });
    const c = core();
    expect(take(ahead, c, offload(3)), 'nothing read yet').toBeUndefined();
    ahead.committed('q', c, [offload(3), offload(4)], undefined, []);
    expect(storeLoads).toEqual([3, 4]);
    expect(rowReads).toEqual([['0:3', '0:4']]);
    expect(await take(ahead, c, offload(3))).toEqual({ entries: [{ position: 0, json: '"3"' }] });
    expect(await take(ahead, c, state(3)), 'no rows: an empty segment of the table').toEqual({ entries: [] });
    expect(take(ahead, c, offload(3)), 'taken already').toBeUndefined();
    // Asked again while read: nothing is read twice.
    ahead.committed('q', c, [offload(4), offload(5)], undefined, []);
    expect(storeLoads).toEqual([3, 4, 5]);
    expect(rowReads).toEqual([['0:3', '0:4'], ['0:5']]);
    expect(await take(ahead, c, state(4))).toEqual({ entries: [{ position: 3, json: '"back"' }] });
  });

  it('forgets what a committed turn changed: rows it wrote, segments it saved or deleted', async () => {
    const { ahead, storeLoads, rowReads } = readAhead();
    const c = core();
    ahead.committed('q', c, [offload(3), offload(4), offload(5)], undefined, []);
    ahead.committed('q', c, [], rowsWritten([4]), [{ priority: 0, segment: 5 }]);
    expect(take(ahead, c, state(4)), 'its rows were written').toBeUndefined();
    expect(take(ahead, c, offload(5)), 'saved or deleted in the store').toBeUndefined();
    // The next commit reads again what was forgotten, and only that.
    ahead.committed('q', c, [offload(3), offload(4), offload(5)], undefined, []);
    expect(storeLoads).toEqual([3, 4, 5, 5]);
    expect(rowReads).toEqual([['0:3', '0:4', '0:5'], ['0:4']]);
    expect(await take(ahead, c, offload(4)), 'its stored copy was kept').toEqual({ entries: [{ position: 0, json: '"4"' }] });
    // Rows of several segments, a segment's rows together: each segment's read goes.
    ahead.committed('q', c, [], rowsWritten([3, 3, 4, 4, 5]), []);
    expect(take(ahead, c, state(3))).toBeUndefined();
    expect(take(ahead, c, state(5))).toBeUndefined();
  });

  it('belongs to the core it was read for, and goes with a deleted queue', () => {
    const { ahead } = readAhead();
    const c = core();
    ahead.committed('q', c, [offload(3)], undefined, []);
    expect(take(ahead, core(), offload(3)), 'a core loaded again (another process changed the queue) has none').toBeUndefined();
    ahead.committed('q', core(false), [], undefined, []);
    expect(take(ahead, c, offload(3))).toBeDefined();
    const deleted = { isPresent: true } as { isPresent: boolean };
    ahead.committed('q', deleted as unknown as QueueCore, [offload(3)], undefined, []);
    deleted.isPresent = false;
    ahead.committed('q', deleted as unknown as QueueCore, [], undefined, []);
    expect(take(ahead, deleted as unknown as QueueCore, offload(3))).toBeUndefined();
  });

  it('gives nothing for a store read that failed (counted as a failed load) or found nothing, so that the turn reads itself', async () => {
    const { ahead, stats } = readAhead({ failing: [3], missing: [4] });
    const c = core();
    ahead.committed('q', c, [offload(3), offload(4)], undefined, []);
    expect(await take(ahead, c, offload(3))).toBeUndefined();
    expect(await take(ahead, c, offload(4))).toBeUndefined();
    expect(await take(ahead, c, state(4)), 'the rows were read').toEqual({ entries: [] });
    expect(stats.loadFailures, 'the store failed once; finding nothing is not a failure of the store').toBe(1);
  });

  it('reads at most a bounded number of segments for one actor', () => {
    const { ahead, storeLoads } = readAhead();
    const c = core();
    const many = Array.from({ length: 10 }, (_, priority) => Array.from({ length: READ_AHEAD_SEGMENTS }, (_, s) => offload(10 + s, priority))).flat();
    ahead.committed('q', c, many, undefined, []);
    expect(storeLoads.length).toBe(4 * READ_AHEAD_SEGMENTS);
  });
});
