import { describe, expect, it } from 'vitest';
import { QueueCore } from './queue-core.js';
import { endTurn, FakeDb, item, items, SETTINGS } from '../../../test/support/core-fake-db.js';
import { heldOf, names, popAck, sharedQueue, turn } from '../../../test/support/shared-locks-fake-db.js';

const ack = (lockId: string) => ({ lockId, ttlMs: 60_000 });

describe('QueueCore: delivery limits', () => {
  it('max_in_flight, exclusive: a pop with ack takes at most the limit; plain pops are not limited by it', () => {
    const db = new FakeDb();
    const core = QueueCore.absent({ ...SETTINGS, maxInFlight: 2 });
    core.push([item(0, 1), item(0, 2), item(0, 3), item(0, 4)], 0, 0);
    endTurn(db, core);
    expect(core.available, 'a pop with ack could take 2').toBe(2);
    expect(items(core.pop(5, 0, ack('L')))).toEqual([item(0, 1), item(0, 2)].map((i) => i.json));
    endTurn(db, core);
    expect(core.inFlight).toBe(2);
    expect(core.available).toBe(0);
    expect(core.acknowledge('L', 0)).toBe(2);
    endTurn(db, core);
    expect(items(core.pop(5, 0))).toEqual([item(0, 3), item(0, 4)].map((i) => i.json));
  });

  it('max_in_flight, shared: pops with ack take the room left; none → empty and limited, until an acknowledge, release or expiry makes room', () => {
    const { db, core } = sharedQueue();
    turn(db, core, 0, () => core.updateSettings({ maxInFlight: 3 }));
    turn(db, core, 0, () =>
      core.push(
        [1, 2, 3, 4, 5, 6].map((n) => item(0, n)),
        0,
        0,
      ),
    );
    expect(names(heldOf(popAck(db, core, 0, 2, 'A', 100)))).toEqual(['0.1', '0.2']);
    expect(names(heldOf(popAck(db, core, 0, 5, 'B', 10_000)))).toEqual(['0.3']);
    expect(turn(db, core, 0, () => core.pop(1, 0, ack('C')))).toEqual({ items: [], limited: 'in_flight' });
    expect(names((turn(db, core, 0, () => core.pop(1, 0)) as { items: [] }).items), 'a plain pop is not limited').toEqual(['0.4']);
    // A's expiry makes room for two (its items come back first).
    expect(core.available).toBe(0);
    expect(names(heldOf(popAck(db, core, 200, 5, 'D')))).toEqual(['0.1', '0.2']);
    turn(db, core, 200, () => core.acknowledge('B', 200));
    expect(core.available).toBe(1);
    expect(names(heldOf(popAck(db, core, 200, 5, 'E')))).toEqual(['0.5']);
  });

  it('max_pops_per_second: a pop takes at most the budget, which all pops share and which refills with time; none → limited with when it comes', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    core.push(
      [1, 2, 3, 4, 5, 6, 7, 8].map((n) => item(0, n)),
      0,
      0,
    );
    core.updateSettings({ maxPopsPerSecond: 2 });
    expect(endTurn(db, core), 'setting the rate writes a full budget').toMatchObject({ popBudget: { tokens: 2 } });
    expect(items(core.pop(5, 10_000))).toHaveLength(2);
    expect(endTurn(db, core)).toMatchObject({ popBudget: { tokens: 0, at: 10_000 } });
    expect(core.pop(1, 10_100, ack('L'))).toEqual({ items: [], limited: 'rate', retryInMs: 400 });
    expect(core.pop(1, 10_499)).toMatchObject({ limited: 'rate', retryInMs: 1 });
    expect(endTurn(db, core), 'a limited pop writes nothing').toBeUndefined();
    expect(items(core.pop(5, 10_500))).toHaveLength(1);
    endTurn(db, core);
    expect(items(core.pop(5, 20_000, ack('L'))), 'the burst is one second worth').toHaveLength(2);
  });

  it('max_pops_per_second below 1: bursts of at most 1', () => {
    const db = new FakeDb();
    const core = QueueCore.absent({ ...SETTINGS, maxPopsPerSecond: 0.5 });
    core.push(
      [1, 2, 3].map((n) => item(0, n)),
      0,
      0,
    );
    endTurn(db, core);
    expect(items(core.pop(3, 0))).toHaveLength(1);
    endTurn(db, core);
    expect(core.pop(3, 1_000)).toMatchObject({ limited: 'rate', retryInMs: 1_000 });
    expect(items(core.pop(3, 2_000))).toHaveLength(1);
  });

  it('changing the rate refills the budget; removing the limit lifts it', () => {
    const db = new FakeDb();
    const core = QueueCore.absent({ ...SETTINGS, maxPopsPerSecond: 1 });
    core.push(
      [1, 2, 3, 4, 5].map((n) => item(0, n)),
      0,
      0,
    );
    endTurn(db, core);
    expect(items(core.pop(5, 0))).toHaveLength(1);
    endTurn(db, core);
    core.updateSettings({ maxPopsPerSecond: 3 });
    endTurn(db, core);
    expect(items(core.pop(5, 0))).toHaveLength(3);
    endTurn(db, core);
    core.updateSettings({ maxPopsPerSecond: null });
    endTurn(db, core);
    expect(items(core.pop(5, 0))).toHaveLength(1);
  });

  it('the budget is read from the stored row, so another core (another process) sees what this one drew', () => {
    const db = new FakeDb();
    const core = QueueCore.absent({ ...SETTINGS, maxPopsPerSecond: 2 });
    core.push(
      [1, 2, 3].map((n) => item(0, n)),
      0,
      0,
    );
    endTurn(db, core);
    core.pop(2, 1000);
    const write = endTurn(db, core)!;
    const other = QueueCore.fromRecord({
      version: write.newVersion,
      settings: write.settings,
      priorities: write.priorities,
      lock: null,
      popBudget: write.popBudget!,
    });
    expect(other.pop(1, 1000)).toMatchObject({ limited: 'rate' });
    expect(other.popTokens(1250)).toBeCloseTo(0.5);
  });

  it('paused comes before the limits', () => {
    const core = QueueCore.absent({ ...SETTINGS, paused: true, maxInFlight: 1, maxPopsPerSecond: 1 });
    expect(core.pop(1, 0, ack('L'))).toEqual({ items: [], paused: true });
  });
});
