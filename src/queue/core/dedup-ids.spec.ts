import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { QueueCore } from './queue-core.js';
import { Needed, type HeldItem } from './types.js';
import { answered, endTurn, expectConsistent, FakeDb, item, items, Model, SETTINGS, withFetch } from '../../../test/support/core-fake-db.js';

describe('QueueCore', () => {
  describe('deduplication', () => {
    const WINDOW = 300_000;
    const withId = (n: number, dedupId: string, priority = 0): { priority: number; json: string; dedupId: string } => ({ ...item(priority, n), dedupId });

    it('a queue with no row reads nothing: the first push of an id is accepted and remembered until now + window', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      expect(core.push([withId(1, 'a')], 1000, WINDOW)).toEqual({ enqueued: 1, duplicates: 0 });
      expect(endTurn(db, core)!.dedupInserts).toEqual([{ dedupId: 'a', expiresAt: 1000 + WINDOW }]);
    });

    it("a repeat within the window is read as live, skipped, and writes nothing; at the window's end it is accepted again", () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push([withId(1, 'a')], 1000, WINDOW);
      endTurn(db, core);
      expect(core.push([withId(2, 'a')], 2000, WINDOW), 'checked in the database: returned, not thrown').toEqual(new Needed({ dedupIds: ['a'] }));
      expect(core.count, 'nothing changed by the refused attempt').toBe(1);
      expect(withFetch(db, core, () => core.push([withId(2, 'a')], 2000, WINDOW), 2000)).toEqual({ enqueued: 0, duplicates: 1 });
      expect(endTurn(db, core)).toBeUndefined();
      const last = 1000 + WINDOW - 1;
      expect(withFetch(db, core, () => core.push([withId(3, 'a')], last, WINDOW), last)).toEqual({ enqueued: 0, duplicates: 1 });
      endTurn(db, core);
      const end = 1000 + WINDOW;
      expect(withFetch(db, core, () => core.push([withId(4, 'a')], end, WINDOW), end)).toEqual({ enqueued: 1, duplicates: 0 });
      expect(endTurn(db, core)!.dedupInserts).toEqual([{ dedupId: 'a', expiresAt: end + WINDOW }]);
      expect(db.stored(0)).toEqual([item(0, 1).json, item(0, 4).json]);
    });

    it('inside one batch and across the operations of one turn: the first is accepted, repeats are skipped, without another read', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push([item(0, 0)], 0, 0);
      endTurn(db, core);
      // The runner checks every id of the turn first, with one read.
      let reads = 0;
      withFetch(db, core, () => {
        const needed = core.checkDedupIds(['a', 'b', 'a', 'c']);
        if (needed) {
          reads += 1;
          expect(needed.need).toEqual({ dedupIds: ['a', 'b', 'c'] });
        }
        return needed;
      });
      expect(reads).toBe(1);
      expect(core.push([withId(1, 'a'), withId(2, 'b', 1), withId(3, 'a'), item(0, 4)], 0, WINDOW)).toEqual({ enqueued: 3, duplicates: 1 });
      expect(core.push([withId(5, 'b'), withId(6, 'c')], 0, WINDOW)).toEqual({ enqueued: 1, duplicates: 1 });
      const write = endTurn(db, core)!;
      expect(write.dedupInserts.map((d) => d.dedupId)).toEqual(['a', 'b', 'c']);
      expect(db.stored(0)).toEqual([0, 1, 4, 6].map((n) => item(0, n).json));
      expect(db.stored(1)).toEqual([item(1, 2).json]);
    });

    it("a delayed item's id counts from its push: a repeat is skipped before the item is visible", () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push([{ ...withId(1, 'a'), delayMs: 60_000 }], 0, WINDOW);
      endTurn(db, core);
      expect(withFetch(db, core, () => core.push([withId(2, 'a')], 1000, WINDOW), 1000)).toEqual({ enqueued: 0, duplicates: 1 });
      expect(core.view()).toMatchObject({ count: 0, delayed: 1 });
    });

    it('two processes racing the same id: both accept it, only the first write applies; the second, redone on the stored queue, finds it live', () => {
      const db = new FakeDb();
      const seed = QueueCore.absent(SETTINGS);
      seed.push([item(0, 0)], 0, 0);
      endTurn(db, seed);
      const a = db.load();
      const b = db.load();
      withFetch(db, a, () => a.push([withId(1, 'x')], 10, WINDOW), 10);
      withFetch(db, b, () => b.push([withId(2, 'x')], 10, WINDOW), 10);
      endTurn(db, a);
      const losing = b.pendingWrite(() => 1)!;
      expect(losing.expectedVersion, 'the version check refuses it').not.toBe(db.record!.version);
      const redo = db.load();
      expect(withFetch(db, redo, () => redo.push([withId(2, 'x')], 11, WINDOW), 11)).toEqual({ enqueued: 0, duplicates: 1 });
      expect(endTurn(db, redo)).toBeUndefined();
      expect(db.stored(0)).toEqual([item(0, 0).json, item(0, 1).json]);
    });

    it('deleting the queue forgets its ids', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push([withId(1, 'a')], 0, WINDOW);
      endTurn(db, core);
      core.deleteQueue();
      endTurn(db, core);
      expect(db.dedup.size).toBe(0);
      expect(core.push([withId(2, 'a')], 1, WINDOW)).toEqual({ enqueued: 1, duplicates: 0 });
    });
  });

  /**
   * Random pushes (some delayed, some with dedup ids), pops and reactivations on a simulated
   * clock: after every turn the stored queue equals a model in which a delayed item joins its
   * priority's tail at the first turn at or after its due time (due order, ties in push order)
   * and an id is skipped while a push with it was accepted less than a window ago.
   */
  it('agrees with a model of delays and dedup ids under random turns on a simulated clock (property)', () => {
    const WINDOW = 10_000;
    const op = fc.oneof(
      fc.record({
        kind: fc.constant('push' as const),
        entries: fc.array(
          fc.record({
            priority: fc.integer({ min: 0, max: 2 }),
            delay: fc.oneof(
              fc.constant(0),
              fc.integer({ min: 1, max: 8 }).map((s) => s * 1000),
            ),
            id: fc.option(fc.constantFrom('a', 'b', 'c', 'd'), { nil: undefined }),
          }),
          { minLength: 1, maxLength: 6 },
        ),
      }),
      fc.record({ kind: fc.constant('pop' as const), depth: fc.integer({ min: 1, max: 6 }) }),
      fc.record({ kind: fc.constant('advance' as const), ms: fc.oneof(fc.integer({ min: 0, max: 3000 }), fc.constantFrom(1000, 5000, 10_000)) }),
      fc.record({ kind: fc.constant('reload' as const) }),
    );
    fc.assert(
      fc.property(fc.array(fc.array(op, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 40 }), (turns) => {
        const db = new FakeDb();
        const model = new Model();
        const waiting: { dueAt: number; seq: number; item: HeldItem }[] = [];
        const accepted = new Map<string, number>();
        let core = QueueCore.absent(SETTINGS);
        let now = 0;
        let n = 0;
        let seq = 0;
        for (const [t, ops] of turns.entries()) {
          // The turn starts by moving what is due (the model: everything due, in order).
          withFetch(db, core, () => core.moveDueItems(now), now);
          waiting.sort((x, y) => x.dueAt - y.dueAt || x.seq - y.seq);
          while (waiting.length > 0 && waiting[0].dueAt <= now) model.push(waiting.shift()!.item);
          for (const o of ops) {
            const label = `turn ${t} at ${now} ${JSON.stringify(o)}`;
            if (o.kind === 'push') {
              const entries = o.entries.map((e) => ({
                ...item(e.priority, n++),
                ...(e.delay ? { delayMs: e.delay } : {}),
                ...(e.id ? { dedupId: e.id } : {}),
              }));
              let enqueued = 0;
              for (const e of entries) {
                if (e.dedupId !== undefined && (accepted.get(e.dedupId) ?? -Infinity) > now) continue;
                if (e.dedupId !== undefined) accepted.set(e.dedupId, now + WINDOW);
                enqueued += 1;
                if (e.delayMs) waiting.push({ dueAt: now + e.delayMs, seq: seq++, item: e });
                else model.push(e);
              }
              const outcome = withFetch(db, core, () => core.push(entries, now, WINDOW), now);
              expect(outcome, label).toEqual({ enqueued, duplicates: entries.length - enqueued });
            } else if (o.kind === 'pop') {
              const outcome = withFetch(db, core, () => core.pop(o.depth, 0));
              expect(items(outcome), label).toEqual(model.pop(o.depth).map((i) => i.json));
            } else if (o.kind === 'advance') {
              // Time moves between turns only: within one turn every operation has the turn's now.
            } else {
              endTurn(db, core);
              core = db.load();
            }
          }
          endTurn(db, core);
          expectConsistent(db, core, model, `after turn ${t}`);
          expect(answered(core.view())?.delayed ?? 0, `after turn ${t}: delayed`).toBe(waiting.length);
          expect(
            [...db.delayedRows].sort((x, y) => x.dueAt - y.dueAt || x.seq - y.seq).map((d) => d.json),
            `after turn ${t}: stored delayed items`,
          ).toEqual([...waiting].sort((x, y) => x.dueAt - y.dueAt || x.seq - y.seq).map((w) => w.item.json));
          for (const o of ops) if (o.kind === 'advance') now += o.ms;
        }
      }),
      { numRuns: 300 },
    );
  });
});
