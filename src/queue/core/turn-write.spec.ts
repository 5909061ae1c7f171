import { describe, expect, it } from 'vitest';
import { QueueCore } from './queue-core.js';
import { deleteQueueWrite } from './turn-write.js';

const SETTINGS = { segmentSize: 3, bufferSegments: 1 };
const meta = { count: 1, head_segment: 0, tail_segment: 0, head_offloaded_segment: null, tail_offloaded_segment: null, next_position: 1, head_position: 0 };

describe('the write of a turn', () => {
  it('is undefined for a turn that changed nothing', () => {
    const core = QueueCore.fromRecord({ version: 7, settings: SETTINGS, priorities: { '0': meta }, lock: null });
    expect(core.pendingWrite(() => 1)).toBeUndefined();
  });

  it('a queue created by the turn starts at the version given; a stored one moves on by one, from the version it must still have', () => {
    const created = QueueCore.absent(SETTINGS);
    created.push([{ priority: 0, json: '1' }], 0, 0);
    expect(created.pendingWrite(() => 1000)).toMatchObject({ expectedVersion: null, newVersion: 1000, itemCount: 1 });

    const stored = QueueCore.fromRecord({ version: 7, settings: SETTINGS, priorities: { '0': meta }, lock: null });
    stored.push([{ priority: 0, json: '2' }], 0, 0);
    const write = stored.pendingWrite(() => 1000)!;
    expect(write).toMatchObject({ expectedVersion: 7, newVersion: 8, deleteQueue: false, itemCount: 2, priorities: { '0': { count: 2, next_position: 2 } } });
    expect(write.inserts).toEqual([{ priority: 0, segment: 0, position: 1, json: '2' }]);
  });

  it("leaves the row's delayed and shared-lock columns alone unless the turn changed them", () => {
    const core = QueueCore.fromRecord({ version: 1, settings: SETTINGS, priorities: { '0': meta }, lock: null });
    core.push([{ priority: 0, json: '2' }], 0, 0);
    expect(core.pendingWrite(() => 1)).toMatchObject({ delayed: null, shared: null, settingsChanged: false });
    core.push([{ priority: 0, json: '3', delayMs: 1000 }], 5000, 0);
    expect(core.pendingWrite(() => 1)).toMatchObject({ delayed: { count: 1, nextDueAt: 6000, nextSeq: 1 } });
  });

  it('deleting a stored queue is one write that says so, with everything else empty', () => {
    const core = QueueCore.fromRecord({ version: 3, settings: SETTINGS, priorities: { '0': meta }, lock: null });
    expect(core.deleteQueue()).toBe(1);
    expect(core.pendingWrite(() => 1)).toEqual(deleteQueueWrite(3, SETTINGS));
    expect(deleteQueueWrite(3, SETTINGS)).toMatchObject({ expectedVersion: 3, newVersion: 4, deleteQueue: true, inserts: [], deletes: [], deadLetters: null });
    expect(QueueCore.absent(SETTINGS).pendingWrite(() => 1)).toBeUndefined();
  });
});
