import { describe, expect, it } from 'vitest';
import { QueueCore } from './queue-core.js';
import { endTurn, FakeDb, item, items, SETTINGS, withFetch } from '../../../test/support/core-fake-db.js';

describe('QueueCore', () => {
  describe('offloading', () => {
    it('after pushes the full middle segments past the buffer move out; pops load them back as the head approaches', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push(
        Array.from({ length: 14 }, (_, n) => item(0, n)),
        0,
        0,
      );
      endTurn(db, core);
      // segments 0..4 of 3 items (the tail 4 holds 2): 0 head, 1 buffer, 2..3 offloaded.
      expect(core.meta(0)).toMatchObject({ head_segment: 0, tail_segment: 4, head_offloaded_segment: 2, tail_offloaded_segment: 3 });
      expect([...db.store.keys()].sort()).toEqual(['0:2', '0:3']);
      expect(db.rows.get('0:2')?.size ?? 0).toBe(0);
      expect(core.cachedSegments(0)).toEqual([0, 1, 4]);

      expect(items(withFetch(db, core, () => core.pop(3, 0)))).toHaveLength(3);
      endTurn(db, core);
      // The head moved to 1: segment 2 came into the buffer and is back in the table.
      expect(core.meta(0)).toMatchObject({ head_segment: 1, head_offloaded_segment: 3, tail_offloaded_segment: 3 });
      expect([...db.store.keys()]).toEqual(['0:3']);
      expect(db.stored(0)).toEqual(Array.from({ length: 11 }, (_, n) => item(0, n + 3).json));
    });

    it('a store that cannot be read: a pop takes what it can reach and then answers unavailable; nothing is lost', () => {
      const db = new FakeDb();
      const core = QueueCore.absent({ segmentSize: 2, bufferSegments: 1 });
      core.push(
        Array.from({ length: 10 }, (_, n) => item(0, n)),
        0,
        0,
      );
      endTurn(db, core);
      expect(core.meta(0)).toMatchObject({ head_offloaded_segment: 2, tail_offloaded_segment: 3 });
      db.storeFails = (op) => op === 'load';
      const first = withFetch(db, core, () => core.pop(10, 0));
      expect(items(first)).toEqual([0, 1, 2, 3].map((n) => item(0, n).json));
      endTurn(db, core);
      expect(core.meta(0)).toMatchObject({ head_segment: 2, head_offloaded_segment: 2 });
      expect(withFetch(db, core, () => core.pop(1, 0))).toEqual({ unavailable: { priority: 0, segment: 2 } });
      endTurn(db, core);
      db.storeFails = () => false;
      expect(items(withFetch(db, core, () => core.pop(10, 0)))).toEqual([4, 5, 6, 7, 8, 9].map((n) => item(0, n).json));
    });

    it('a lock released while the head could not be loaded back: its items come first once the store works', () => {
      const db = new FakeDb();
      const core = QueueCore.absent({ segmentSize: 2, bufferSegments: 1 });
      core.push(
        Array.from({ length: 10 }, (_, n) => item(0, n)),
        0,
        0,
      );
      endTurn(db, core);
      db.storeFails = (op) => op === 'load';
      const popped = withFetch(db, core, () => core.pop(4, 0, { lockId: 'L', ttlMs: 1000 }));
      expect(items(popped)).toHaveLength(4);
      endTurn(db, core);
      expect(core.meta(0)).toMatchObject({ head_segment: 2, head_offloaded_segment: 2 });
      withFetch(db, core, () => core.release('L', 0));
      endTurn(db, core);
      db.storeFails = () => false;
      const fresh = db.load({ segmentSize: 2, bufferSegments: 1 });
      expect(items(withFetch(db, fresh, () => fresh.pop(10, 0)))).toEqual(Array.from({ length: 10 }, (_, n) => item(0, n).json));
    });

    it('saves that fail leave the segments in the table; the range stays contiguous', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      db.storeFails = (op) => op === 'save';
      core.push(
        Array.from({ length: 14 }, (_, n) => item(0, n)),
        0,
        0,
      );
      endTurn(db, core);
      expect(core.meta(0)).toMatchObject({ head_offloaded_segment: null });
      db.storeFails = () => false;
      core.push([item(0, 14)], 0, 0);
      endTurn(db, core);
      expect(core.meta(0)).toMatchObject({ head_offloaded_segment: 2, tail_offloaded_segment: 3 });
      expect(db.stored(0)).toEqual(Array.from({ length: 15 }, (_, n) => item(0, n).json));
    });
  });
});
