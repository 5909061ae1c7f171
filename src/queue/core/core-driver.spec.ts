import { describe, expect, it } from 'vitest';
import { drive, MAX_READ_ROUNDS, ReadsOutOfStep, type RowReader, type SyncRowReader } from './core-driver.js';
import { QueueCore } from './queue-core.js';
import { Needed, type LockRowsNeed, type PriorityMetadata, type SegmentRef } from './types.js';

const SETTINGS = { segmentSize: 3, bufferSegments: 1 };
const meta = { count: 3, head_segment: 0, tail_segment: 0, head_offloaded_segment: null, tail_offloaded_segment: null, next_position: 3, head_position: 0 };
/** A stored queue with three items in segment 0 of priority 0, none of them in memory. */
const stored = (): QueueCore => QueueCore.fromRecord({ version: 1, settings: SETTINGS, priorities: { '0': meta }, lock: null });
const rows = [0, 1, 2].map((position) => ({ position, json: `"${position}"` }));
const json = (outcome: unknown): string[] => (outcome as { items: { json: string }[] }).items.map((i) => i.json);

/** A reader that finds segment 0's rows and records what it was asked. */
function recordingReader(asked: SegmentRef[][]): SyncRowReader {
  return {
    segments: (refs) => {
      asked.push([...refs]);
      return refs.map(() => ({ entries: rows }));
    },
    dueItems: () => ({ items: [], nextDueAt: null }),
    liveDedupIds: () => new Set(),
    lockRows: (need) => {
      throw new Error(`unexpected read: ${need.kind}`);
    },
  };
}

describe('drive', () => {
  it('a call that needs nothing is only called: no read', () => {
    const asked: SegmentRef[][] = [];
    const core = QueueCore.absent(SETTINGS);
    expect(drive(core, () => core.push([{ priority: 0, json: '1' }], 0, 0), recordingReader(asked))).toEqual({ enqueued: 1, duplicates: 0 });
    expect(asked).toEqual([]);
  });

  it('reads what the core asks for, hands it over and calls again; a reader that answers at once gets the value at once', () => {
    const asked: SegmentRef[][] = [];
    const core = stored();
    const outcome = drive(core, () => core.pop(2, 0), recordingReader(asked));
    expect(json(outcome)).toEqual(['"0"', '"1"']);
    expect(asked).toEqual([[{ priority: 0, segment: 0, from: 'state', purpose: 'use' }]]);
  });

  it('with a reader that answers with promises, answers with a promise of the value', async () => {
    const core = stored();
    const reader: RowReader = { ...recordingReader([]), segments: (refs) => Promise.resolve(refs.map(() => ({ entries: rows }))) };
    const pending = drive(core, () => core.pop(3, 0), reader);
    expect(pending).toBeInstanceOf(Promise);
    expect(json(await pending)).toHaveLength(3);
  });

  it('throws on what the call throws; a need still open after the last round is reads out of step with the row', () => {
    const core = stored();
    const reader = recordingReader([]);
    expect(() =>
      drive(
        core,
        () => {
          throw new RangeError('bad');
        },
        reader,
      ),
    ).toThrow(RangeError);
    let calls = 0;
    const forever = (): Needed => {
      calls += 1;
      return new Needed({ lockRows: [{ kind: 'next', exclude: [] }] });
    };
    expect(() => drive(core, forever, { ...reader, lockRows: () => ({ kind: 'next', nextExpiry: null }) })).toThrow(ReadsOutOfStep);
    expect(calls).toBe(MAX_READ_ROUNDS + 1);
    calls = 0;
    expect(() => drive(core, forever, { ...reader, lockRows: () => ({ kind: 'next', nextExpiry: null }) }, 1)).toThrow(ReadsOutOfStep);
    expect(calls, 'one round allowed: two calls').toBe(2);
  });

  it('a failed read fails the call', async () => {
    const core = stored();
    const reader: RowReader = { ...recordingReader([]), segments: () => Promise.reject(new Error('database down')) };
    await expect(drive(core, () => core.pop(1, 0), reader)).rejects.toThrow('database down');
  });
});

