import { describe, expect, it } from 'vitest';
import { DelayedItems } from './delayed-items.js';
import { GivenBackItems } from './given-back-items.js';
import { PrioritySegments } from './priority-segments.js';
import { MAX_DUE_PER_TURN, QueueCore } from './queue-core.js';
import { TurnState, type CoreContext } from './turn-state.js';
import { Needed, type TurnWrite } from './types.js';
import { endTurn, FakeDb, item, items, SETTINGS, withFetch } from '../../../test/support/core-fake-db.js';

describe('QueueCore', () => {
  describe('delayed items', () => {
    const delayed = (priority: number, n: number, delayMs: number): { priority: number; json: string; delayMs: number } => ({ ...item(priority, n), delayMs });
    /** A turn as the runner runs it: due items first, then the operations, then the write (clock `now`). */
    const turn = <T>(
      db: FakeDb,
      core: QueueCore,
      now: number,
      fn: () => T = () => undefined as T,
    ): { result: T; moved: number | undefined; write: TurnWrite | undefined } => {
      const moved = withFetch(db, core, () => core.moveDueItems(now), now);
      const result = withFetch(db, core, fn, now);
      return { result, moved, write: endTurn(db, core) };
    };

    it('a delayed push is stored apart: not counted, not popped, not in any segment; the row carries the count and the earliest due time', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      expect(core.push([delayed(0, 1, 5000)], 1000, 0)).toEqual({ enqueued: 1, duplicates: 0 });
      expect(core.isPresent, 'a delayed push creates the queue').toBe(true);
      const write = endTurn(db, core)!;
      expect(write).toMatchObject({ expectedVersion: null, itemCount: 0, inserts: [], delayed: { count: 1, nextDueAt: 6000, nextSeq: 1 } });
      expect(write.delayedInserts).toEqual([{ dueAt: 6000, seq: 0, priority: 0, json: item(0, 1).json }]);
      expect(core.count).toBe(0);
      expect(core.view()).toMatchObject({ count: 0, delayed: 1 });
      expect(core.pop(5, 0)).toEqual({ items: [] });
      expect(db.stored(0)).toEqual([]);
    });

    it("a turn that neither puts items aside nor moves any leaves the row's delayed columns alone", () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push([item(0, 0)], 0, 0);
      expect(endTurn(db, core)!.delayed, 'a queue created without delayed items').toBeNull();
      core.push([delayed(0, 1, 5000)], 0, 0);
      expect(endTurn(db, core)!.delayed).toEqual({ count: 1, nextDueAt: 5000, nextSeq: 1 });
      core.push([item(0, 2)], 10, 0);
      core.pop(1, 0);
      expect(endTurn(db, core)!.delayed).toBeNull();
      expect(db.record!.delayed).toEqual({ count: 1, nextDueAt: 5000, nextSeq: 1 });
    });

    it('visibility boundary: not at due - 1 ms (and no read), at the due time exactly it joins its priority and the row forgets it', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push([delayed(0, 1, 5000)], 1000, 0);
      endTurn(db, core);
      expect(core.moveDueItems(5999), 'nothing due: no read').toBeUndefined();
      expect(core.pop(1, 0)).toEqual({ items: [] });
      expect(endTurn(db, core)).toBeUndefined();
      expect(core.moveDueItems(6000), 'due items asked for, not thrown').toEqual(new Needed({ due: { now: 6000, limit: MAX_DUE_PER_TURN } }));
      const { moved, result, write } = turn(db, core, 6000, () => core.pop(1, 0));
      expect(moved).toBe(1);
      expect(items(result)).toEqual([item(0, 1).json]);
      expect(write).toMatchObject({ delayedDeleteThrough: { dueAt: 6000, seq: 0 }, delayed: { count: 0, nextDueAt: null, nextSeq: 1 }, inserts: [] });
      expect(db.delayedRows).toEqual([]);
      expect(core.view()).toMatchObject({ count: 0, delayed: 0 });
    });

    it('due items join the tail of their priority after what is visible, in due-time order, ties in push order; later pushes come after them', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push([item(0, 0), delayed(0, 1, 3000), delayed(0, 2, 2000), delayed(1, 3, 2000), delayed(0, 4, 3000)], 0, 0);
      endTurn(db, core);
      core.push([delayed(0, 5, 1000), delayed(0, 6, 4000)], 1000, 0);
      endTurn(db, core);
      expect(core.view()).toMatchObject({ count: 1, delayed: 6 });
      // At 3500: due are 2 (2000, seq 1), 3 (2000, seq 2, priority 1), 5 (2000, seq 4), 1 (3000, seq 0), 4 (3000, seq 3).
      const { moved } = turn(db, core, 3500, () => core.push([item(0, 7)], 3500, 0));
      expect(moved).toBe(5);
      expect(db.stored(0)).toEqual([0, 2, 5, 1, 4, 7].map((n) => item(0, n).json));
      expect(db.stored(1)).toEqual([item(1, 3).json]);
      expect(core.view()).toMatchObject({ count: 7, delayed: 1 });
      expect(db.record!.delayed).toEqual({ count: 1, nextDueAt: 5000, nextSeq: 6 });
      turn(db, core, 5000);
      expect(db.stored(0)).toEqual([0, 2, 5, 1, 4, 7, 6].map((n) => item(0, n).json));
      expect(db.record!.delayed).toEqual({ count: 0, nextDueAt: null, nextSeq: 6 });
    });

    it('moved items fill segments like pushes: a full tail gets a successor, and full middle segments are offloaded', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push(
        Array.from({ length: 14 }, (_, n) => delayed(0, n, 1000)),
        0,
        0,
      );
      endTurn(db, core);
      turn(db, core, 1000);
      expect(core.meta(0)).toMatchObject({ count: 14, head_segment: 0, tail_segment: 4, head_offloaded_segment: 2, tail_offloaded_segment: 3 });
      expect(db.stored(0)).toEqual(Array.from({ length: 14 }, (_, n) => item(0, n).json));
    });

    it('a backlog of more due items than one turn moves: the rest stay due for the next turn, which moves them first (one read per turn)', () => {
      const db = new FakeDb();
      const core = QueueCore.absent({ segmentSize: 100, bufferSegments: 1 });
      core.push(
        Array.from({ length: MAX_DUE_PER_TURN + 5 }, (_, n) => delayed(0, n, 1000 + n)),
        0,
        0,
      );
      endTurn(db, core);
      expect(withFetch(db, core, () => core.moveDueItems(10_000))).toBe(MAX_DUE_PER_TURN);
      expect(core.hasDueItems(10_000), 'the runner gives the rest a turn of its own').toBe(true);
      expect(core.moveDueItems(10_000), 'no second read in the same turn: the table still holds the moved rows').toBeUndefined();
      endTurn(db, core);
      expect(db.record!.delayed).toEqual({ count: 5, nextDueAt: 1000 + MAX_DUE_PER_TURN, nextSeq: MAX_DUE_PER_TURN + 5 });
      expect(withFetch(db, core, () => core.moveDueItems(10_000))).toBe(5);
      expect(core.hasDueItems(10_000)).toBe(false);
      endTurn(db, core);
      expect(db.stored(0)).toEqual(Array.from({ length: MAX_DUE_PER_TURN + 5 }, (_, n) => item(0, n).json));
    });

    it('a reactivated core knows its delayed items from the row; sequence numbers go on; a turn that moves and pushes keeps the earliest due time', () => {
      const db = new FakeDb();
      const first = QueueCore.absent(SETTINGS);
      first.push([delayed(2, 0, 1000), delayed(2, 1, 9000)], 0, 0);
      endTurn(db, first);
      const core = db.load();
      expect(core.view()).toMatchObject({ count: 0, delayed: 2 });
      expect(core.nextDueAt).toBe(1000);
      turn(db, core, 1000, () => core.push([delayed(2, 2, 500)], 1000, 0));
      expect(db.record!.delayed).toEqual({ count: 2, nextDueAt: 1500, nextSeq: 3 });
      const again = db.load();
      turn(db, again, 9000);
      expect(db.stored(2)).toEqual([0, 2, 1].map((n) => item(2, n).json));
    });

    it('deleteQueue counts delayed items and forgets them; a queue pushed to again starts afresh', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push([item(0, 0), delayed(0, 1, 1000), delayed(1, 2, 1000)], 0, 0);
      endTurn(db, core);
      expect(core.deleteQueue()).toBe(3);
      endTurn(db, core);
      expect(db.delayedRows).toEqual([]);
      core.push([delayed(0, 3, 1000)], 10, 0);
      expect(endTurn(db, core)).toMatchObject({ expectedVersion: null, delayed: { count: 1, nextDueAt: 1010, nextSeq: 1 }, delayedInserts: [{ seq: 0 }] });
    });

    it('expired lock items go back to the front while due items join the tail, in the same turn', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push([item(0, 0), item(0, 1), delayed(0, 2, 5000)], 0, 0);
      endTurn(db, core);
      core.pop(1, 0, { lockId: 'L', ttlMs: 5000 });
      endTurn(db, core);
      turn(db, core, 5000, () => core.expireLock(5000));
      expect(db.stored(0)).toEqual([0, 1, 2].map((n) => item(0, n).json));
    });
  });
});

