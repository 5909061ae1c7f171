import { describe, expect, it } from 'vitest';
import { ExclusiveLock } from './exclusive-lock.js';
import { GivenBackItems } from './given-back-items.js';
import { LockOperations } from './lock-operations.js';
import { PrioritySegments } from './priority-segments.js';
import { SharedLocks } from './shared-locks.js';
import { TurnState, type CoreContext } from './turn-state.js';
import { DelayedItems } from './delayed-items.js';
import { Needed, type LockState, type QueueSettings } from './types.js';

const held = { priority: 0, json: '"a"', origin: { segment: 0, position: 0 }, deliveries: 1 };
const lock = (state: 'active' | 'expired', expiresAt = 1000): LockState => ({
  lockId: 'L',
  state,
  items: state === 'active' ? [held] : [],
  createdAt: 0,
  expiresAt,
});

function operations(settings: QueueSettings, exclusiveLock: LockState | null): { ctx: CoreContext; exclusive: ExclusiveLock; ops: LockOperations } {
  const ctx: CoreContext = { settings, turn: new TurnState(), markPresent: () => undefined };
  const segments = new PrioritySegments(ctx);
  const givenBack = new GivenBackItems(ctx, segments, new DelayedItems(ctx, segments));
  const exclusive = new ExclusiveLock(ctx, exclusiveLock);
  return { ctx, exclusive, ops: new LockOperations(ctx, exclusive, new SharedLocks(ctx, givenBack), givenBack) };
}

describe('LockOperations', () => {
  const EXCLUSIVE: QueueSettings = { segmentSize: 3, bufferSegments: 1 };
  const SHARED: QueueSettings = { ...EXCLUSIVE, lockMode: 'shared' };

  it('exclusive mode: the contract order, no lock, expired, wrong id; a refused operation writes nothing', () => {
    expect(operations(EXCLUSIVE, null).ops.acknowledge('L', 0)).toBe('LOCK_NOT_FOUND');
    expect(operations(EXCLUSIVE, lock('expired')).ops.release('X', 0)).toEqual({ returned: 'LOCK_EXPIRED' });
    const { ctx, ops } = operations(EXCLUSIVE, lock('active'));
    expect(ops.extend('X', 0, 5000)).toBe('INVALID_LOCK_ID');
    expect(ctx.turn.writes.isEmpty).toBe(true);
  });

  it('exclusive mode: acknowledge removes the lock, extend moves its expiry, release gives its items back to the front', () => {
    const acknowledged = operations(EXCLUSIVE, lock('active'));
    expect(acknowledged.ops.acknowledge('L', 0)).toBe(1);
    expect(acknowledged.exclusive.lock).toBeNull();
    expect(acknowledged.ctx.turn.writes.lock).toEqual({ op: 'delete' });

    const extended = operations(EXCLUSIVE, lock('active'));
    expect(extended.ops.extend('L', 500, 2000)).toMatchObject({ expiresAt: 2500 });

    const released = operations(EXCLUSIVE, lock('active'));
    expect(released.ops.release('L', 0)).toEqual({ returned: 1, outcome: { returned: 1, deadLettered: 0, delayed: 0 } });
    expect(released.ctx.turn.writes.insertRows().map((r) => r.json)).toEqual(['"a"']);
  });

  it('exclusive mode: expiry at `now` gives the items back and keeps the lock as expired', () => {
    const { exclusive, ops } = operations(EXCLUSIVE, lock('active', 1000));
    expect(ops.expireExclusive(999)).toBeUndefined();
    expect(ops.expireExclusive(1000)).toBe(1);
    expect(exclusive.lock).toMatchObject({ state: 'expired', items: [] });
  });

  it("shared mode: the last exclusive lock's id answers 410; other ids are looked up among the shared locks", () => {
    const { ops } = operations(SHARED, lock('expired'));
    expect(ops.check('L', 0)).toBe('LOCK_EXPIRED');
    expect(ops.check('other', 0)).toEqual(new Needed({ lockRows: [{ kind: 'locks', ids: ['other'] }] }));
  });
});
