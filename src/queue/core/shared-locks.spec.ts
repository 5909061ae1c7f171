import { describe, expect, it } from 'vitest';
import { CONTROL_DEFAULTS } from './queue-settings.js';
import { MAX_EXPIRED_LOCKS_PER_TURN, QueueCore } from './queue-core.js';
import { MAX_KNOWN_LOCK_CHARS, MAX_KNOWN_LOCKS } from './shared-locks.js';
import { endTurn, FakeDb, heldOf, item, names, popAck, SETTINGS, sharedQueue, startTurn, turn, withFetch } from '../../../test/support/shared-locks-fake-db.js';

describe('QueueCore in shared lock mode', () => {
  it('settings: the layout changes only while empty, the lock mode only while no lock lives', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    expect(core.isPresent).toBe(false);
    expect(core.updateSettings({ segmentSize: 5, maxDeliveries: 2, deadLetterQueue: 'dead' })).toEqual({
      segmentSize: 5,
      bufferSegments: 1,
      lockMode: 'exclusive',
      maxDeliveries: 2,
      deadLetterQueue: 'dead',
      ...CONTROL_DEFAULTS,
    });
    expect(core.isPresent, 'settings create the queue').toBe(true);
    expect(endTurn(db, core)).toMatchObject({ expectedVersion: null, settings: { segmentSize: 5, maxDeliveries: 2 } });
    turn(db, core, 0, () => core.push([item(0, 1)], 0, 0));
    expect(core.updateSettings({ segmentSize: 6 })).toEqual({ refused: 'QUEUE_NOT_EMPTY' });
    expect(core.updateSettings({ segmentSize: 5 }), 'the same value is no change').toMatchObject({ segmentSize: 5 });
    turn(db, core, 0, () => core.pop(1, 0, { lockId: 'L', ttlMs: 100 }));
    expect(core.count).toBe(0);
    expect(core.updateSettings({ bufferSegments: 2 }), 'a lock holds an item').toEqual({ refused: 'QUEUE_NOT_EMPTY' });
    expect(core.updateSettings({ lockMode: 'shared' }), 'with when the lock expires').toEqual({ refused: 'QUEUE_LOCKED', lockExpiresAt: 100 });
    expect(core.updateSettings({ maxDeliveries: null, deadLetterQueue: null }), 'the rest may change while locked').toMatchObject({
      maxDeliveries: null,
      deadLetterQueue: null,
    });
    endTurn(db, core);
    expect(turn(db, core, 0, () => core.acknowledge('L', 0))).toBe(1);
    expect(turn(db, core, 0, () => core.updateSettings({ lockMode: 'shared', segmentSize: 4 }))).toMatchObject({ lockMode: 'shared', segmentSize: 4 });
    expect(db.load().settings).toMatchObject({ lockMode: 'shared', segmentSize: 4 });
  });

  it('each pop with ack takes the next items under a lock of its own; no pop is refused; plain pops go on', () => {
    const { db, core } = sharedQueue();
    turn(db, core, 0, () =>
      core.push(
        Array.from({ length: 7 }, (_, n) => item(0, n)),
        0,
        0,
      ),
    );
    const a = heldOf(popAck(db, core, 0, 2, 'A'));
    const b = heldOf(popAck(db, core, 0, 2, 'B'));
    expect(names(a)).toEqual(['0.0', '0.1']);
    expect(names(b)).toEqual(['0.2', '0.3']);
    expect(a.map((i) => i.deliveries)).toEqual([1, 1]);
    expect(names(heldOf(turn(db, core, 0, () => core.pop(1, 0))))).toEqual(['0.4']);
    expect(core.sharedLocks).toEqual({ live: 2, items: 4, nextExpiry: 1000 });
    expect(core.count).toBe(2);
    expect(db.locks.size).toBe(2);
  });

  it('the write names the locks its turn created (no row yet), never one it extended or expired', () => {
    const { db, core } = sharedQueue();
    turn(db, core, 0, () => core.push([item(0, 0), item(0, 1), item(0, 2)], 0, 0));
    startTurn(db, core, 0);
    withFetch(db, core, () => core.pop(1, 0, { lockId: 'A', ttlMs: 100 }));
    withFetch(db, core, () => core.pop(1, 0, { lockId: 'B', ttlMs: 100 }));
    const created = endTurn(db, core)!;
    expect(created.sharedLockUpserts.map((l) => l.lockId)).toEqual(['A', 'B']);
    expect([...(created.sharedLocksCreated ?? [])]).toEqual(['A', 'B']);
    startTurn(db, core, 10);
    withFetch(db, core, () => core.extendLock('A', 10, 1000));
    withFetch(db, core, () => core.pop(1, 10, { lockId: 'C', ttlMs: 100 }));
    const extended = endTurn(db, core)!;
    expect(extended.sharedLockUpserts.map((l) => l.lockId)).toEqual(['A', 'C']);
    expect([...(extended.sharedLocksCreated ?? [])], 'A has its row').toEqual(['C']);
    startTurn(db, core, 200);
    const expired = endTurn(db, core)!;
    expect(expired.sharedLockUpserts.map((l) => [l.lockId, l.state])).toEqual([
      ['B', 'expired'],
      ['C', 'expired'],
    ]);
    expect(expired.sharedLocksCreated).toBeUndefined();
  });

  it('given-back items return to their push-order place, whatever order the locks end in, ahead of undelivered items', () => {
    const { db, core } = sharedQueue();
    turn(db, core, 0, () =>
      core.push(
        [0, 1, 2, 3, 4, 5, 6, 7].map((n) => item(n % 2, n)),
        0,
        0,
      ),
    );
    // Priority 0: 0 2 4 6; priority 1: 1 3 5 7.
    const locks = ['A', 'B', 'C', 'D'].map((id, i) => heldOf(popAck(db, core, 0, 2, id, 1000 + i)));
    expect(locks.map(names)).toEqual([
      ['0.0', '0.2'],
      ['0.4', '0.6'],
      ['1.1', '1.3'],
      ['1.5', '1.7'],
    ]);
    turn(db, core, 0, () => core.push([item(0, 8), item(1, 9)], 0, 0));
    expect(turn(db, core, 0, () => core.release('D', 0))).toBe(2);
    expect(turn(db, core, 0, () => core.release('B', 0))).toBe(2);
    // A and C expire by time: the turn's hook gives them back.
    turn(db, core, 1002, () => undefined);
    expect(core.sharedLocks).toEqual({ live: 0, items: 0, nextExpiry: null });
    const fresh = db.load();
    const all = heldOf(turn(db, fresh, 1002, () => fresh.pop(20, 0)));
    expect(names(all)).toEqual(['0.0', '0.2', '0.4', '0.6', '0.8', '1.1', '1.3', '1.5', '1.7', '1.9']);
    expect(all.map((i) => i.deliveries)).toEqual([1, 1, 1, 1, 0, 1, 1, 1, 1, 0]);
    expect(db.returned.get(0) ?? []).toEqual([]);
    expect(db.record!.priorities).toEqual({});
  });

  it('a priority emptied while its items are held keeps its entry, so returned items go before later pushes', () => {
    const { db, core } = sharedQueue();
    turn(db, core, 0, () => core.push([item(0, 0), item(0, 1)], 0, 0));
    heldOf(popAck(db, core, 0, 2, 'A'));
    expect(withFetch(db, core, () => core.view())!.priorities.size, 'no waiting item: not shown').toBe(0);
    expect(db.record!.priorities['0']).toMatchObject({ count: 0, held: 2 });
    turn(db, core, 0, () => core.push([item(0, 2)], 0, 0));
    expect(turn(db, core, 0, () => core.release('A', 0))).toBe(2);
    expect(names(heldOf(turn(db, core, 0, () => core.pop(3, 0))))).toEqual(['0.0', '0.1', '0.2']);
    expect(db.record!.priorities).toEqual({});
  });

  it('acknowledge, extend and release find locks by id: 404 unknown, 410 expired, never INVALID_LOCK_ID', () => {
    const { db, core } = sharedQueue();
    turn(db, core, 0, () => core.push([item(0, 0), item(0, 1), item(0, 2)], 0, 0));
    popAck(db, core, 0, 1, 'A', 100);
    popAck(db, core, 0, 1, 'B', 100);
    const fresh = db.load();
    expect(turn(db, fresh, 0, () => fresh.acknowledge('nope', 0))).toBe('LOCK_NOT_FOUND');
    expect(turn(db, fresh, 50, () => fresh.extendLock('A', 50, 1000))).toMatchObject({ lockId: 'A', expiresAt: 1050 });
    expect(
      turn(db, fresh, 60, () => fresh.extendLock('B', 60, 20)),
      'a shorter ttl moves the expiry earlier',
    ).toMatchObject({ lockId: 'B', expiresAt: 80 });
    expect(fresh.sharedLocks.nextExpiry, 'and the bound with it').toBe(80);
    expect(
      turn(db, fresh, 100, () => fresh.acknowledge('B', 100)),
      'B expired at the start of the turn',
    ).toBe('LOCK_EXPIRED');
    expect(turn(db, fresh, 100, () => fresh.release('B', 100))).toBe('LOCK_EXPIRED');
    expect(turn(db, fresh, 100, () => fresh.acknowledge('A', 100))).toBe(1);
    expect(
      turn(db, fresh, 100, () => fresh.acknowledge('A', 100)),
      'acknowledged: gone',
    ).toBe('LOCK_NOT_FOUND');
    expect(names(heldOf(turn(db, fresh, 100, () => fresh.pop(5, 0))))).toEqual(['0.1', '0.2']);
  });

  it('the last exclusive lock, expired before the switch to shared mode, answers 410 by its id; other unknown ids 404', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    turn(db, core, 0, () => core.push([item(0, 0), item(0, 1)], 0, 0));
    turn(db, core, 0, () => core.pop(1, 0, { lockId: 'X', ttlMs: 100 }));
    expect(turn(db, core, 100, () => core.updateSettings({ lockMode: 'shared' }))).toMatchObject({ lockMode: 'shared' });
    const fresh = db.load();
    expect(turn(db, fresh, 100, () => fresh.acknowledge('X', 100))).toBe('LOCK_EXPIRED');
    popAck(db, fresh, 100, 1, 'S', 1000);
    for (const call of [(): unknown => fresh.release('X', 100), (): unknown => fresh.extendLock('X', 100, 10)])
      expect(turn(db, fresh, 100, call), 'after a shared lock too').toBe('LOCK_EXPIRED');
    expect(turn(db, fresh, 100, () => fresh.acknowledge('Y', 100))).toBe('LOCK_NOT_FOUND');
    expect(turn(db, fresh, 100, () => fresh.acknowledge('S', 100))).toBe(1);
  });

  it('the expiry hook reads nothing until the earliest expiry; extending keeps a lower bound that one read refreshes', () => {
    const { db, core } = sharedQueue();
    turn(db, core, 0, () => core.push([item(0, 0), item(0, 1)], 0, 0));
    popAck(db, core, 0, 1, 'A', 100);
    db.reads.due = 0;
    turn(db, core, 99, () => undefined);
    expect(db.reads.due, 'nothing due: no read').toBe(0);
    turn(db, core, 50, () => core.extendLock('A', 50, 1000));
    expect(core.sharedLocks.nextExpiry, 'still the old bound').toBe(100);
    const write = turn(db, core, 100, () => undefined);
    expect(write).toBeUndefined();
    expect(db.reads.due).toBe(1);
    expect(core.sharedLocks.nextExpiry, 'refreshed').toBe(1050);
    expect(db.record!.shared.nextExpiry, 'and written, so the sweep stops finding the queue').toBe(1050);
    turn(db, core, 200, () => undefined);
    expect(db.reads.due, 'no read before the new bound').toBe(1);
  });

  it('view: the locks with the exact earliest expiry', () => {
    const { db, core } = sharedQueue();
    turn(db, core, 0, () => core.push([item(0, 0), item(0, 1)], 0, 0));
    popAck(db, core, 0, 1, 'A', 100);
    popAck(db, core, 0, 1, 'B', 300);
    turn(db, core, 10, () => core.extendLock('A', 10, 1000));
    const fresh = db.load();
    expect(turn(db, fresh, 10, () => fresh.view())!.locks).toEqual({ count: 2, itemCount: 2, nextExpiresAt: 300 });
    // In one turn: the view, then the earliest lock acknowledged, then the view again.
    startTurn(db, fresh, 20);
    expect(withFetch(db, fresh, () => fresh.view())!.locks).toMatchObject({ nextExpiresAt: 300 });
    expect(withFetch(db, fresh, () => fresh.acknowledge('B', 20))).toBe(1);
    expect(withFetch(db, fresh, () => fresh.view())!.locks).toEqual({ count: 1, itemCount: 1, nextExpiresAt: 1010 });
    endTurn(db, fresh);
  });

  it('more due locks than one turn gives back: the rest in the next turns, or when their id is used', () => {
    const { db, core } = sharedQueue();
    const n = 2 * MAX_EXPIRED_LOCKS_PER_TURN + 20;
    turn(db, core, 0, () =>
      core.push(
        Array.from({ length: n }, (_, i) => item(0, i)),
        0,
        0,
      ),
    );
    for (let i = 0; i < n; i++) popAck(db, core, 0, 1, `L${i}`, 10 + i);
    turn(db, core, 5000, () => undefined);
    expect(core.sharedLocks.live).toBe(n - MAX_EXPIRED_LOCKS_PER_TURN);
    // The next turn's hook gives back the next hundred (earliest first); the last lock is due but not among them.
    expect(
      turn(db, core, 5000, () => core.acknowledge(`L${n - 1}`, 5000)),
      'due, not yet given back',
    ).toBe('LOCK_EXPIRED');
    expect(core.sharedLocks.live).toBe(19);
    turn(db, core, 5000, () => undefined);
    expect(core.sharedLocks).toEqual({ live: 0, items: 0, nextExpiry: null });
    expect(names(heldOf(turn(db, core, 5000, () => core.pop(100, 0)))).slice(0, 3)).toEqual(['0.0', '0.1', '0.2']);
  });

  it('MAX_LOCKS_PER_QUEUE: a pop with ack past it is refused; a plain pop is not', () => {
    const { db, core } = sharedQueue();
    turn(db, core, 0, () => core.push([item(0, 0), item(0, 1), item(0, 2)], 0, 0));
    popAck(db, core, 0, 1, 'A', 100, 2);
    popAck(db, core, 0, 1, 'B', 100, 2);
    expect(popAck(db, core, 0, 1, 'C', 100, 2)).toEqual({ busy: true });
    expect(names(heldOf(turn(db, core, 0, () => core.pop(1, 0))))).toEqual(['0.2']);
  });

  it('dead letters: an item given back at max_deliveries goes to the dead-letter queue, the rest back; in both modes', () => {
    for (const lockMode of ['exclusive', 'shared'] as const) {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.updateSettings({ lockMode, maxDeliveries: 2, deadLetterQueue: 'dead' });
      core.push([item(4, 0), item(4, 1)], 0, 0);
      endTurn(db, core);
      const first = heldOf(popAck(db, core, 0, 1, 'A'));
      expect(first.map((i) => i.deliveries)).toEqual([1]);
      turn(db, core, 0, () => core.release('A', 0));
      expect(db.deadLetters).toEqual([]);
      const second = heldOf(popAck(db, core, 0, 2, 'B', 100));
      expect([names(second), second.map((i) => i.deliveries)], lockMode).toEqual([
        ['4.0', '4.1'],
        [2, 1],
      ]);
      turn(db, core, 100, () => undefined);
      expect(
        db.deadLetters.map((d) => [d.queueId, names([d.item])[0]]),
        lockMode,
      ).toEqual([['dead', '4.0']]);
      const rest = heldOf(turn(db, core, 100, () => core.pop(5, 100, { lockId: 'C', ttlMs: 100 })));
      expect([names(rest), rest.map((i) => i.deliveries)], lockMode).toEqual([['4.1'], [2]]);
      expect(withFetch(db, core, () => core.releaseLock('C', 100))).toMatchObject({ returned: 1, outcome: { returned: 0, deadLettered: 1 } });
      endTurn(db, core);
      expect(db.deadLetters.length, lockMode).toBe(2);
      expect(core.count).toBe(0);
    }
  });

  it('without a dead-letter queue, max_deliveries gives items back as ever', () => {
    const { db, core } = sharedQueue();
    turn(db, core, 0, () => core.updateSettings({ maxDeliveries: 1 }));
    turn(db, core, 0, () => core.push([item(0, 0)], 0, 0));
    popAck(db, core, 0, 1, 'A');
    turn(db, core, 0, () => core.release('A', 0));
    expect(db.deadLetters).toEqual([]);
    expect(core.count).toBe(1);
  });

  it('exclusive mode keeps delivery counts of items given back to the front', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    turn(db, core, 0, () => core.push([item(0, 0), item(0, 1)], 0, 0));
    popAck(db, core, 0, 2, 'A', 10);
    turn(db, core, 10, () => undefined);
    const fresh = db.load();
    const again = heldOf(popAck(db, fresh, 10, 2, 'B', 10));
    expect(again.map((i) => i.deliveries)).toEqual([2, 2]);
  });

  it('deleteQueue counts the items shared locks hold and those given back', () => {
    const { db, core } = sharedQueue();
    turn(db, core, 0, () => core.push([item(0, 0), item(0, 1), item(0, 2)], 0, 0));
    popAck(db, core, 0, 1, 'A');
    popAck(db, core, 0, 1, 'B');
    turn(db, core, 0, () => core.release('B', 0));
    expect(core.deleteQueue()).toBe(3);
  });

  it('the live locks a committed turn wrote are known in the next turns: acknowledging them reads no row', () => {
    const { db, core } = sharedQueue();
    turn(db, core, 0, () => core.push([item(0, 0), item(0, 1), item(0, 2)], 0, 0));
    popAck(db, core, 0, 1, 'A');
    popAck(db, core, 0, 1, 'B');
    expect(core.itemsInMemory, 'the known locks hold their items').toBeGreaterThanOrEqual(2);
    expect(turn(db, core, 10, () => core.acknowledgeAll(['A', 'B'], 10))).toEqual({ acknowledged: [1, 1] });
    expect(db.reads.locks, 'nothing read').toBe(0);
    expect(
      turn(db, core, 10, () => core.acknowledge('A', 10)),
      'an ended lock is not known: read, and gone',
    ).toBe('LOCK_NOT_FOUND');
    expect(db.reads.locks).toBe(1);
    popAck(db, core, 0, 1, 'C');
    const fresh = db.load();
    expect(
      turn(db, fresh, 10, () => fresh.acknowledge('C', 10)),
      'a core made afresh reads them',
    ).toBe(1);
    expect(db.reads.locks).toBe(2);
  });

  it('known locks: extended and expired as stored; rows read become known; deleting the queue forgets them', () => {
    const { db, core } = sharedQueue();
    turn(db, core, 0, () => core.push([item(0, 0), item(0, 1), item(0, 2)], 0, 0));
    popAck(db, core, 0, 1, 'A', 100);
    popAck(db, core, 0, 1, 'B', 100);
    expect(turn(db, core, 50, () => core.extendLock('A', 50, 1000))).toMatchObject({ expiresAt: 1050 });
    expect(
      turn(db, core, 150, () => core.acknowledge('B', 150)),
      'expired at the start of the turn',
    ).toBe('LOCK_EXPIRED');
    expect(
      turn(db, core, 150, () => core.acknowledge('A', 150)),
      'the extended expiry holds',
    ).toBe(1);
    const fresh = db.load();
    popAck(db, fresh, 200, 1, 'D');
    const other = db.load();
    expect(turn(db, other, 200, () => other.extendLock('D', 200, 500))).toMatchObject({ expiresAt: 700 });
    const reads = db.reads.locks;
    expect(
      turn(db, other, 300, () => other.release('D', 300)),
      'read once, then known',
    ).toBe(1);
    expect(db.reads.locks).toBe(reads);
    popAck(db, other, 300, 1, 'E');
    expect(other.deleteQueue()).toBe(2);
    expect(other.itemsInMemory).toBe(0);
  });

  it(`known locks are bounded: the ${MAX_KNOWN_LOCKS} most recent, holding at most ${MAX_KNOWN_LOCK_CHARS} characters of items`, () => {
    const { db, core } = sharedQueue();
    const n = MAX_KNOWN_LOCKS + 5;
    turn(db, core, 0, () =>
      core.push(
        Array.from({ length: n }, (_, i) => item(0, i)),
        0,
        0,
      ),
    );
    for (let i = 0; i < n; i += 1) popAck(db, core, 0, 1, `L${i}`, 10_000);
    expect(turn(db, core, 1, () => core.acknowledgeAll([`L${n - 1}`, `L${n - MAX_KNOWN_LOCKS}`], 1))).toEqual({ acknowledged: [1, 1] });
    expect(db.reads.locks, 'the most recent are known').toBe(0);
    expect(turn(db, core, 1, () => core.acknowledge('L0', 1))).toBe(1);
    expect(db.reads.locks, 'the oldest are read').toBe(1);

    const big = sharedQueue();
    const json = JSON.stringify({ pad: 'x'.repeat(MAX_KNOWN_LOCK_CHARS / 4) });
    turn(big.db, big.core, 0, () =>
      big.core.push(
        Array.from({ length: 5 }, () => ({ priority: 0, json })),
        0,
        0,
      ),
    );
    for (let i = 0; i < 5; i += 1) popAck(big.db, big.core, 0, 1, `B${i}`, 10_000);
    expect(big.core.itemsInMemory, 'three locks of a quarter each fit').toBe(3);
    expect(turn(big.db, big.core, 1, () => big.core.acknowledge('B1', 1))).toBe(1);
    expect(big.db.reads.locks).toBe(1);
  });
});
