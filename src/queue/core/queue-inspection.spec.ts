import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { QueueCore } from './queue-core.js';
import type { SegmentRef } from './types.js';
import { answered, endTurn, FakeDb, item, items, Model, SETTINGS, withFetch } from '../../../test/support/core-fake-db.js';

describe('QueueCore', () => {
  it('lookupState: the metadata document, segments in state, offloaded segments, 404s', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    core.push(
      Array.from({ length: 14 }, (_, n) => item(0, n)),
      0,
      0,
    );
    endTurn(db, core);
    expect(core.lookupState('q', 'metadata')).toEqual({
      value: {
        config: { segment_size: 3, buffer_segments: 1 },
        queues: { queue_0: { metadata: { count: 14, head_segment: 0, tail_segment: 4, head_offloaded_segment: 2, tail_offloaded_segment: 3 } } },
      },
    });
    expect(core.lookupState('q', 'queue_0_seg_0')).toEqual({ value: [0, 1, 2].map((n) => ({ p: 0, n })) });
    expect(core.lookupState('q', 'queue_0_seg_2')).toBe('not-found');
    expect(core.lookupState('q', 'queue_0_seg_9')).toBe('not-found');
    expect(core.lookupState('q', 'offloaded_queue_0_seg_2_other'), "another queue's key").toBe('not-found');
    expect(withFetch(db, core, () => core.lookupState('q', 'offloaded_queue_0_seg_2_q'))).toEqual({ value: [6, 7, 8].map((n) => ({ p: 0, n })) });
    expect(withFetch(db, core, () => core.lookupState('q', 'offloaded_queue_0_seg_4_q'))).toBe('not-found');
    const fresh = db.load();
    expect(withFetch(db, fresh, () => fresh.lookupState('q', 'queue_0_seg_1'))).toEqual({ value: [3, 4, 5].map((n) => ({ p: 0, n })) });
    expect(endTurn(db, fresh), 'peeking writes nothing').toBeUndefined();
    expect(fresh.cachedSegments(0), 'and keeps nothing').toEqual([]);
  });

  it('view: counts of the head and tail segments follow from the pointers', () => {
    const core = QueueCore.absent(SETTINGS);
    core.push(
      Array.from({ length: 8 }, (_, n) => item(0, n)),
      0,
      0,
    );
    core.pop(1, 0);
    const view = answered(core.view())!;
    expect(view.count).toBe(7);
    expect(view.priorities.get(0)).toMatchObject({ head_segment: 0, tail_segment: 2, head_segment_count: 2, tail_segment_count: 2 });
  });
});

