import { describe, expect, it } from 'vitest';
import { QueueCore } from './queue-core.js';
import type { DelayedItem, OrNeed, TurnWrite } from './types.js';
import { drive, type SyncRowReader } from './core-driver.js';
import { FakeDb, item, names, SETTINGS } from '../../../test/support/shared-locks-fake-db.js';

/**
 * Retry delays in the core (CONTRACT.md, "Retry delays"): items given back by expiry or release
 * wait among the delayed items, then go back to the front of their priority in push order.
 * Time is passed in; the fake database also keeps `delayed_items`.
 */
class DelayedDb extends FakeDb {
  delayed: DelayedItem[] = [];

  override readonly reader: SyncRowReader = {
    segments: (refs) => refs.map((ref) => this.fetch(ref)),
    dueItems: (now, limit) => {
      const due = this.delayed.filter((d) => d.dueAt <= now).slice(0, limit);
      const rest = this.delayed.filter((d) => !due.includes(d));
      return { items: due, nextDueAt: rest[0]?.dueAt ?? null };
    },
    liveDedupIds: () => new Set(),
    lockRows: (need) => this.fetchLockRows(need),
  };

  override apply(write: TurnWrite): void {
    super.apply(write);
    const through = write.delayedDeleteThrough;
    if (through) this.delayed = this.delayed.filter((d) => d.dueAt > through.dueAt || (d.dueAt === through.dueAt && d.seq > through.seq));
    this.delayed.push(...write.delayedInserts);
    this.delayed.sort((a, b) => a.dueAt - b.dueAt || a.seq - b.seq);
  }
}

const run = <T>(db: DelayedDb, core: QueueCore, fn: () => OrNeed<T>): T => drive(core, fn, db.reader, 1);

/** One turn as the runner runs it: due delayed items, expiries, the operation, then the write. */
function turn<T>(db: DelayedDb, core: QueueCore, now: number, fn: () => OrNeed<T> = () => undefined as T): T {
  run(db, core, () => core.moveDueItems(now));
  run(db, core, () => core.expireLock(now));
  run(db, core, () => core.expireSharedLocks(now));
  const result = run(db, core, fn);
  run(db, core, () => core.offload.loadBack());
  const moves = run(db, core, () => core.offload.plan());
  for (const m of moves) {
    db.store.set(`${m.priority}:${m.segment}`, [...m.items]);
    core.offload.offloaded(m.priority, m.segment);
  }
  const write = core.pendingWrite(() => 1000);
  if (write) db.apply(write);
  core.committed(write);
  return result;
}

function queue(mode: 'exclusive' | 'shared', settings: Parameters<QueueCore['updateSettings']>[0]): { db: DelayedDb; core: QueueCore } {
  const db = new DelayedDb();
  const core = QueueCore.absent(SETTINGS);
  turn(db, core, 0, () => core.updateSettings({ lockMode: mode, ...settings }));
  return { db, core };
}

const popAll = (db: DelayedDb, core: QueueCore, now: number): string[] => {
  const out = turn(db, core, now, () => core.pop(100, 0));
  return 'items' in out ? names(out.items) : [];
};
const popAck = (db: DelayedDb, core: QueueCore, now: number, depth: number, lockId: string, ttlMs = 60_000): string[] => {
  const out = turn(db, core, now, () => core.pop(depth, now, { lockId, ttlMs }));
  return 'items' in out ? names(out.items) : [];
};