describe('needs, returned and declared', () => {
  it('a row not yet read is returned as a need, not thrown, and nothing changed', () => {
    const core = QueueCore.fromRecord({
      version: 1,
      settings: { ...SETTINGS, lockMode: 'shared' },
      priorities: {},
      lock: null,
      shared: { live: 1, items: 1, nextExpiry: 5000 },
    });
    const answer = core.acknowledge('L', 0);
    expect(answer).toEqual(new Needed({ lockRows: [{ kind: 'locks', ids: ['L'] }] }));
    expect(core.sharedLocks).toEqual({ live: 1, items: 1, nextExpiry: 5000 });
    expect(
      core.pendingWrite(() => 1),
      'nothing to write',
    ).toBeUndefined();
    core.provideLockRows({ kind: 'locks', locks: new Map([['L', null]]) });
    expect(core.acknowledge('L', 0), 'answered once read').toBe('LOCK_NOT_FOUND');
  });

  it('declared dedup ids, read before the turn runs, leave the pushes nothing to ask', () => {
    const core = QueueCore.fromRecord({ version: 1, settings: SETTINGS, priorities: {}, lock: null });
    let reads = 0;
    const reader: SyncRowReader = {
      ...recordingReader([]),
      liveDedupIds: (ids) => {
        reads += 1;
        return new Set(ids.filter((id) => id === 'b'));
      },
    };
    // What the runner does with the turn's declared ids, before the first operation.
    drive(core, () => core.checkDedupIds(['a', 'b', 'c']), reader);
    expect(reads).toBe(1);
    expect(core.push([{ priority: 0, json: '1', dedupId: 'a' }], 0, 1000)).toEqual({ enqueued: 1, duplicates: 0 });
    expect(core.push([{ priority: 0, json: '2', dedupId: 'b' }], 0, 1000)).toEqual({ enqueued: 0, duplicates: 1 });
    expect(core.push([{ priority: 0, json: '3', dedupId: 'c' }], 0, 1000)).toEqual({ enqueued: 1, duplicates: 0 });
    expect(core.push([{ priority: 0, json: '4', dedupId: 'd' }], 0, 1000), 'an undeclared id is asked for').toEqual(new Needed({ dedupIds: ['d'] }));
  });

  it('one need names everything a call lacks: given-back rows and segments of a pop come in one round', () => {
    const withReturned: PriorityMetadata = { ...meta, returned: 1, next_position: 4, head_position: 1 };
    const core = QueueCore.fromRecord({ version: 1, settings: { ...SETTINGS, lockMode: 'shared' }, priorities: { '0': withReturned }, lock: null });
    const asked: LockRowsNeed[] = [];
    const reader: SyncRowReader = {
      ...recordingReader([]),
      segments: (refs) => refs.map(() => ({ entries: [1, 2, 3].map((position) => ({ position, json: `"${position}"` })) })),
      lockRows: (need) => {
        asked.push(need);
        return { kind: 'returned', priority: 0, entries: [{ segment: 0, position: 0, json: '"r"', deliveries: 1 }] };
      },
    };
    expect(core.pop(3, 0)).toEqual(
      new Needed({ segments: [{ priority: 0, segment: 0, from: 'state', purpose: 'use' }], lockRows: [{ kind: 'returned', priority: 0, limit: 1 }] }),
    );
    expect(json(drive(core, () => core.pop(3, 0), reader, 1))).toEqual(['"r"', '"1"', '"2"']);
    expect(asked).toHaveLength(1);
  });

  it('offloaded segments a pop reaches are asked for together, bottom up, and come back in one round', () => {
    const deep: PriorityMetadata = {
      count: 10,
      head_segment: 0,
      tail_segment: 3,
      head_offloaded_segment: 1,
      tail_offloaded_segment: 2,
      next_position: 1,
      head_position: 0,
    };
    const core = QueueCore.fromRecord({ version: 1, settings: SETTINGS, priorities: { '0': deep }, lock: null });
    const asked: SegmentRef[][] = [];
    const entries = (segment: number) => [0, 1, 2].map((position) => ({ position, json: `"${segment}.${position}"` }));
    const reader: SyncRowReader = {
      ...recordingReader([]),
      segments: (refs) => {
        asked.push([...refs]);
        return refs.map((r) => ({ entries: r.from === 'offload' || r.segment === 0 ? entries(r.segment) : [] }));
      },
    };
    const outcome = drive(core, () => core.pop(8, 0), reader, 1);
    expect(json(outcome)).toEqual(['"0.0"', '"0.1"', '"0.2"', '"1.0"', '"1.1"', '"1.2"', '"2.0"', '"2.1"']);
    expect(asked.map((refs) => refs.map((r) => `${r.segment}:${r.from}`))).toEqual([['0:state', '1:state', '1:offload', '2:state', '2:offload']]);
    expect(core.meta(0)).toMatchObject({ head_offloaded_segment: null, tail_offloaded_segment: null });
  });
});
