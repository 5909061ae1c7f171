import { describe, expect, it } from 'vitest';
import { drive } from './core-driver.js';
import { applyOp, deleteQueueOp, popOp, pushOp, redriveOp, type QueueOp } from './queue-ops.js';
import { QueueCore } from './queue-core.js';
import { Needed } from './types.js';
import { endTurn, FakeDb, item, items, SETTINGS, withFetch } from '../../../test/support/core-fake-db.js';

const ack = { lockId: 'L', ttlMs: 1000 };

/** A stored queue holding `n` items of priority 0, as a fresh core (nothing in memory). */
function storedQueue(n: number): { db: FakeDb; core: QueueCore } {
  const db = new FakeDb();
  const first = QueueCore.absent(SETTINGS);
  first.push(
    Array.from({ length: n }, (_, i) => item(0, i)),
    0,
    0,
  );
  endTurn(db, first);
  return { db, core: db.load() };
}

describe('queue operations as data', () => {
  it('are plain data: they survive a copy through JSON', () => {
    const ops: QueueOp[] = [
      pushOp([{ priority: 0, json: '1', dedupId: 'a' }], 1000),
      popOp(2, ack),
      { kind: 'acknowledge', lockId: 'L' },
      { kind: 'extendLock', lockId: 'L', ttlMs: 5 },
      { kind: 'release', lockId: 'L', delayMs: 0 },
      { kind: 'putSettings', patch: { paused: true } },
      redriveOp({ queueId: 'q', limit: 10, skip: 0 }),
      deleteQueueOp(),
    ];
    expect(JSON.parse(JSON.stringify(ops))).toEqual(ops);
  });

  it('declare their reads and how they bound a turn', () => {
    expect(pushOp([item(0, 1)], 1000)).toEqual({ kind: 'push', items: [item(0, 1)], dedupWindowMs: 1000 });
    expect(pushOp([{ ...item(0, 1), dedupId: 'a' }, item(0, 2), { ...item(0, 3), dedupId: 'b' }], 1000)).toMatchObject({
      weight: 3,
      dedupIds: ['a', 'b'],
    });
    expect(popOp(5)).toEqual({ kind: 'pop', depth: 5, readsFront: true });
    // Under a lock the items are written again (the lock's rows): they weigh on the turn as pushed items do.
    expect(popOp(5, { lockId: 'L', ttlMs: 1000 })).toMatchObject({ weight: 5 });
    expect(popOp(1, { lockId: 'L', ttlMs: 1000 })).not.toHaveProperty('weight');
    expect(redriveOp({ queueId: 'q', limit: 250, skip: 3 })).toMatchObject({ weight: 250 });
    expect(deleteQueueOp()).toEqual({ kind: 'deleteQueue', endsTurn: true });
  });

  it('applyOp runs each kind against the core at the time given', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    expect(applyOp(core, { kind: 'getSettings' }, 0), 'no queue yet').toBeUndefined();
    expect(applyOp(core, pushOp([item(0, 0), item(0, 1), item(0, 2)], 0), 0)).toEqual({ enqueued: 3, duplicates: 0 });
    expect(applyOp(core, { kind: 'none' }, 0)).toBeUndefined();
    endTurn(db, core);
    const popped = withFetch(db, core, () => applyOp(core, popOp(1, ack), 5000));
    expect(popped).toMatchObject({ lock: { lockId: 'L', createdAt: 5000, expiresAt: 6000 } });
    expect(applyOp(core, { kind: 'extendLock', lockId: 'L', ttlMs: 500 }, 5100)).toMatchObject({ expiresAt: 5600 });
    expect(applyOp(core, { kind: 'acknowledge', lockId: 'other' }, 5100)).toBe('INVALID_LOCK_ID');
    expect(applyOp(core, { kind: 'acknowledge', lockId: 'L' }, 5100)).toBe(1);
    expect(applyOp(core, { kind: 'view' }, 5100)).toMatchObject({ count: 2, lock: null });
    expect(applyOp(core, { kind: 'lookupState', queueId: 'q', key: 'metadata' }, 5100)).toMatchObject({ value: { queues: { queue_0: {} } } });
    expect(applyOp(core, deleteQueueOp(), 5100)).toBe(2);
  });

  it('a pop whose client has gone takes nothing; the release it then sends gives a lock back at once, without the retry delay', () => {
    const { db, core } = storedQueue(2);
    withFetch(db, core, () => applyOp(core, { kind: 'putSettings', patch: { retryDelaySeconds: 60 } }, 0));
    endTurn(db, core);
    const gone = { aborted: true };
    expect(applyOp(core, popOp(2, ack, gone), 0), 'nothing taken, nothing read').toEqual({ items: [] });
    expect(endTurn(db, core), 'nothing written').toBeUndefined();
    const client = { aborted: false };
    const taken = withFetch(db, core, () => applyOp(core, popOp(2, ack, client), 0));
    expect(items(taken)).toHaveLength(2);
    endTurn(db, core);
    client.aborted = true;
    const released = withFetch(db, core, () => applyOp(core, { kind: 'release', lockId: 'L', delayMs: 0 }, 10));
    expect(released).toEqual({ returned: 2, outcome: { returned: 2, deadLettered: 0, delayed: 0 } });
    endTurn(db, core);
    expect(core.delayedCount, 'not waiting out the queue retry delay').toBe(0);
    expect(items(withFetch(db, core, () => applyOp(core, popOp(5), 20)))).toEqual([item(0, 0).json, item(0, 1).json]);
  });

  it('settings refusals come from the core, with what the answer shows', () => {
    const { db, core } = storedQueue(1);
    expect(applyOp(core, { kind: 'putSettings', patch: { maxDeliveries: 3 } }, 0)).toEqual({ refused: 'NEEDS_DEAD_LETTER_QUEUE' });
    expect(applyOp(core, { kind: 'putSettings', patch: { segmentSize: 7 } }, 0)).toEqual({ refused: 'QUEUE_NOT_EMPTY' });
    expect(applyOp(core, { kind: 'putSettings', patch: { retryDelaySeconds: 30, retryDelayMaxSeconds: 10 } }, 0)).toEqual({
      refused: 'RETRY_DELAY_ABOVE_MAX',
      delay: 30,
      max: 10,
    });
    withFetch(db, core, () => applyOp(core, popOp(1, { lockId: 'L', ttlMs: 4000 }), 1000));
    expect(applyOp(core, { kind: 'putSettings', patch: { lockMode: 'shared' } }, 1000)).toEqual({ refused: 'QUEUE_LOCKED', lockExpiresAt: 5000 });
    expect(endTurn(db, core)!.settingsChanged, 'the refusals changed nothing').toBeFalsy();
  });

  it('an op that lacks rows returns the need through applyOp; the declared dedup ids spare it', () => {
    const { db, core } = storedQueue(1);
    const op = pushOp([{ ...item(0, 1), dedupId: 'a' }], 1000);
    expect(applyOp(core, op, 0)).toEqual(new Needed({ dedupIds: ['a'] }));
    drive(core, () => core.checkDedupIds(op.dedupIds ?? []), db.reader(0), 1);
    expect(applyOp(core, op, 0)).toEqual({ enqueued: 1, duplicates: 0 });
  });
});
