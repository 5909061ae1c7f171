import { describe, expect, it } from 'vitest';
import { drive } from './core-driver.js';
import { acknowledgeOp, applyOp, releaseOp } from './queue-ops.js';
import { QueueCore } from './queue-core.js';
import { Needed, type HeldItem, type LockState } from './types.js';
import { endTurn, FakeDb, heldOf, item, names, popAck, SETTINGS, sharedQueue, startTurn, turn, withFetch } from '../../../test/support/shared-locks-fake-db.js';

/**
 * Locks per item, batches of acknowledgements and releases, dead-lettering on release, and an
 * acknowledgement that pops the next items in the same turn (CONTRACT.md, fourth additions),
 * in the pure core against the fake database of shared locks.
 */

const push = (db: FakeDb, core: QueueCore, ...entries: HeldItem[]): void => {
  turn(db, core, 0, () => core.push(entries, 0, 0));
};

/** A pop at `now` with a lock per item (ids `<prefix>0`, `<prefix>1`, …). */
function popEach(db: FakeDb, core: QueueCore, now: number, depth: number, prefix: string, options: { ttlMs?: number; maxLocks?: number } = {}) {
  const itemLockIds = Array.from({ length: depth }, (_, i) => `${prefix}${i}`);
  return turn(db, core, now, () => core.pop(depth, now, { lockId: `${prefix}-unused`, ttlMs: options.ttlMs ?? 1000, maxLocks: options.maxLocks, itemLockIds }));
}

const locksOf = (outcome: ReturnType<QueueCore['pop']>): readonly LockState[] => {
  if (outcome instanceof Needed || !('items' in outcome) || !outcome.locks) throw new Error(`no locks: ${JSON.stringify(outcome)}`);
  return outcome.locks;
};

/** A shared queue with a dead-letter queue, holding `n` items of priority 0 and one of priority 2. */
function withDeadLetters(lockMode: 'shared' | 'exclusive' = 'shared'): { db: FakeDb; core: QueueCore } {
  const db = new FakeDb();
  const core = QueueCore.absent(SETTINGS);
  expect(core.updateSettings({ lockMode, deadLetterQueue: 'dead' })).toMatchObject({ deadLetterQueue: 'dead' });
  endTurn(db, core);
  push(db, core, item(0, 0), item(2, 1), item(0, 2));
  return { db, core };
}

