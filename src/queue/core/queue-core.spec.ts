import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { QueueCore } from './queue-core.js';
import { Needed } from './types.js';
import { FIRST_POSITION, WHOLE_SEGMENT } from './write-set.js';
import { endTurn, expectConsistent, FakeDb, item, items, Model, SETTINGS, withFetch } from '../../../test/support/core-fake-db.js';

describe('QueueCore', () => {
  it('a new queue: pops find nothing and write nothing; the first push creates it at the version given', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    expect(core.pop(5, 0)).toEqual({ items: [] });
    expect(core.view()).toBeUndefined();
    expect(endTurn(db, core)).toBeUndefined();
    core.push([item(0, 1)], 0, 0);
    const write = endTurn(db, core)!;
    expect(write).toMatchObject({ expectedVersion: null, newVersion: 1000, itemCount: 1, deleteQueue: false });
    expect(write.inserts).toEqual([{ priority: 0, segment: 0, position: 0, json: item(0, 1).json }]);
    expect(core.version).toBe(1000);
    core.push([item(0, 2)], 0, 0);
    expect(endTurn(db, core)).toMatchObject({ expectedVersion: 1000, newVersion: 1001 });
  });

  it('pops lowest priority first, FIFO within a priority, spilling over segments and priorities', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    core.push([item(2, 0), item(1, 0), item(1, 1), item(1, 2), item(1, 3), item(2, 1)], 0, 0);
    endTurn(db, core);
    expect(core.meta(1)).toMatchObject({ head_segment: 0, tail_segment: 1, count: 4, next_position: 1 });
    expect(items(core.pop(5, 0))).toEqual([item(1, 0), item(1, 1), item(1, 2), item(1, 3), item(2, 0)].map((i) => i.json));
    expect(core.meta(1)).toBeUndefined();
    expect(core.meta(2)).toMatchObject({ count: 1, head_position: 1 });
    const write = endTurn(db, core)!;
    expect(write.deletes).toEqual(
      expect.arrayContaining([
        { priority: 1, segment: 0, from: FIRST_POSITION, through: WHOLE_SEGMENT },
        { priority: 1, segment: 1, from: FIRST_POSITION, through: WHOLE_SEGMENT },
        { priority: 2, segment: 0, from: 0, through: 0 },
      ]),
    );
    expect(db.stored(2)).toEqual([item(2, 1).json]);
  });

  it('an item pushed and popped in the same turn never reaches the table', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    core.push([item(0, 0)], 0, 0);
    endTurn(db, core);
    core.push([item(0, 1), item(0, 2)], 0, 0);
    expect(items(core.pop(2, 0))).toEqual([item(0, 0).json, item(0, 1).json]);
    const write = endTurn(db, core)!;
    expect(write.inserts).toEqual([{ priority: 0, segment: 0, position: 2, json: item(0, 2).json }]);
    expect(write.deletes).toEqual([{ priority: 0, segment: 0, from: 0, through: 1 }]);
    expect(db.stored(0)).toEqual([item(0, 2).json]);
  });

  it('a priority emptied and refilled in one turn reuses segment 0 and position 0: deletes apply before inserts', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    core.push([item(0, 0)], 0, 0);
    endTurn(db, core);
    expect(items(core.pop(1, 0))).toEqual([item(0, 0).json]);
    core.push([item(0, 1)], 0, 0);
    const write = endTurn(db, core)!;
    expect(write.deletes).toEqual([{ priority: 0, segment: 0, from: FIRST_POSITION, through: WHOLE_SEGMENT }]);
    expect(write.inserts).toEqual([{ priority: 0, segment: 0, position: 0, json: item(0, 1).json }]);
    expect(db.stored(0)).toEqual([item(0, 1).json]);
  });

  it('a freshly activated core asks for the segments a pop needs, once, and pops the same items', () => {
    const db = new FakeDb();
    const first = QueueCore.absent(SETTINGS);
    first.push(
      [0, 1, 2, 3, 4].map((n) => item(0, n)),
      0,
      0,
    );
    endTurn(db, first);
    const core = db.load();
    expect(core.pop(4, 0), 'both segments at once, returned rather than thrown').toEqual(
      new Needed({
        segments: [
          { priority: 0, segment: 0, from: 'state', purpose: 'use' },
          { priority: 0, segment: 1, from: 'state', purpose: 'use' },
        ],
      }),
    );
    expect(core.count, 'nothing changed by the refused attempt').toBe(5);
    expect(items(withFetch(db, core, () => core.pop(4, 0)))).toEqual([0, 1, 2, 3].map((n) => item(0, n).json));
  });

  it('pushing to a tail it does not hold, then reading that segment in the same turn, sees the pushed items', () => {
    const db = new FakeDb();
    const first = QueueCore.absent(SETTINGS);
    first.push([item(0, 0)], 0, 0);
    endTurn(db, first);
    const core = db.load();
    core.push([item(0, 1)], 0, 0);
    expect(items(withFetch(db, core, () => core.pop(2, 0)))).toEqual([item(0, 0).json, item(0, 1).json]);
    endTurn(db, core);
    expect(db.stored(0)).toEqual([]);
  });

  it('deleteQueue counts waiting and locked items, and lists the offloaded segments for the store', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    core.push(
      Array.from({ length: 14 }, (_, n) => item(0, n)),
      0,
      0,
    );
    endTurn(db, core);
    core.pop(2, 0, { lockId: 'L', ttlMs: 1000 });
    endTurn(db, core);
    expect(core.deleteQueue()).toBe(14);
    expect(core.storeDeletes()).toEqual([
      { priority: 0, segment: 2 },
      { priority: 0, segment: 3 },
    ]);
    expect(core.pendingWrite(() => 1)).toMatchObject({ deleteQueue: true });
    endTurn(db, core);
    expect(db.store.size).toBe(0);
    expect(core.isPresent).toBe(false);
    expect(QueueCore.absent(SETTINGS).deleteQueue()).toBeUndefined();
  });

  it('offload.upcoming names the offloaded segments the next turns load back, past the buffer, only where the turn popped', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    core.push(
      Array.from({ length: 30 }, (_, n) => item(0, n)),
      0,
      0,
    );
    core.push([item(1, 0)], 0, 0);
    expect(core.offload.upcoming(3), 'a turn of pushes pops nothing: nothing to read ahead').toEqual([]);
    endTurn(db, core);
    expect(core.meta(0)).toMatchObject({ head_segment: 0, head_offloaded_segment: 2, tail_offloaded_segment: 8, tail_segment: 9 });
    expect(items(core.pop(3, 0))).toEqual([0, 1, 2].map((n) => item(0, n).json));
    withFetch(db, core, () => core.offload.loadBack());
    const offload = (segment: number) => ({ priority: 0, segment, from: 'offload', purpose: 'use' });
    // Segment 2 came back with this turn; 3, 4 and 5 come within the buffer as the head moves on.
    expect(core.offload.upcoming(3)).toEqual([offload(3), offload(4), offload(5)]);
    expect(core.offload.upcoming(1)).toEqual([offload(3)]);
    endTurn(db, core);
    // Near the top of the offloaded range it stops there.
    for (let turn = 0; turn < 5; turn++) {
      core.pop(3, 0);
      endTurn(db, core);
    }
    expect(core.meta(0)).toMatchObject({ head_segment: 6, head_offloaded_segment: 8, tail_offloaded_segment: 8 });
    core.pop(1, 0);
    withFetch(db, core, () => core.offload.loadBack());
    expect(core.offload.upcoming(3)).toEqual([offload(8)]);
    endTurn(db, core);
  });

  /**
   * Random operations over a few priorities with tiny segments, random reactivation (a fresh
   * core from the stored record) and random store failures: after every turn the stored queue
   * equals the model and memory holds only the window.
   */
  it('agrees with the model under random operations, reactivations and store failures (property)', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('push' as const), priorities: fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 1, maxLength: 12 }) }),
      fc.record({ kind: fc.constant('pop' as const), depth: fc.integer({ min: 1, max: 9 }), ack: fc.boolean() }),
      fc.record({ kind: fc.constantFrom('ack' as const, 'release' as const, 'expire' as const, 'reload' as const, 'flaky' as const, 'steady' as const) }),
    );
    fc.assert(
      fc.property(fc.array(fc.array(op, { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 40 }), (turns) => {
        const db = new FakeDb();
        const model = new Model();
        let core = QueueCore.absent(SETTINGS);
        let n = 0;
        let now = 0;
        let flaky = false;
        let everFlaky = false;
        let calls = 0;
        db.storeFails = () => flaky && ++calls % 2 === 0;
        for (const [t, ops] of turns.entries()) {
          for (const o of ops) {
            const label = `turn ${t} ${JSON.stringify(o)}`;
            if (o.kind === 'push') {
              const pushed = o.priorities.map((p) => item(p, n++));
              core.push(pushed, 0, 0);
              pushed.forEach((i) => model.push(i));
            } else if (o.kind === 'pop') {
              const outcome = withFetch(db, core, () => core.pop(o.depth, now, o.ack ? { lockId: `L${n++}`, ttlMs: 5 } : undefined));
              if ('locked' in outcome) {
                expect(model.lock, label).toBeDefined();
                continue;
              }
              expect(model.lock, label).toBeUndefined();
              if ('unavailable' in outcome || 'busy' in outcome) continue;
              // No lock per item is asked for here: an exclusive-mode queue never refuses this pop.
              if ('perItemRefused' in outcome) throw new Error(`${label}: a pop without locks per item refused as one`);
              const expected = model.pop(outcome.items.length);
              // Items carry where they were pushed and their deliveries besides; the model knows priority and JSON.
              expect(
                outcome.items.map(({ priority, json }) => ({ priority, json })),
                label,
              ).toEqual(expected);
              // Short only when a segment could not be loaded.
              if (outcome.items.length < o.depth && model.count() > 0) expect(flaky, `${label}: short pop without a failure`).toBe(true);
              if (outcome.lock) model.lock = { id: outcome.lock.lockId, items: expected, expiresAt: outcome.lock.expiresAt };
            } else if (o.kind === 'ack' || o.kind === 'release') {
              const id = model.lock?.id ?? 'none';
              const result = withFetch(db, core, () => (o.kind === 'ack' ? core.acknowledge(id, 0) : core.release(id, 0)));
              if (!model.lock) expect(typeof result, label).toBe('string');
              else {
                expect(result, label).toBe(model.lock.items.length);
                if (o.kind === 'release') model.giveBack(model.lock.items);
                model.lock = undefined;
              }
            } else if (o.kind === 'expire') {
              now += 5;
              const returned = withFetch(db, core, () => core.expireLock(now));
              expect(returned, label).toBe(model.lock ? model.lock.items.length : undefined);
              if (model.lock) model.giveBack(model.lock.items);
              model.lock = undefined;
            } else if (o.kind === 'reload') {
              endTurn(db, core);
              core = db.load();
            } else {
              flaky = o.kind === 'flaky';
              // A load may fail from here on, even if the store steadies again later in the turn.
              everFlaky ||= flaky;
            }
          }
          endTurn(db, core);
          everFlaky ||= flaky;
          expectConsistent(db, core, model, `after turn ${t}`, everFlaky);
        }
      }),
      { numRuns: 300 },
    );
  });
});
