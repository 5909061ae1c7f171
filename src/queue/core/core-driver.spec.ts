import { describe, expect, it } from 'vitest';
import { drive, MAX_READ_ROUNDS, type RowReader, type SyncRowReader } from './core-driver.js';
import { QueueCore } from './queue-core.js';
import { MissingLockRows, type SegmentRef } from './types.js';

const SETTINGS = { segmentSize: 3, bufferSegments: 1 };
const meta = { count: 3, head_segment: 0, tail_segment: 0, head_offloaded_segment: null, tail_offloaded_segment: null, next_position: 3, head_position: 0 };
/** A stored queue with three items in segment 0 of priority 0, none of them in memory. */
const stored = (): QueueCore => QueueCore.fromRecord({ version: 1, settings: SETTINGS, priorities: { '0': meta }, lock: null });
const rows = [0, 1, 2].map((position) => ({ position, json: `"${position}"` }));

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
    const outcome = drive(core, () => core.pop(2), recordingReader(asked));
    expect('items' in outcome && outcome.items.map((i) => i.json)).toEqual(['"0"', '"1"']);
    expect(asked).toEqual([[{ priority: 0, segment: 0, from: 'state', purpose: 'use' }]]);
  });

  it('with a reader that answers with promises, answers with a promise of the value', async () => {
    const core = stored();
    const reader: RowReader = { ...recordingReader([]), segments: (refs) => Promise.resolve(refs.map(() => ({ entries: rows }))) };
    const pending = drive(core, () => core.pop(3), reader);
    expect(pending).toBeInstanceOf(Promise);
    const outcome = await pending;
    expect('items' in outcome && outcome.items).toHaveLength(3);
  });

  it('throws on what is not a request for rows, and a request still open after the last round', () => {
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
    const forever = (): never => {
      calls += 1;
      throw new MissingLockRows({ kind: 'next', exclude: [] });
    };
    expect(() => drive(core, forever, { ...reader, lockRows: () => ({ kind: 'next', nextExpiry: null }) })).toThrow(MissingLockRows);
    expect(calls).toBe(MAX_READ_ROUNDS + 1);
  });

  it('a failed read fails the call', async () => {
    const core = stored();
    const reader: RowReader = { ...recordingReader([]), segments: () => Promise.reject(new Error('database down')) };
    await expect(drive(core, () => core.pop(1), reader)).rejects.toThrow('database down');
  });
});