describe('locks per item', () => {
  it('take each item under a lock of its own, with one expiry, counted as that many shared locks of one item', () => {
    const { db, core } = sharedQueue();
    push(db, core, item(1, 0), item(0, 1), item(0, 2), item(2, 3));
    const popped = popEach(db, core, 10, 3, 'P', { ttlMs: 500 });
    expect(names(heldOf(popped))).toEqual(['0.1', '0.2', '1.0']);
    const locks = locksOf(popped);
    expect(locks.map((l) => l.lockId)).toEqual(['P0', 'P1', 'P2']);
    expect(locks.map((l) => names(l.items))).toEqual([['0.1'], ['0.2'], ['1.0']]);
    expect(locks.every((l) => l.expiresAt === 510 && l.createdAt === 10 && l.state === 'active')).toBe(true);
    expect(heldOf(popped).map((i) => i.deliveries)).toEqual([1, 1, 1]);
    expect('lock' in popped && popped.lock).toBeFalsy();
    expect(core.sharedLocks).toEqual({ live: 3, items: 3, nextExpiry: 510 });
    expect(core.inFlight).toBe(3);
    expect([...db.locks.keys()].sort()).toEqual(['P0', 'P1', 'P2']);
    // Emptied priorities keep their entries while their items are held.
    expect(db.record!.priorities['0']).toMatchObject({ count: 0, held: 2 });
    expect(db.record!.priorities['1']).toMatchObject({ count: 0, held: 1 });
  });

  it('are refused on a queue in exclusive mode before anything else, taking nothing and writing nothing', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    push(db, core, item(0, 0));
    const version = db.record!.version;
    expect(popEach(db, core, 0, 2, 'X')).toEqual({ perItemRefused: true });
    expect(core.count).toBe(1);
    expect(db.record!.version).toBe(version);
    // Before paused too: the request is wrong whatever the queue's state.
    turn(db, core, 0, () => core.updateSettings({ paused: true }));
    expect(popEach(db, core, 0, 2, 'X')).toEqual({ perItemRefused: true });
  });

  it('take at most as many items as locks may still be made under maxLocks, then are refused as busy', () => {
    const { db, core } = sharedQueue();
    push(db, core, ...Array.from({ length: 8 }, (_, n) => item(0, n)));
    heldOf(popAck(db, core, 0, 2, 'A', 1000, 4));
    expect(names(heldOf(popEach(db, core, 0, 5, 'P', { maxLocks: 4 })))).toEqual(['0.2', '0.3', '0.4']);
    expect(core.sharedLocks.live).toBe(4);
    expect(popEach(db, core, 0, 5, 'Q', { maxLocks: 4 })).toEqual({ busy: true });
    expect(popAck(db, core, 0, 1, 'B', 1000, 4)).toEqual({ busy: true });
  });

  it('take no more items than lock ids were given, and no more than maxInFlight leaves room for', () => {
    const { db, core } = sharedQueue();
    push(db, core, ...Array.from({ length: 8 }, (_, n) => item(0, n)));
    const two = turn(db, core, 0, () => core.pop(5, 0, { lockId: 'x', ttlMs: 100, itemLockIds: ['a', 'b'] }));
    expect(locksOf(two).map((l) => l.lockId)).toEqual(['a', 'b']);
    turn(db, core, 0, () => core.updateSettings({ maxInFlight: 3 }));
    expect(names(heldOf(popEach(db, core, 0, 5, 'P')))).toEqual(['0.2']);
    expect(popEach(db, core, 0, 5, 'Q')).toEqual({ items: [], limited: 'in_flight' });
    turn(db, core, 0, () => core.updateSettings({ maxInFlight: null, paused: true }));
    expect(popEach(db, core, 0, 5, 'R')).toEqual({ items: [], paused: true });
  });

  it('are each acknowledged, released and expired on their own; a released or expired item goes back to its push-order place', () => {
    const { db, core } = sharedQueue();
    push(db, core, item(0, 0), item(0, 1), item(0, 2), item(0, 3));
    popEach(db, core, 0, 3, 'P', { ttlMs: 100 });
    expect(turn(db, core, 0, () => core.extendLock('P2', 0, 5000))).toMatchObject({ expiresAt: 5000 });
    expect(turn(db, core, 0, () => core.acknowledge('P1', 0))).toBe(1);
    expect(turn(db, core, 0, () => core.acknowledge('P1', 0))).toBe('LOCK_NOT_FOUND');
    // P0 expires by time; P2 was extended.
    turn(db, core, 200, () => undefined);
    expect(turn(db, core, 200, () => core.acknowledge('P0', 200))).toBe('LOCK_EXPIRED');
    expect(core.sharedLocks).toMatchObject({ live: 1, items: 1 });
    expect(turn(db, core, 200, () => core.release('P2', 200))).toBe(1);
    const rest = heldOf(turn(db, core, 200, () => core.pop(10, 200)));
    expect(names(rest)).toEqual(['0.0', '0.2', '0.3']);
    expect(rest.map((i) => i.deliveries ?? 0)).toEqual([1, 1, 0]);
    expect(core.sharedLocks).toEqual({ live: 0, items: 0, nextExpiry: null });
    expect(db.record!.priorities).toEqual({});
  });
});

