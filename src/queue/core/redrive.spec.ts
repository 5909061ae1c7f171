import { describe, expect, it } from 'vitest';
import { drive, type SyncRowReader } from './core-driver.js';
import { QueueCore } from './queue-core.js';
import type { DelayedItem, QueueSettings } from './types.js';
import { NOTHING_STORED } from '../../../test/support/core-fake-db.js';

const SETTINGS: QueueSettings = { segmentSize: 100, bufferSegments: 1 };
const NOW = 1_000_000;

/**
 * A dead-letter queue `dlq` holding these items in this order: dead letters (`from` set) and
 * items pushed with a delay (`from` null), which all join the queue as due delayed items, as
 * the turn statement writes dead letters.
 */
function deadLetterQueue(items: readonly { p?: number; n: number; from: string | null }[], settings: QueueSettings = SETTINGS): QueueCore {
  const due: DelayedItem[] = items.map((i, seq) => ({ dueAt: NOW, seq, priority: i.p ?? 0, json: json(i.n), ...(i.from !== null ? { from: i.from } : {}) }));
  const core = QueueCore.fromRecord({
    version: 1,
    settings,
    priorities: {},
    lock: null,
    delayed: { count: due.length, nextDueAt: NOW, nextSeq: due.length },
  });
  const reader: SyncRowReader = { ...NOTHING_STORED, dueItems: () => ({ items: due, nextDueAt: null }) };
  expect(drive(core, () => core.moveDueItems(NOW), reader)).toBe(items.length);
  return core;
}

const json = (n: number): string => JSON.stringify({ n });

function batch(core: QueueCore, request: { limit: number; skip?: number; destination?: string }) {
  return drive(core, () => core.redrive({ queueId: 'dlq', skip: 0, ...request }), NOTHING_STORED);
}

const popAll = (core: QueueCore): string[] => {
  const outcome = drive(core, () => core.pop(1000, 0), NOTHING_STORED);
  return 'items' in outcome ? outcome.items.map((i) => i.json) : [];
};

const redrivenOf = (core: QueueCore) => core.pendingWrite(() => 1)?.redriven.map((r) => [r.queueId, r.priority, r.json]);

