import { describe, expect, it } from 'vitest';
import { drive, type SyncRowReader } from './core-driver.js';
import { QueueCore } from './queue-core.js';
import type { LockState } from './types.js';
import { NOTHING_STORED } from '../../../test/support/core-fake-db.js';

describe('delivery counts of stored items', () => {
  it('an item an exclusive lock gave back keeps its delivery count when its segment is read from the table', () => {
    const meta = {
      count: 2,
      head_segment: 0,
      tail_segment: 0,
      head_offloaded_segment: null,
      tail_offloaded_segment: null,
      next_position: 2,
      head_position: -1,
    };
    const core = QueueCore.fromRecord({ version: 1, settings: { segmentSize: 3, bufferSegments: 1 }, priorities: { '0': meta }, lock: null });
    const ack = { lockId: 'lock-1', ttlMs: 30_000 };
    const entries = [
      { position: -1, json: '{"a":1}', deliveries: 1 },
      { position: 0, json: '{"b":1}' },
    ];
    const outcome = drive(core, () => core.pop(2, 0, ack), { ...NOTHING_STORED, segments: (refs) => refs.map(() => ({ entries })) });
    expect(outcome && 'items' in outcome ? outcome.items.map((i) => [i.json, i.deliveries]) : outcome).toEqual([
      ['{"a":1}', 2],
      ['{"b":1}', 1],
    ]);
  });
});

describe('given-back items of shared locks', () => {
  it('a turn that gives items back and pops them again reads the stored given-back items once, and finds its own', () => {
    // Priority 0: item (0,0) given back earlier (in the table), item (0,1) under lock L, item (0,2) in the segment.
    const meta = {
      count: 1,
      head_segment: 0,
      tail_segment: 0,
      head_offloaded_segment: null,
      tail_offloaded_segment: null,
      next_position: 3,
      head_position: 2,
      returned: 1,
      held: 1,
    };
    const lock: LockState = {
      lockId: 'L',
      state: 'active',
      items: [{ priority: 0, json: '"b"', origin: { segment: 0, position: 1 }, deliveries: 1 }],
      createdAt: 0,
      expiresAt: 60_000,
    };
    const core = QueueCore.fromRecord({
      version: 1,
      settings: { segmentSize: 3, bufferSegments: 1, lockMode: 'shared' },
      priorities: { '0': meta },
      lock: null,
      shared: { live: 1, items: 1, nextExpiry: 60_000 },
    });
    let reads = 0;
    const reader: SyncRowReader = {
      ...NOTHING_STORED,
      segments: (refs) => refs.map(() => ({ entries: [{ position: 2, json: '"c"' }] })),
      lockRows: (need) => {
        if (need.kind === 'locks') return { kind: 'locks', locks: new Map([['L', lock]]) };
        if (need.kind !== 'returned') throw new Error(`unexpected read: ${need.kind}`);
        reads += 1;
        return { kind: 'returned', priority: 0, entries: [{ segment: 0, position: 0, json: '"a"', deliveries: 1 }].slice(0, need.limit) };
      },
    };
    expect(drive(core, () => core.release('L', 1_000), reader)).toBe(1);
    const popped = drive(core, () => core.pop(3, 0), reader);
    expect('items' in popped ? popped.items.map((i) => i.json) : popped).toEqual(['"a"', '"b"', '"c"']);
    expect(reads).toBe(1);
  });
});