describe('batches of acknowledgements and releases', () => {
  it('read the rows of all their locks with one read, and answer each lock in order as the single operation would', () => {
    const { db, core } = sharedQueue();
    push(db, core, item(0, 0), item(0, 1), item(0, 2), item(0, 3), item(0, 4));
    popEach(db, core, 0, 2, 'P', { ttlMs: 100 });
    heldOf(popAck(db, core, 0, 2, 'M', 1000));
    const fresh = db.load();
    const reads = db.reads.locks;
    // P0 expired by time (not yet given back: it answers 410 and goes back now), M holds two.
    const done = turn(db, fresh, 150, () => fresh.acknowledgeAll(['M', 'gone', 'P0', 'P1'], 150));
    expect(done).toEqual({ acknowledged: [2, 'LOCK_NOT_FOUND', 'LOCK_EXPIRED', 'LOCK_EXPIRED'] });
    expect(db.reads.locks - reads, 'one read for every lock of the batch').toBe(1);
    expect(fresh.sharedLocks).toEqual({ live: 0, items: 0, nextExpiry: null });
    expect(names(heldOf(turn(db, fresh, 150, () => fresh.pop(10, 150))))).toEqual(['0.0', '0.1', '0.4']);
  });

  it('a lock named twice in one batch is acknowledged once: the second answers as an acknowledged lock does', () => {
    const { db, core } = sharedQueue();
    push(db, core, item(0, 0));
    popEach(db, core, 0, 1, 'P');
    expect(turn(db, core, 0, () => core.acknowledgeAll(['P0', 'P0'], 0))).toEqual({ acknowledged: [1, 'LOCK_NOT_FOUND'] });
  });

  it('in exclusive mode: another id than the lock is INVALID_LOCK_ID and leaves it; the lock itself is acknowledged', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    push(db, core, item(0, 0), item(0, 1));
    heldOf(popAck(db, core, 0, 2, 'E'));
    expect(turn(db, core, 0, () => core.acknowledgeAll(['other', 'E', 'E'], 0))).toEqual({ acknowledged: ['INVALID_LOCK_ID', 2, 'LOCK_NOT_FOUND'] });
    expect(core.lock).toBeNull();
  });

  it('release each lock as the single release would: delays apply to all, refusals change nothing', () => {
    const { db, core } = sharedQueue();
    push(db, core, item(0, 0), item(0, 1), item(0, 2));
    popEach(db, core, 0, 3, 'P');
    const released = turn(db, core, 0, () => core.releaseAll(['P2', 'nope', 'P0'], 0, { delayMs: 5000 }));
    expect(released).toEqual([
      { returned: 1, outcome: { returned: 1, deadLettered: 0, delayed: 1 } },
      { returned: 'LOCK_NOT_FOUND' },
      { returned: 1, outcome: { returned: 1, deadLettered: 0, delayed: 1 } },
    ]);
    expect(core.delayedCount).toBe(2);
    expect(core.sharedLocks).toMatchObject({ live: 1, items: 1 });
  });

  it('as operations: declare their lock ids and weight, and the front when they pop after', () => {
    expect(acknowledgeOp(['a', 'b'])).toEqual({ kind: 'acknowledgeBatch', lockIds: ['a', 'b'], weight: 2 });
    const next = { depth: 3, ack: { lockId: 'n', ttlMs: 100 } };
    expect(acknowledgeOp(['a'], next)).toEqual({ kind: 'acknowledgeBatch', lockIds: ['a'], weight: 1 + next.depth, next, readsFront: true });
    expect(releaseOp(['a', 'b', 'c'], { deadLetter: true })).toEqual({ kind: 'releaseBatch', lockIds: ['a', 'b', 'c'], weight: 3, deadLetter: true });
    expect(JSON.parse(JSON.stringify(releaseOp(['a'], { delayMs: 0 })))).toEqual(releaseOp(['a'], { delayMs: 0 }));
  });

  it('the lock ids of a turn are read at once: checkLockIds names those not known yet, and nothing in exclusive mode', () => {
    const { db, core } = sharedQueue();
    push(db, core, item(0, 0), item(0, 1));
    popEach(db, core, 0, 2, 'P');
    const fresh = db.load();
    startTurn(db, fresh, 0);
    const need = fresh.checkLockIds(['P0', 'P1', 'P0']);
    expect(need).toEqual(new Needed({ lockRows: [{ kind: 'locks', ids: ['P0', 'P1'] }] }));
    withFetch(db, fresh, () => fresh.checkLockIds(['P0', 'P1']));
    expect(fresh.checkLockIds(['P0', 'P1'])).toBeUndefined();
    expect(applyOp(fresh, acknowledgeOp(['P0', 'P1']), 0), 'no read left to make').toEqual({ acknowledged: [1, 1] });
    endTurn(db, fresh);
    expect(QueueCore.absent(SETTINGS).checkLockIds(['x'])).toBeUndefined();
  });
});

describe('dead-lettering on release', () => {
  it('sends every item of the lock to the dead-letter queue at its priority, whatever its deliveries, and none back', () => {
    const { db, core } = withDeadLetters();
    heldOf(popAck(db, core, 0, 3, 'L'));
    const released = turn(db, core, 0, () => core.releaseLock('L', 0, { deadLetter: true }));
    expect(released).toEqual({ returned: 3, outcome: { returned: 0, deadLettered: 3, delayed: 0 } });
    expect(db.deadLetters.map((d) => d.queueId)).toEqual(['dead', 'dead', 'dead']);
    expect(names(db.deadLetters.map((d) => d.item))).toEqual(['0.0', '0.2', '2.1']);
    expect(db.deadLetters.map((d) => d.item.priority)).toEqual([0, 0, 2]);
    expect(core.count).toBe(0);
    expect(core.sharedLocks).toEqual({ live: 0, items: 0, nextExpiry: null });
    expect(db.record!.priorities).toEqual({});
  });

  it('in exclusive mode too, and for each lock of a batch', () => {
    const { db, core } = withDeadLetters('exclusive');
    heldOf(popAck(db, core, 0, 2, 'E'));
    expect(turn(db, core, 0, () => core.releaseAll(['E'], 0, { deadLetter: true }))).toEqual([
      { returned: 2, outcome: { returned: 0, deadLettered: 2, delayed: 0 } },
    ]);
    expect(names(db.deadLetters.map((d) => d.item))).toEqual(['0.0', '0.2']);
    expect(core.lock).toBeNull();
    expect(core.count).toBe(1);
  });

  it('is refused with NO_DEAD_LETTER_QUEUE after the lock checks on a queue without one; the lock stays', () => {
    const { db, core } = sharedQueue();
    push(db, core, item(0, 0));
    popEach(db, core, 0, 1, 'P');
    expect(turn(db, core, 0, () => core.releaseLock('P0', 0, { deadLetter: true }))).toEqual({ returned: 'NO_DEAD_LETTER_QUEUE' });
    expect(turn(db, core, 0, () => core.releaseLock('gone', 0, { deadLetter: true }))).toEqual({ returned: 'LOCK_NOT_FOUND' });
    expect(core.sharedLocks).toMatchObject({ live: 1, items: 1 });
    expect(db.deadLetters).toEqual([]);
    expect(turn(db, core, 0, () => core.acknowledge('P0', 0))).toBe(1);
  });
});