describe('DelayedItems', () => {
  /** The parts of one queue; `next()` starts a fresh turn. */
  const parts = (): { ctx: CoreContext; next: () => void; segments: PrioritySegments; delayed: DelayedItems; givenBack: GivenBackItems } => {
    let turn = new TurnState();
    const ctx: CoreContext = {
      settings: { ...SETTINGS, lockMode: 'shared', retryDelaySeconds: 5 },
      get turn() {
        return turn;
      },
      markPresent: () => undefined,
    };
    const segments = new PrioritySegments(ctx);
    const delayed = new DelayedItems(ctx, segments);
    // Made in order, nothing wired afterwards: the given-back items hold the delayed items, not the other way round.
    return { ctx, next: () => (turn = new TurnState()), segments, delayed, givenBack: new GivenBackItems(ctx, segments, delayed) };
  };

  it('moveDue asks for the due items by returning a need, then hands items given back (with an origin) to its caller instead of placing them', () => {
    const { ctx, next, segments, delayed } = parts();
    delayed.add(1000, 0, '"plain"');
    delayed.add(1000, 0, '"retried"', { origin: { segment: 0, position: 4 }, deliveries: 2 });
    const [plain, retried] = ctx.turn.writes.delayedInserts;
    next();
    expect(delayed.moveDue(999, 10), 'nothing due: no read').toBeUndefined();
    expect(delayed.moveDue(1000, 10)).toEqual(new Needed({ due: { now: 1000, limit: 10 } }));
    expect(delayed.size, 'nothing changed by asking').toBe(2);
    ctx.turn.dueFetch = { items: [plain, retried], nextDueAt: null };
    expect(delayed.moveDue(1000, 10)).toEqual({
      moved: 2,
      retried: [{ priority: 0, json: '"retried"', origin: { segment: 0, position: 4 }, deliveries: 2 }],
    });
    expect(segments.get(0)?.count, 'only the plain item joined the tail').toBe(1);
    expect(delayed.nextDueAt).toBeNull();
  });

  it('given-back items wait out their retry delay among the delayed items they were made with', () => {
    const { ctx, segments, delayed, givenBack } = parts();
    segments.append(0, '"x"');
    const outcome = givenBack.giveBack([{ priority: 0, json: '"x"', origin: { segment: 0, position: 0 }, deliveries: 1 }], true, { now: 100 });
    expect(outcome).toEqual({ returned: 1, deadLettered: 0, delayed: 1 });
    expect(delayed.nextDueAt).toBe(5100);
    expect(ctx.turn.writes.delayedInserts).toMatchObject([{ dueAt: 5100, json: '"x"', origin: { segment: 0, position: 0 } }]);
  });
});
