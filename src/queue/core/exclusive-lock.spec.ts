import { describe, expect, it } from 'vitest';
import { QueueCore } from './queue-core.js';
import type { LockState } from './types.js';
import { endTurn, FakeDb, item, items, SETTINGS } from '../../../test/support/core-fake-db.js';

describe('QueueCore', () => {
  describe('locks', () => {
    const locked = (): { db: FakeDb; core: QueueCore; lock: LockState } => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push([item(0, 0), item(1, 0), item(0, 1), item(1, 1)], 0, 0);
      endTurn(db, core);
      const outcome = core.pop(3, 1000, { lockId: 'L1', ttlMs: 30_000 });
      expect(outcome).toMatchObject({ lock: { lockId: 'L1', state: 'active', createdAt: 1000, expiresAt: 31_000 } });
      endTurn(db, core);
      return { db, core, lock: (outcome as { lock: LockState }).lock };
    };

    it('while a lock lives every pop is refused and nothing changes', () => {
      const { db, core, lock } = locked();
      expect(core.pop(1, 0)).toEqual({ locked: lock });
      expect(core.pop(1, 2000, { lockId: 'L2', ttlMs: 1000 })).toEqual({ locked: lock });
      expect(endTurn(db, core)).toBeUndefined();
      expect(db.record!.lock).toEqual(lock);
    });

    it('checks in the contract order: no lock, expired, wrong id', () => {
      const core = QueueCore.absent(SETTINGS);
      expect(core.acknowledge('x', 0)).toBe('LOCK_NOT_FOUND');
      const { db, core: c } = locked();
      expect(c.acknowledge('wrong', 0)).toBe('INVALID_LOCK_ID');
      expect(c.extendLock('wrong', 0, 1)).toBe('INVALID_LOCK_ID');
      expect(c.release('wrong', 0)).toBe('INVALID_LOCK_ID');
      expect(endTurn(db, c)).toBeUndefined();
      expect(c.expireLock(30_999)).toBeUndefined();
      expect(c.expireLock(31_000)).toBe(3);
      endTurn(db, c);
      expect(c.acknowledge('L1', 0)).toBe('LOCK_EXPIRED');
      expect(c.acknowledge('other', 0)).toBe('LOCK_EXPIRED');
    });

    it('acknowledge removes the items for good', () => {
      const { db, core } = locked();
      expect(core.acknowledge('L1', 0)).toBe(3);
      expect(endTurn(db, core)!.lock).toEqual({ op: 'delete' });
      expect(db.record!.lock).toBeNull();
      expect(items(core.pop(10, 0))).toEqual([item(1, 1).json]);
    });

    it('expiry and release give the items back to the front of their original priorities, in order, ahead of later pushes', () => {
      for (const end of ['expire', 'release'] as const) {
        const { db, core } = locked();
        core.push([item(0, 9), item(1, 9)], 0, 0);
        endTurn(db, core);
        if (end === 'expire') expect(core.expireLock(31_000)).toBe(3);
        else expect(core.release('L1', 0)).toBe(3);
        endTurn(db, core);
        expect(db.stored(0), end).toEqual([item(0, 0), item(0, 1), item(0, 9)].map((i) => i.json));
        expect(db.stored(1), end).toEqual([item(1, 0), item(1, 1), item(1, 9)].map((i) => i.json));
        expect(items(core.pop(10, 0)), end).toEqual([item(0, 0), item(0, 1), item(0, 9), item(1, 0), item(1, 1), item(1, 9)].map((i) => i.json));
      }
    });

    it('extend sets the expiry from now', () => {
      const { db, core } = locked();
      expect(core.extendLock('L1', 20_000, 60_000)).toMatchObject({ expiresAt: 80_000 });
      endTurn(db, core);
      expect(core.expireLock(79_999)).toBeUndefined();
      expect(db.load().lock).toMatchObject({ expiresAt: 80_000, items: expect.any(Array) });
    });

    it("a lock that took a priority's last item keeps its entry; the item goes back to where it was", () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push([item(4, 0)], 0, 0);
      endTurn(db, core);
      core.pop(1, 0, { lockId: 'L', ttlMs: 10 });
      endTurn(db, core);
      expect(core.meta(4)).toMatchObject({ count: 0, held: 1, head_segment: 0, head_position: 1, next_position: 1 });
      expect(db.stored(4)).toEqual([]);
      core.expireLock(10);
      endTurn(db, core);
      expect(core.meta(4)).toMatchObject({ head_segment: 0, tail_segment: 0, count: 1, next_position: 1, head_position: 0 });
      expect(db.stored(4)).toEqual([item(4, 0).json]);
    });
  });
});