describe('acknowledge, then pop the next', () => {
  it('acknowledges and pops in one turn: one write ends the old lock and makes the new one (exclusive mode: no 423)', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    push(db, core, item(0, 0), item(0, 1), item(0, 2));
    heldOf(popAck(db, core, 0, 1, 'A'));
    startTurn(db, core, 0);
    const done = withFetch(db, core, () => core.acknowledgeAll(['A'], 0, { depth: 2, ack: { lockId: 'B', ttlMs: 100 } }));
    expect(done.acknowledged).toEqual([1]);
    expect(names(heldOf(done.next!))).toEqual(['0.1', '0.2']);
    const write = endTurn(db, core);
    expect(write!.lock).toMatchObject({ op: 'upsert', lock: { lockId: 'B' } });
    expect(core.lock).toMatchObject({ lockId: 'B', state: 'active' });
  });

  it('a pop that must read first does not acknowledge twice when the call is made again', () => {
    const { db, core } = sharedQueue();
    push(db, core, ...Array.from({ length: 7 }, (_, n) => item(0, n)));
    popEach(db, core, 0, 1, 'P');
    // Nothing in memory: the acknowledgement reads its lock, then the pop reads its segments.
    const fresh = db.load();
    startTurn(db, fresh, 0);
    const next = { depth: 5, ack: { lockId: 'N', ttlMs: 100, itemLockIds: ['N0', 'N1', 'N2', 'N3', 'N4'] } };
    // The same lock id array on every call, as an operation's (the acknowledgements made are kept by it).
    const lockIds = ['P0'];
    const done = drive(fresh, () => fresh.acknowledgeAll(lockIds, 0, next), db.reader, 3);
    expect(done.acknowledged).toEqual([1]);
    expect(names(heldOf(done.next!))).toEqual(['0.1', '0.2', '0.3', '0.4', '0.5']);
    endTurn(db, fresh);
    expect(fresh.sharedLocks).toMatchObject({ live: 5, items: 5 });
    expect(db.locks.has('P0')).toBe(false);
  });

  it('pops nothing when no lock was acknowledged, and answers paused or limited as a pop does', () => {
    const { db, core } = sharedQueue();
    push(db, core, item(0, 0), item(0, 1), item(0, 2));
    popEach(db, core, 0, 2, 'P');
    const next = { depth: 1, ack: { lockId: 'N', ttlMs: 100 } };
    expect(turn(db, core, 0, () => core.acknowledgeAll(['gone'], 0, next))).toEqual({ acknowledged: ['LOCK_NOT_FOUND'] });
    expect(core.count).toBe(1);
    turn(db, core, 0, () => core.updateSettings({ maxInFlight: 1 }));
    expect(turn(db, core, 0, () => core.acknowledgeAll(['P0'], 0, next))).toEqual({ acknowledged: [1], next: { items: [], limited: 'in_flight' } });
    turn(db, core, 0, () => core.updateSettings({ maxInFlight: null, paused: true }));
    expect(turn(db, core, 0, () => core.acknowledgeAll(['P1'], 0, next))).toEqual({ acknowledged: [1], next: { items: [], paused: true } });
  });

  it('a next with locks per item on a queue in exclusive mode is refused before anything is acknowledged', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    push(db, core, item(0, 0), item(0, 1));
    heldOf(popAck(db, core, 0, 1, 'A'));
    const next = { depth: 1, ack: { lockId: 'N', ttlMs: 100, itemLockIds: ['N0'] } };
    expect(turn(db, core, 0, () => core.acknowledgeAll(['A'], 0, next))).toEqual({ acknowledged: [], perItemRefused: true });
    expect(core.lock).toMatchObject({ lockId: 'A', state: 'active' });
  });
});
