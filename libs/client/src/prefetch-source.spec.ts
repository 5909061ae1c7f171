import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it, vi } from 'vitest';
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

  describe("an adaptive prefetch (the consumer's default)", () => {
    type AckBody = { lock_ids: string[]; next?: { depth: number } };
    /** The answer of `acknowledge/batch` acknowledging every lock `body` names; a `next` asked for finds nothing. */
    const acknowledgedAll = (body: AckBody) => ({
      success: true,
      items_acknowledged: body.lock_ids.length,
      results: body.lock_ids.map((lockId) => ({ lock_id: lockId, status: 200, items_acknowledged: 1 })),
      ...(body.next ? { next: answer() } : {}),
    });

    /** The clock the source reads (`performance.now()`), moved by hand. */
    function handClock(): { now: number } {
      const clock = { now: 1_000 };
      vi.spyOn(performance, 'now').mockImplementation(() => clock.now);
      return clock;
    }
    afterEach(() => vi.restoreAllMocks());

    /**
     * A source over a queue whose pops answer as many items as asked, recording the depths;
     * acknowledgements go to `acknowledge` (by default answered at once).
     */
    function sourceOf(
      options: { concurrency: number; prefetch: number; adaptive: boolean },
      acknowledge: (body: AckBody) => Promise<unknown> = async (body) => acknowledgedAll(body),
    ) {
      const asked: number[] = [];
      let n = 0;
      const queue = { id: 'q', client: { call: ({ body }: { body: AckBody }) => acknowledge(body) } } as unknown as Queue<Item>;
      const pops: Pops<Item> = {
        only: queue,
        queue: () => queue,
        pop: async ({ depth = 1 }) => {
          asked.push(depth);
          return { result: answer(...Array.from({ length: depth }, () => n++)), queueId: 'q' };
        },
      };
      const stopping = new AbortController();
      const source = new PrefetchSource(
        pops,
        { depth: 1, ttlSeconds: 30, waitSeconds: 0, includeHeaders: false, idleDelayMs: 10, extendEverySeconds: 10, ...options },
        stopping.signal,
        () => undefined,
      );
      return { source, asked, stop: () => (stopping.abort(), source.close()) };
    }

    /** Takes a lock and acknowledges it `ms` later by the clock the source reads. */
    async function handle(source: PrefetchSource<Item>, clock: { now: number }, ms: number): Promise<void> {
      const lock = lockOf(await source.take(false));
      clock.now += ms;
      await source.acknowledge(lock);
    }

    it('asks for the concurrency until a handler finished, then for what the slots get through in 100 ms at their pace, from 1 up to `prefetch`', async () => {
      const clock = handClock();
      const { source, asked, stop } = sourceOf({ concurrency: 4, prefetch: 128, adaptive: true });
      try {
        expect(source.prefetch).toBe(4);
        await handle(source, clock, 40);
        // The first pop asked for the slots and as many buffered; one handler of 40 ms: 4 slots get through 10 in 100 ms.
        expect(asked[0]).toBe(8);
        expect(source.prefetch).toBe(10);
        // Handlers of a second: one buffered lock at most, however many slots.
        for (let i = 0; i < 60; i++) await handle(source, clock, 1_000);
        expect(source.prefetch).toBe(1);
        // Handlers that take no time: the bound is `prefetch`.
        for (let i = 0; i < 200; i++) await handle(source, clock, 0);
        expect(source.prefetch).toBe(128);
      } finally {
        await stop();
      }
    });

    it('a prefetch given stays as given, whatever the pace', async () => {
      const clock = handClock();
      const { source, asked, stop } = sourceOf({ concurrency: 4, prefetch: 16, adaptive: false });
      try {
        for (let i = 0; i < 20; i++) await handle(source, clock, 1_000);
        expect(source.prefetch).toBe(16);
        expect(asked[0]).toBe(20);
      } finally {
        await stop();
      }
    });

    it('below its most, what acknowledgements in flight asked for counts: overlapping ones ask only for what is left', async () => {
      const clock = handClock();
      const bodies: AckBody[] = [];
      const answers: (() => void)[] = [];
      const { source, stop } = sourceOf({ concurrency: 2, prefetch: 128, adaptive: true }, (body) => {
        bodies.push(body);
        return new Promise((resolve) => answers.push(() => resolve(acknowledgedAll(body))));
      });
      try {
        // The first pop brings 4 (2 + 2); all four taken (the last one leaves the buffer empty, so
        // one more is popped: 1 buffered), then two handlers of 20 ms finish one after the other.
        const locks = [];
        for (let i = 0; i < 4; i++) locks.push(lockOf(await source.take(false)));
        await sleep(10);
        clock.now += 20;
        const first = source.acknowledge(locks[0]);
        const second = source.acknowledge(locks[1]);
        // Handlers of 20 ms: the bound is 10. The first asks for 2 + 10 - 3 held - 1 buffered; the
        // second, in flight beside it, for what that leaves (2 + 10 - 2 - 1 - 8 asked), not for 9.
        expect(source.prefetch).toBe(10);
        expect(bodies.map((b) => b.next?.depth)).toEqual([8, 1]);
        for (const answered of answers.splice(0)) answered();
        await Promise.all([first, second]);
        // Answered (with nothing to pop): nothing counts as asked any more.
        clock.now += 20;
        void source.acknowledge(locks[2]);
        expect(bodies[2].next?.depth).toBe(10);
      } finally {
        for (const answered of answers.splice(0)) answered();
        await stop();
      }
    });
  });
});