describe('snapshot: the committed queue as activating it reads it', () => {
  /** What a load of the stored queue gives: the record, and the rows of the lowest priority's head segment among those with items. */
  function loadedFront(db: FakeDb): { priority: number; segment: number; entries: { position: number; json: string }[] } | undefined {
    const priorities = Object.entries(db.record?.priorities ?? {})
      .filter(([, meta]) => meta.count > 0)
      .sort(([a], [b]) => Number(a) - Number(b));
    if (priorities.length === 0) return undefined;
    const [p, meta] = priorities[0];
    const ref: SegmentRef = { priority: Number(p), segment: meta.head_segment, from: 'state', purpose: 'use' };
    // A packed head keeps its popped items: the core leaves out those below the head's position when it adopts the rows.
    const entries = (db.fetch(ref) as { entries: { position: number; json: string }[] }).entries.filter((e) => e.position >= meta.head_position);
    return { priority: ref.priority, segment: ref.segment, entries };
  }

  it('after a push into an empty queue: the new version and the pushed rows, from which another core pops without a read', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    core.push([item(1, 0), item(0, 1), item(0, 2)], 0, 0);
    expect(core.snapshot(), 'not in the middle of a turn').toBeUndefined();
    endTurn(db, core);
    const snapshot = core.snapshot()!;
    expect(snapshot.record).toMatchObject({
      version: db.record!.version,
      priorities: db.record!.priorities,
      lock: null,
      delayed: { count: 0, nextDueAt: null },
    });
    expect(snapshot.front).toEqual({
      priority: 0,
      segment: 0,
      entries: [
        { position: 0, json: item(0, 1).json },
        { position: 1, json: item(0, 2).json },
      ],
    });

    const other = QueueCore.fromRecord(snapshot.record);
    other.provide({ ...snapshot.front, from: 'state', purpose: 'use' }, { entries: snapshot.front.entries });
    // No fetch: pop would throw MissingSegments if it needed one.
    expect(items(other.pop(2, 0))).toEqual([item(0, 1).json, item(0, 2).json]);
    expect(endTurn(db, other)).toMatchObject({ expectedVersion: snapshot.record.version });
    expect(db.stored(0)).toEqual([]);
    expect(db.stored(1)).toEqual([item(1, 0).json]);
  });

  it('is undefined for a queue memory does not hold entirely: locked, delayed items, front not in memory, nothing in the segments', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    expect(core.snapshot(), 'no row').toBeUndefined();
    core.push([item(0, 0), item(0, 1)], 0, 0);
    endTurn(db, core);
    expect(core.snapshot()).toBeDefined();
    expect(db.load().snapshot(), 'a reactivated core has not read its front segment').toBeUndefined();

    const lock = core.pop(1, 0, { lockId: 'L1', ttlMs: 1000 });
    expect('lock' in lock && lock.lock).toBeTruthy();
    endTurn(db, core);
    expect(core.snapshot(), 'an exclusive lock holds items').toBeUndefined();
    expect(core.acknowledge('L1', 0)).toBe(1);
    endTurn(db, core);
    expect(core.snapshot()).toBeDefined();

    core.push([{ ...item(0, 2), delayMs: 10_000 }], 0, 0);
    endTurn(db, core);
    expect(core.snapshot(), 'a delayed item').toBeUndefined();

    const empty = QueueCore.absent(SETTINGS);
    empty.push([item(0, 0)], 0, 0);
    const db2 = new FakeDb();
    endTurn(db2, empty);
    empty.pop(1, 0);
    endTurn(db2, empty);
    expect(empty.snapshot(), 'nothing in the segments').toBeUndefined();
  });

  /**
   * Random pushes, pops, locks and reactivations with tiny segments: whenever a snapshot is
   * given it is exactly what a load of the stored queue reads (record and front rows), and a
   * core activated from it pops every item in the model's order without a read.
   */
  it('is always exactly what a load would read (property)', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('push' as const), priorities: fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 1, maxLength: 8 }) }),
      fc.record({ kind: fc.constant('pop' as const), depth: fc.integer({ min: 1, max: 7 }), ack: fc.boolean() }),
      fc.record({ kind: fc.constantFrom('ack' as const, 'release' as const, 'reload' as const) }),
    );
    let given = 0;
    fc.assert(
      fc.property(fc.array(op, { minLength: 1, maxLength: 40 }), (ops) => {
        const db = new FakeDb();
        const model = new Model();
        let core = QueueCore.absent(SETTINGS);
        let n = 0;
        for (const o of ops) {
          if (o.kind === 'push') {
            const pushed = o.priorities.map((p) => item(p, n++));
            core.push(pushed, 0, 0);
            pushed.forEach((i) => model.push(i));
          } else if (o.kind === 'pop') {
            const outcome = withFetch(db, core, () => core.pop(o.depth, 0, o.ack ? { lockId: `L${n++}`, ttlMs: 1000 } : undefined));
            if ('items' in outcome) {
              const expected = model.pop(outcome.items.length);
              if (outcome.lock) model.lock = { id: outcome.lock.lockId, items: expected, expiresAt: outcome.lock.expiresAt };
            }
          } else if (o.kind === 'reload') {
            core = db.load();
          } else if (model.lock) {
            withFetch(db, core, () => (o.kind === 'ack' ? core.acknowledge(model.lock!.id, 0) : core.release(model.lock!.id, 0)));
            if (o.kind === 'release') model.giveBack(model.lock.items);
            model.lock = undefined;
          }
          endTurn(db, core);
          const snapshot = core.snapshot();
          if (!snapshot) continue;
          given += 1;
          expect(model.lock).toBeUndefined();
          expect(snapshot.record.version).toBe(db.record!.version);
          expect(snapshot.record.priorities).toEqual(db.record!.priorities);
          expect(snapshot.front.entries.map(({ position, json }) => ({ position, json }))).toEqual(loadedFront(db)!.entries);
          expect({ priority: snapshot.front.priority, segment: snapshot.front.segment }).toEqual({
            priority: loadedFront(db)!.priority,
            segment: loadedFront(db)!.segment,
          });
          const other = QueueCore.fromRecord(snapshot.record);
          other.provide(
            { priority: snapshot.front.priority, segment: snapshot.front.segment, from: 'state', purpose: 'use' },
            { entries: [...snapshot.front.entries] },
          );
          const all = withFetch(db, other, () => other.pop(1000, 0));
          expect('items' in all && all.items.map(({ priority, json }) => ({ priority, json }))).toEqual(
            [...model.lists.keys()].sort((a, b) => a - b).flatMap((p) => model.lists.get(p)!.map((json) => ({ priority: p, json }))),
          );
        }
      }),
      { numRuns: 300 },
    );
    expect(given, 'snapshots were given').toBeGreaterThan(100);
  });
});
