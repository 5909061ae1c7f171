import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { Queue } from './client.js';
import type { HeldLock, Take } from './lock-source.js';
import { PrefetchSource, type Pops } from './prefetch-source.js';
import type { PopResult } from './types.js';

type Item = { n: number };

/** A pop's answer of per-item locks for items `ns`. */
const answer = (...ns: number[]): PopResult<Item> => ({
  items: ns.map((n) => ({ n })),
  count: ns.length,
  locked: ns.length > 0,
  lock_ids: ns.map((n) => `lock-${n}`),
  lock_expires_at: Date.now() / 1000 + 30,
  delivery_counts: ns.map(() => 1),
});

/** Something that settles when told to, with what it is told. */
function later<T>(): { promise: Promise<T>; settle(value: T): void } {
  let settle!: (value: T) => void;
  const promise = new Promise<T>((resolve) => (settle = resolve));
  return { promise, settle };
}

const lockOf = (take: Take<Item>): HeldLock<Item> => {
  if (!('lock' in take)) throw new Error(`no lock: ${JSON.stringify(take)}`);
  return take.lock;
};

describe('PrefetchSource', () => {
  it('hands a slot waiting on a long poll the item an acknowledgement popped meanwhile (`next`), without waiting for the poll', async () => {
    const polls: { waitSeconds?: number }[] = [];
    const firstPoll = answer(1);
    const longPoll = later<PopResult<Item>>();
    const acknowledged = later<unknown>();
    const acknowledgements: unknown[] = [];
    const queue = {
      id: 'q',
      client: {
        call: (request: { body: unknown }) => {
          acknowledgements.push(request.body);
          return acknowledged.promise;
        },
      },
    } as unknown as Queue<Item>;
    const source: Pops<Item> = {
      only: queue,
      queue: () => queue,
      pop: async (options) => {
        polls.push({ waitSeconds: options.waitSeconds });
        // The first pop answers at once; the second is a long poll that nothing ends.
        return { result: polls.length === 1 ? firstPoll : await longPoll.promise, queueId: 'q' };
      },
    };
    const stopping = new AbortController();
    const prefetch = new PrefetchSource(
      source,
      { depth: 1, ttlSeconds: 30, waitSeconds: 20, includeHeaders: false, idleDelayMs: 10, concurrency: 1, prefetch: 4, extendEverySeconds: 10 },
      stopping.signal,
      () => undefined,
    );
    try {
      const first = lockOf(await prefetch.take(true));
      expect(first.lockId).toBe('lock-1');
      // The handler finished: its acknowledgement goes out (asking for what the buffer has room for)...
      const acking = prefetch.acknowledge(first);
      // ...while the slot asks for more: the buffer is empty, so it waits on a long poll.
      const taking = prefetch.take(true);
      await sleep(10);
      expect(polls).toStrictEqual([{ waitSeconds: 20 }, { waitSeconds: 20 }]);
      expect(acknowledgements).toMatchObject([{ lock_ids: ['lock-1'], next: { depth: 5, lock_per_item: true } }]);
      // The acknowledgement's turn ran before the push's item reached the poll: `next` brings it.
      acknowledged.settle({ success: true, items_acknowledged: 1, results: [{ lock_id: 'lock-1', status: 200, items_acknowledged: 1 }], next: answer(2) });
      await acking;
      const took = await Promise.race([taking, sleep(500).then(() => 'still waiting on the long poll' as const)]);
      expect(took === 'still waiting on the long poll' ? took : lockOf(took).lockId).toBe('lock-2');
    } finally {
      stopping.abort();
      longPoll.settle(answer());
      await prefetch.close();
    }
  });
});
