import { describe, expect, it } from 'vitest';
import { FIRST_POSITION, WHOLE_SEGMENT, WriteSet } from './write-set.js';
import type { LockState, SegmentEntry } from './types.js';

const entries = (...positions: number[]): SegmentEntry[] => positions.map((position) => ({ position, json: `{"p":${position}}` }));
const lock = (lockId: string): LockState => ({ lockId, state: 'active', createdAt: 0, expiresAt: 1000, items: [] });

describe('WriteSet', () => {
  it('starts empty, and every kind of change makes it non-empty', () => {
    expect(new WriteSet().isEmpty).toBe(true);
    const changes: ((w: WriteSet) => void)[] = [
      (w) => w.insert(0, 0, entries(0)),
      (w) => w.deleteRange(0, 0, 0, 0),
      (w) => (w.lock = { op: 'delete' }),
      (w) => w.delayedInserts.push({ priority: 0, json: '{}', dueAt: 1, seq: 1 }),
      (w) => (w.delayedDeleteThrough = { dueAt: 1, seq: 1 }),
      (w) => w.dedupInserts.push({ dedupId: 'a', expiresAt: 1 }),
      (w) => (w.sharedChanged = true),
      (w) => (w.settingsChanged = true),
      (w) => w.sharedLocks.set('L', null),
      (w) => w.addReturned(0, { segment: 0, position: 0, json: '{}', deliveries: 1 }),
      (w) => w.deadLetters.push({ priority: 0, json: '{}' }),
      (w) => w.pack(0, 1, entries(0)),
    ];
    for (const [i, change] of changes.entries()) {
      const w = new WriteSet();
      change(w);
      expect(w.isEmpty, `change ${i}`).toBe(false);
    }
  });

  it('an insert with no entries changes nothing', () => {
    const w = new WriteSet();
    w.insert(0, 0, []);
    expect(w.isEmpty).toBe(true);
    expect(w.insertRows()).toEqual([]);
  });

  it('inserts come out per segment in position order, the last write of a position winning, deliveries only when counted', () => {
    const w = new WriteSet();
    w.insert(1, 3, entries(5, 2));
    w.insert(0, 0, [{ position: 0, json: 'a', deliveries: 2 }]);
    w.insert(1, 3, [{ position: 2, json: 'b' }]);
    expect(w.insertRows()).toEqual([
      { priority: 1, segment: 3, position: 2, json: 'b' },
      { priority: 1, segment: 3, position: 5, json: '{"p":5}' },
      { priority: 0, segment: 0, position: 0, json: 'a', deliveries: 2 },
    ]);
    expect(w.pendingInserts(1, 3).map((e) => e.position)).toEqual([2, 5]);
    expect(w.pendingInserts(1, 4)).toEqual([]);
  });

  it("a delete drops the turn's own inserts at or below it; an insert after the delete survives", () => {
    const w = new WriteSet();
    w.insert(0, 0, entries(0, 1, 2, 3));
    w.deleteRange(0, 0, 0, 1);
    expect(w.pendingInserts(0, 0).map((e) => e.position)).toEqual([2, 3]);
    w.deleteRange(0, 0, 0, 3);
    expect(w.pendingInserts(0, 0)).toEqual([]);
    expect(w.insertRows()).toEqual([]);
    // Emptied and refilled in the same turn: deletes apply first, so the new row survives.
    w.insert(0, 0, entries(0));
    expect(w.deleteRows()).toEqual([{ priority: 0, segment: 0, from: 0, through: 3 }]);
    expect(w.insertRows()).toEqual([{ priority: 0, segment: 0, position: 0, json: '{"p":0}' }]);
  });

  it('deletes of one segment merge into one range; deletedThrough answers -Infinity for a segment not deleted', () => {
    const w = new WriteSet();
    expect(w.deletedThrough(0, 0)).toBe(-Infinity);
    w.deleteRange(0, 0, 4, 6);
    w.deleteRange(0, 0, 2, 5);
    w.deleteRange(2, 7, 0, 0);
    expect(w.deleteRows()).toEqual([
      { priority: 0, segment: 0, from: 2, through: 6 },
      { priority: 2, segment: 7, from: 0, through: 0 },
    ]);
    expect(w.deletedThrough(0, 0)).toBe(6);
    w.deleteSegment(0, 0);
    expect(w.deleteRows()[0]).toEqual({ priority: 0, segment: 0, from: FIRST_POSITION, through: WHOLE_SEGMENT });
  });

  it('an item given back and popped again in the same turn nets to nothing; one stored before the turn is deleted', () => {
    const w = new WriteSet();
    w.addReturned(0, { segment: 1, position: 4, json: 'x', deliveries: 1 });
    expect(w.pendingReturned(0)).toEqual({ removed: new Set(), added: [{ segment: 1, position: 4, json: 'x', deliveries: 1 }] });
    w.removeReturned(0, { segment: 1, position: 4 });
    expect(w.returnedRows()).toEqual({ inserts: [], deletes: [] });
    w.removeReturned(2, { segment: 0, position: 9 });
    expect(w.returnedRows()).toEqual({ inserts: [], deletes: [{ priority: 2, segment: 0, position: 9 }] });
    // Stored, popped, then given back again: the old row goes and the new one comes.
    w.addReturned(2, { segment: 0, position: 9, json: 'y', deliveries: 2 });
    expect(w.returnedRows()).toEqual({
      inserts: [{ priority: 2, segment: 0, position: 9, json: 'y', deliveries: 2 }],
      deletes: [{ priority: 2, segment: 0, position: 9 }],
    });
    expect(w.pendingReturned(2)).toEqual({ removed: new Set(['0:9']), added: [{ segment: 0, position: 9, json: 'y', deliveries: 2 }] });
    expect(w.pendingReturned(1)).toEqual({ removed: new Set(), added: [] });
  });

  it('shared-lock writes: the last write of a lock wins; none written reads as an empty map', () => {
    const w = new WriteSet();
    expect([...w.sharedLockWrites()]).toEqual([]);
    expect(w.isEmpty).toBe(true);
    w.sharedLocks.set('A', lock('A'));
    w.sharedLocks.set('B', lock('B'));
    w.sharedLocks.set('A', null);
    expect([...w.sharedLockWrites()]).toEqual([
      ['A', null],
      ['B', lock('B')],
    ]);
  });

  describe('pack', () => {
    it('a segment packed whole comes out as one packed segment with its items in order, tags only when some has them, never as rows', () => {
      const w = new WriteSet();
      w.pack(0, 4, entries(0, 1, 2));
      w.pack(2, 7, [
        { position: 0, json: 'a', headers: '{"h":"1"}' },
        { position: 1, json: 'b', from: 'q2' },
      ]);
      expect(w.packRows()).toEqual([
        { priority: 0, segment: 4, items: ['{"p":0}', '{"p":1}', '{"p":2}'] },
        { priority: 2, segment: 7, items: ['a', 'b'], from: [null, 'q2'], headers: ['{"h":"1"}', null] },
      ]);
      expect(w.insertRows()).toEqual([]);
      expect(w.pendingPacked(0, 4).map((e) => e.position)).toEqual([0, 1, 2]);
      expect(w.pendingPacked(0, 5)).toEqual([]);
      expect(w.pendingInserts(0, 4), 'not an insert').toEqual([]);
    });

    it('entries not at 0..n-1, with deliveries, or of a segment the turn deleted rows of are written as rows', () => {
      const gap = new WriteSet();
      gap.pack(0, 1, entries(0, 2));
      expect(gap.packRows()).toEqual([]);
      expect(gap.insertRows().map((r) => r.position)).toEqual([0, 2]);
      const shifted = new WriteSet();
      shifted.pack(0, 1, entries(1, 2));
      expect(shifted.packRows()).toEqual([]);
      expect(shifted.insertRows().map((r) => r.position)).toEqual([1, 2]);
      const delivered = new WriteSet();
      delivered.pack(0, 1, [{ position: 0, json: 'a', deliveries: 1 }]);
      expect(delivered.packRows()).toEqual([]);
      expect(delivered.insertRows()).toEqual([{ priority: 0, segment: 1, position: 0, json: 'a', deliveries: 1 }]);
      const afterDelete = new WriteSet();
      afterDelete.deleteSegment(0, 1);
      afterDelete.pack(0, 1, entries(0, 1));
      expect(afterDelete.packRows()).toEqual([]);
      expect(afterDelete.insertRows().map((r) => r.position)).toEqual([0, 1]);
    });

    it('an empty pack changes nothing', () => {
      const w = new WriteSet();
      w.pack(0, 0, []);
      expect(w.isEmpty).toBe(true);
      expect(w.packRows()).toEqual([]);
    });

    it('a delete of part of a pack leaves it whole (the head position says what is gone) but out of pendingPacked; through its last position drops it', () => {
      const w = new WriteSet();
      w.pack(0, 3, entries(0, 1, 2, 3));
      w.deleteRange(0, 3, 0, 1);
      expect(w.packRows()[0].items).toHaveLength(4);
      expect(w.pendingPacked(0, 3).map((e) => e.position)).toEqual([2, 3]);
      expect(w.deleteRows()).toEqual([{ priority: 0, segment: 3, from: 0, through: 1 }]);
      w.deleteRange(0, 3, 2, 3);
      expect(w.packRows(), 'every item popped in the turn').toEqual([]);
      expect(w.pendingPacked(0, 3)).toEqual([]);
      const whole = new WriteSet();
      whole.pack(1, 0, entries(0, 1));
      whole.deleteSegment(1, 0);
      expect(whole.packRows()).toEqual([]);
      expect(whole.deleteRows()).toEqual([{ priority: 1, segment: 0, from: FIRST_POSITION, through: WHOLE_SEGMENT }]);
    });

    it('a later pack of the same segment replaces the earlier one', () => {
      const w = new WriteSet();
      w.pack(0, 3, entries(0, 1));
      w.pack(0, 3, [{ position: 0, json: 'x' }]);
      expect(w.packRows()).toEqual([{ priority: 0, segment: 3, items: ['x'] }]);
    });
  });
});