describe('redrive', () => {
  it('sends each item back to the queue it was dead-lettered from, in order, and leaves items never dead-lettered where they are', () => {
    const core = deadLetterQueue([
      { n: 1, from: 'a' },
      { n: 2, from: null },
      { n: 3, from: 'b' },
      { n: 4, from: 'a' },
      { n: 5, from: null },
    ]);
    expect(batch(core, { limit: 10 })).toEqual({ moved: 3, left: 2, done: true, count: 2 });
    expect(redrivenOf(core)).toEqual([
      ['a', 0, json(1)],
      ['b', 0, json(3)],
      ['a', 0, json(4)],
    ]);
    expect(popAll(core)).toEqual([json(2), json(5)]);
  });

  it('sends every item to the destination given, dead-lettered or not, lowest priority first and FIFO within a priority', () => {
    const core = deadLetterQueue([
      { p: 2, n: 1, from: 'a' },
      { p: 0, n: 2, from: null },
      { p: 2, n: 3, from: null },
      { p: 0, n: 4, from: 'b' },
    ]);
    expect(batch(core, { limit: 10, destination: 'target' })).toEqual({ moved: 4, left: 0, done: true, count: 0 });
    expect(redrivenOf(core)).toEqual([
      ['target', 0, json(2)],
      ['target', 0, json(4)],
      ['target', 2, json(1)],
      ['target', 2, json(3)],
    ]);
    expect(core.priorityList()).toEqual([]);
  });

  it('moves at most the limit, from the front, and says whether more is left to look at', () => {
    const core = deadLetterQueue([1, 2, 3, 4, 5].map((n) => ({ n, from: 'a' })));
    expect(batch(core, { limit: 2 })).toEqual({ moved: 2, left: 0, done: false, count: 3 });
    expect(redrivenOf(core)?.map((r) => r[2])).toEqual([json(1), json(2)]);
    expect(batch(core, { limit: 3 })).toEqual({ moved: 3, left: 0, done: false, count: 0 });
    expect(batch(core, { limit: 3 })).toEqual({ moved: 0, left: 0, done: true, count: 0 });
  });

  it('a later batch looks past the items earlier batches left, which keep their places', () => {
    const core = deadLetterQueue([
      { n: 1, from: null },
      { n: 2, from: null },
      { n: 3, from: 'a' },
      { n: 4, from: null },
      { n: 5, from: 'a' },
    ]);
    expect(batch(core, { limit: 2 })).toEqual({ moved: 0, left: 2, done: false, count: 5 });
    expect(batch(core, { limit: 2, skip: 2 })).toEqual({ moved: 1, left: 1, done: false, count: 4 });
    expect(batch(core, { limit: 2, skip: 3 })).toEqual({ moved: 1, left: 0, done: true, count: 3 });
    expect(redrivenOf(core)?.map((r) => r[2])).toEqual([json(3), json(5)]);
    expect(popAll(core)).toEqual([json(1), json(2), json(4)]);
  });

  it('leaves items dead-lettered from the queue itself, and items held by a lock', () => {
    const core = deadLetterQueue([
      { n: 1, from: 'a' },
      { n: 2, from: 'dlq' },
      { n: 3, from: 'a' },
    ]);
    const popped = drive(core, () => core.pop(1, NOW, { lockId: 'L', ttlMs: 30_000 }), NOTHING_STORED);
    expect('lock' in popped && popped.lock?.items.map((i) => [i.json, i.from])).toEqual([[json(1), 'a']]);
    expect(batch(core, { limit: 10 })).toEqual({ moved: 1, left: 1, done: true, count: 1 });
    expect(redrivenOf(core)?.map((r) => r[2])).toEqual([json(3)]);
    expect(core.lock?.items.map((i) => i.json)).toEqual([json(1)]);
  });

  it('items left keep their delivery counts and where they came from; moved items carry no delivery count', () => {
    const core = deadLetterQueue([
      { n: 1, from: 'a' },
      { n: 2, from: null },
    ]);
    const popped = drive(core, () => core.pop(2, NOW, { lockId: 'L', ttlMs: 1 }), NOTHING_STORED);
    expect('lock' in popped).toBe(true);
    expect(drive(core, () => core.expireLock(NOW + 1), NOTHING_STORED)).toBe(2);
    expect(batch(core, { limit: 1, destination: 'x' })).toEqual({ moved: 1, left: 0, done: false, count: 1 });
    expect(core.pendingWrite(() => 1)?.redriven).toEqual([{ queueId: 'x', priority: 0, json: json(1) }]);
    const again = drive(core, () => core.pop(1, NOW + 2, { lockId: 'M', ttlMs: 1 }), NOTHING_STORED);
    expect('items' in again && again.items.map((i) => [i.json, i.deliveries, i.from])).toEqual([[json(2), 2, undefined]]);
  });

  it('the written rows of items left carry where they came from', () => {
    const core = deadLetterQueue([
      { n: 1, from: null },
      { n: 2, from: 'a' },
    ]);
    core.committed(core.pendingWrite(() => 1));
    expect(batch(core, { limit: 1 })).toEqual({ moved: 0, left: 1, done: false, count: 2 });
    expect(batch(core, { limit: 1, skip: 1 })).toEqual({ moved: 1, left: 0, done: false, count: 1 });
    const write = core.pendingWrite(() => 1)!;
    expect(write.redriven).toEqual([{ queueId: 'a', priority: 0, json: json(2) }]);
    expect(write.inserts.map((i) => [i.json, i.from])).toEqual([[json(1), undefined]]);
  });

  it('takes at most 32 segments of items per batch, and stops looking past items left once they fill that', () => {
    const small = { segmentSize: 1, bufferSegments: 1 };
    const core = deadLetterQueue(
      Array.from({ length: 40 }, (_, n) => ({ n, from: n < 35 ? null : 'a' })),
      small,
    );
    expect(batch(core, { limit: 1000 })).toEqual({ moved: 0, left: 32, done: false, count: 40 });
    expect(batch(core, { limit: 1000, skip: 32 })).toEqual({ moved: 0, left: 0, done: true, count: 40 });
    const moving = deadLetterQueue(
      Array.from({ length: 40 }, (_, n) => ({ n, from: 'a' })),
      small,
    );
    expect(batch(moving, { limit: 1000 })).toEqual({ moved: 32, left: 0, done: false, count: 8 });
    expect(batch(moving, { limit: 1000 })).toEqual({ moved: 8, left: 0, done: true, count: 0 });
  });

  it('a queue that does not exist has nothing to redrive', () => {
    const core = QueueCore.absent(SETTINGS);
    expect(drive(core, () => core.redrive({ queueId: 'dlq', limit: 10, skip: 0 }), NOTHING_STORED)).toBeUndefined();
  });
});