describe.each(['exclusive', 'shared'] as const)('retry delays (%s lock mode)', (mode) => {
  it('no retry delay: given back at once, as before (the default)', () => {
    const { db, core } = queue(mode, {});
    turn(db, core, 0, () => core.push([item(0, 1), item(0, 2)], 0, 0));
    popAck(db, core, 0, 1, 'L');
    const released = turn(db, core, 10, () => core.releaseLock('L', 10));
    expect(released.outcome).toEqual({ returned: 1, deadLettered: 0, delayed: 0 });
    expect(core.delayedCount).toBe(0);
    expect(popAll(db, core, 10)).toEqual(['0.1', '0.2']);
  });

  it('fixed: a released item waits retry_delay_seconds, counted in delayed, not in count; then it is back at the front, ahead of undelivered items', () => {
    const { db, core } = queue(mode, { retryDelaySeconds: 5, retryBackoff: 'fixed' });
    turn(db, core, 0, () => core.push([item(0, 1), item(0, 2), item(0, 3)], 0, 0));
    expect(popAck(db, core, 0, 1, 'L')).toEqual(['0.1']);
    const released = turn(db, core, 1000, () => core.releaseLock('L', 1000));
    expect(released.outcome).toEqual({ returned: 1, deadLettered: 0, delayed: 1 });
    expect(core.delayedCount).toBe(1);
    expect(core.count).toBe(2);
    expect(core.nextDueAt).toBe(6000);
    // Before it is due: the undelivered items only.
    expect(names((turn(db, core, 5999, () => core.pop(1, 0)) as { items: [] }).items)).toEqual(['0.2']);
    turn(db, core, 6000);
    expect(core.delayedCount).toBe(0);
    expect(core.count).toBe(2);
    expect(popAll(db, core, 6000), 'back at the front, ahead of 0.3').toEqual(['0.1', '0.3']);
  });

  it('exponential: min(max, base × 2^(d−1)) by the delivery count, on expiry too', () => {
    const { db, core } = queue(mode, { retryDelaySeconds: 2, retryDelayMaxSeconds: 5 });
    turn(db, core, 0, () => core.push([item(0, 1)], 0, 0));
    let now = 0;
    const dueAfter: number[] = [];
    for (let d = 1; d <= 4; d++) {
      expect(popAck(db, core, now, 1, `L${d}`, 100)).toEqual(['0.1']);
      now += 100;
      turn(db, core, now); // the lock expires at now
      expect(core.delayedCount, `delivery ${d}: waiting`).toBe(1);
      dueAfter.push(core.nextDueAt! - now);
      now = core.nextDueAt!;
      turn(db, core, now);
      expect(core.count).toBe(1);
    }
    expect(dueAfter).toEqual([2000, 4000, 5000, 5000]);
  });

  it('release delay_seconds replaces the queue delay: 0 gives back at once, more delays even when the queue has none', () => {
    const { db, core } = queue(mode, { retryDelaySeconds: 30, retryBackoff: 'fixed' });
    turn(db, core, 0, () => core.push([item(0, 1), item(0, 2)], 0, 0));
    popAck(db, core, 0, 1, 'A');
    expect(turn(db, core, 0, () => core.releaseLock('A', 0, { delayMs: 0 })).outcome).toMatchObject({ delayed: 0 });
    expect(core.count).toBe(2);
    turn(db, core, 0, () => core.updateSettings({ retryDelaySeconds: 0 }));
    popAck(db, core, 0, 1, 'B');
    expect(turn(db, core, 0, () => core.releaseLock('B', 0, { delayMs: 3000 })).outcome).toMatchObject({ delayed: 1 });
    expect(core.nextDueAt).toBe(3000);
    expect(popAll(db, core, 2999)).toEqual(['0.2']);
    expect(popAll(db, core, 3000)).toEqual(['0.1']);
  });

  it('items of one lock due at different times each go back to their push-order place, over priorities', () => {
    const { db, core } = queue(mode, { retryDelaySeconds: 1 });
    turn(db, core, 0, () => core.push([item(0, 1), item(0, 2), item(1, 1), item(0, 3), item(0, 4), item(1, 2)], 0, 0));
    // 0.1 delivered twice before, so its delay is longer than 0.2's.
    popAck(db, core, 0, 1, 'A');
    turn(db, core, 0, () => core.releaseLock('A', 0, { delayMs: 0 }));
    expect(popAck(db, core, 0, 3, 'B')).toEqual(['0.1', '0.2', '0.3']);
    turn(db, core, 0, () => core.releaseLock('B', 0));
    // 0.1: d=2 → 2 s; 0.2, 0.3: d=1 → 1 s.
    expect(core.delayedCount).toBe(3);
    expect(popAll(db, core, 1000), '0.2 and 0.3 first, ahead of 0.4').toEqual(['0.2', '0.3', '0.4', '1.1', '1.2']);
    turn(db, core, 1500, () => core.push([item(0, 5)], 0, 0));
    expect(popAll(db, core, 2000), '0.1 ahead of what was pushed meanwhile').toEqual(['0.1', '0.5']);
    expect(core.delayedCount).toBe(0);
  });

  it('items of a priority the lock emptied keep its entry while they wait, and come back ahead of what was pushed meanwhile', () => {
    const { db, core } = queue(mode, { retryDelaySeconds: 1 });
    turn(db, core, 0, () => core.push([item(0, 1), item(0, 2), item(1, 1)], 0, 0));
    expect(popAck(db, core, 0, 3, 'A')).toEqual(['0.1', '0.2', '1.1']);
    turn(db, core, 0, () => core.releaseLock('A', 0));
    expect(core.meta(0), 'the entry stays, holding nothing but the wait').toMatchObject({ count: 0, retrying: 2 });
    expect(core.meta(1)).toMatchObject({ count: 0, retrying: 1 });
    turn(db, core, 500, () => core.push([item(0, 3), item(1, 2)], 0, 0));
    expect(core.count).toBe(2);
    turn(db, core, 1000);
    expect(core.meta(0)?.retrying).toBeUndefined();
    expect(popAll(db, core, 1000)).toEqual(['0.1', '0.2', '0.3', '1.1', '1.2']);
    expect(core.meta(0), 'the entry goes with the last item').toBeUndefined();
  });

  it("a lock that took a priority's last item keeps its entry: a push meanwhile continues after the item, never at its origin", () => {
    const { db, core } = queue(mode, { retryDelaySeconds: 1, retryBackoff: 'fixed' });
    turn(db, core, 0, () => core.push([item(0, 1)], 0, 0));
    expect(popAck(db, core, 0, 1, 'A', 1000)).toEqual(['0.1']);
    expect(core.meta(0), 'held by the lock, the entry stays').toMatchObject({ count: 0, held: 1, head_segment: 0, next_position: 1 });
    turn(db, core, 500, () => core.push([item(0, 2)], 0, 0));
    expect(core.meta(0)).toMatchObject({ count: 1, held: 1, head_position: 1, next_position: 2 });
    turn(db, core, 1000); // A expires: 0.1 waits until 2000
    expect(core.meta(0)).toMatchObject({ count: 1, retrying: 1 });
    expect(core.meta(0)?.held).toBeUndefined();
    turn(db, core, 2000);
    expect(popAll(db, core, 2000), 'back ahead of what was pushed meanwhile').toEqual(['0.1', '0.2']);
    expect(core.meta(0)).toBeUndefined();
  });

  // Regression (the service's property test, seeds -201364624 and -491019396): an exclusive lock
  // took a priority's last item and the priority's entry went; a push restarted it at (0, 0), the
  // origin of the locked item, so two items waiting out their retry delays came back with the
  // same origin: a duplicate key among the given-back items, and one of them lost.
  it('two items of one priority given back after a lock emptied it come back both, in push order', () => {
    const { db, core } = queue(mode, { retryDelaySeconds: 1, retryBackoff: 'fixed' });
    turn(db, core, 0, () => core.push([item(0, 1)], 0, 0));
    popAck(db, core, 0, 1, 'A', 1000);
    turn(db, core, 500, () => core.push([item(0, 2)], 0, 0));
    turn(db, core, 1000); // A expires: 0.1 due at 2000
    expect(popAck(db, core, 1000, 1, 'B', 60_000)).toEqual(['0.2']);
    expect(turn(db, core, 1000, () => core.releaseLock('B', 1000)).outcome).toMatchObject({ delayed: 1 });
    expect(core.delayedCount).toBe(2);
    turn(db, core, 2000); // both due at once
    expect(core.count).toBe(2);
    expect(db.returned.get(0)?.map((e) => [e.segment, e.position])).toEqual([
      [0, 0],
      [0, 1],
    ]);
    expect(popAll(db, core, 2000)).toEqual(['0.1', '0.2']);
    expect(core.meta(0)).toBeUndefined();
  });

  it('a lock acknowledged or released without a delay after a push ends its hold: the items in push order, the entry gone with the last', () => {
    const { db, core } = queue(mode, {});
    turn(db, core, 0, () => core.push([item(0, 1), item(0, 2)], 0, 0));
    popAck(db, core, 0, 2, 'A');
    turn(db, core, 0, () => core.push([item(0, 3)], 0, 0));
    expect(turn(db, core, 0, () => core.acknowledge('A', 0))).toBe(2);
    expect(core.meta(0)?.held).toBeUndefined();
    popAck(db, core, 0, 1, 'B');
    turn(db, core, 0, () => core.push([item(0, 4)], 0, 0));
    turn(db, core, 0, () => core.releaseLock('B', 0));
    expect(popAll(db, core, 0)).toEqual(['0.3', '0.4']);
    expect(core.meta(0)).toBeUndefined();
  });

  it('an item at max_deliveries is dead-lettered at once, never delayed', () => {
    const { db, core } = queue(mode, { retryDelaySeconds: 10, maxDeliveries: 1, deadLetterQueue: 'dead' });
    turn(db, core, 0, () => core.push([item(0, 1)], 0, 0));
    popAck(db, core, 0, 1, 'L');
    expect(turn(db, core, 0, () => core.releaseLock('L', 0)).outcome).toEqual({ returned: 0, deadLettered: 1, delayed: 0 });
    expect(core.delayedCount).toBe(0);
    expect(db.deadLetters.map((d) => names([d.item])[0])).toEqual(['0.1']);
  });

  it('delivery counts carry through the delay', () => {
    const { db, core } = queue(mode, { retryDelaySeconds: 1, retryBackoff: 'fixed' });
    turn(db, core, 0, () => core.push([item(0, 1)], 0, 0));
    popAck(db, core, 0, 1, 'A');
    turn(db, core, 0, () => core.releaseLock('A', 0));
    const again = turn(db, core, 1000, () => core.pop(1, 1000, { lockId: 'B', ttlMs: 1000 }));
    expect('items' in again && again.items.map((i) => i.deliveries)).toEqual([2]);
  });

  it('deleting the queue counts items waiting out a retry delay', () => {
    const { db, core } = queue(mode, { retryDelaySeconds: 10 });
    turn(db, core, 0, () => core.push([item(0, 1), item(0, 2)], 0, 0));
    popAck(db, core, 0, 1, 'L');
    turn(db, core, 0, () => core.releaseLock('L', 0));
    expect(core.deleteQueue()).toBe(2);
  });

  it('while paused, items come due and count, and stay invisible until the resume', () => {
    const { db, core } = queue(mode, { retryDelaySeconds: 1, retryBackoff: 'fixed' });
    turn(db, core, 0, () => core.push([item(0, 1)], 0, 0));
    popAck(db, core, 0, 1, 'L');
    turn(db, core, 0, () => core.releaseLock('L', 0));
    turn(db, core, 0, () => core.updateSettings({ paused: true }));
    turn(db, core, 1000);
    expect(core.count).toBe(1);
    expect(core.available).toBe(0);
    turn(db, core, 1000, () => core.updateSettings({ paused: false }));
    expect(popAll(db, core, 1000)).toEqual(['0.1']);
  });
});
