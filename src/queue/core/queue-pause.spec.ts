import { describe, expect, it } from 'vitest';
import { QueueCore } from './queue-core.js';
import { endTurn, FakeDb, item, items, SETTINGS } from '../../../test/support/core-fake-db.js';
import { popAck, sharedQueue, turn } from '../../../test/support/shared-locks-fake-db.js';

/** Pause and resume in the core (CONTRACT.md, "Pause and resume"). */
describe('QueueCore: pause and resume', () => {
  it('a paused queue hands out nothing to any pop, and says so; pushes still count; resuming hands them out in order', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    core.push([item(0, 1), item(0, 2)], 0, 0);
    endTurn(db, core);
    expect(core.updateSettings({ paused: true })).toMatchObject({ paused: true });
    expect(endTurn(db, core)).toMatchObject({ settingsChanged: true, settings: { paused: true } });
    expect(core.paused).toBe(true);
    expect(core.pop(5, 0)).toEqual({ items: [], paused: true });
    expect(core.pop(5, 0, { lockId: 'L', ttlMs: 1000 })).toEqual({ items: [], paused: true });
    expect(endTurn(db, core), 'a paused pop writes nothing').toBeUndefined();
    core.push([item(0, 3)], 0, 0);
    endTurn(db, core);
    expect(core.count, 'items pushed while paused count').toBe(3);
    expect(core.available, 'but none is available to pops').toBe(0);
    core.updateSettings({ paused: false });
    endTurn(db, core);
    expect(core.available).toBe(3);
    expect(items(core.pop(5, 0))).toEqual([item(0, 1), item(0, 2), item(0, 3)].map((i) => i.json));
  });

  it('paused is answered before the 423 of an active exclusive lock; the lock can still be acknowledged, extended, released', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    core.push([item(0, 1), item(0, 2)], 0, 0);
    endTurn(db, core);
    const popped = core.pop(1, 0, { lockId: 'L', ttlMs: 1000 });
    expect('lock' in popped && popped.lock).toBeTruthy();
    endTurn(db, core);
    expect(core.pop(1, 0)).toMatchObject({ locked: expect.anything() });
    core.updateSettings({ paused: true });
    endTurn(db, core);
    expect(core.pop(1, 0)).toEqual({ items: [], paused: true });
    expect(core.extendLock('L', 10, 1000)).toMatchObject({ expiresAt: 1010 });
    expect(core.release('L', 20)).toBe(1);
    endTurn(db, core);
    expect(core.count).toBe(2);
    expect(core.available).toBe(0);
  });

  it('lock expiry goes on while paused: the items come back, and stay invisible until the resume', () => {
    const { db, core } = sharedQueue();
    turn(db, core, 0, () => core.push([item(0, 1), item(0, 2)], 0, 0));
    popAck(db, core, 0, 2, 'A', 100);
    turn(db, core, 0, () => core.updateSettings({ paused: true }));
    turn(db, core, 200, () => core.expireSharedLocks(200));
    expect(core.count).toBe(2);
    expect(turn(db, core, 200, () => core.pop(2, 0))).toEqual({ items: [], paused: true });
    turn(db, core, 300, () => core.updateSettings({ paused: false }));
    expect(core.available).toBe(2);
  });

  it('delayed items come due while paused and count, without becoming available', () => {
    const db = new FakeDb();
    const core = QueueCore.absent({ ...SETTINGS, paused: true });
    core.push([{ priority: 0, json: item(0, 1).json, delayMs: 100 }], 0, 0);
    endTurn(db, core);
    expect(core.delayedCount).toBe(1);
    expect(core.available).toBe(0);
  });
});
