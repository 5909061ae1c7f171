import { type Consumer, type ConsumerOptions, type Handler, PushpopClient } from '@pushpop/client';
import { describe, expect, it } from 'vitest';
import { databaseKind, uniqueQueueId } from '../support/service.js';
import { consumerTestBed, FOURTH_CAPABILITIES, runChildScript, settledState, waitFor } from './client-support.js';

interface Job {
  n: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The Consumer on a service with the contract's fourth additions: a shared queue's items popped
 * many at a time under per-item locks into a prefetch, acknowledged in batches; an exclusive
 * queue acknowledged with `next`.
 */
describe(`Consumer with per-item locks and batch acknowledgements (${databaseKind})`, () => {
  const bed = consumerTestBed<Job>(FOURTH_CAPABILITIES);

  async function fill(queueId: string, count: number): Promise<void> {
    const queue = bed.client.queue<Job>(queueId);
    for (let i = 0; i < count; i += 1000) await queue.pushBatch(Array.from({ length: Math.min(1000, count - i) }, (_, k) => ({ item: { n: i + k } })));
  }

  const settled = (queueId: string) => settledState(bed.client, queueId);

  function consume(on: PushpopClient, queueId: string, handler: Handler<Job>, options: ConsumerOptions = {}): Consumer<Job> {
    const consumer = on.consume<Job>(queueId, handler, { waitSeconds: 1, ...options });
    bed.consumers.push(consumer);
    return consumer;
  }

  for (const mode of ['shared', 'exclusive'] as const) {
    it(`concurrency 8, 10% failing once (${mode}): each item succeeds exactly once, the failed ones once more after the backoff, none lost`, async () => {
      const q = uniqueQueueId(`trial4-${mode}`);
      const total = mode === 'exclusive' ? 200 : 1000;
      await bed.client.queue(q).updateSettings({ lock_mode: mode });
      await fill(q, total);
      const fails = (n: number) => n % 10 === 3;
      const calls = new Map<number, number[]>();
      const successes = new Map<number, number>();
      const consumer = consume(
        bed.client,
        q,
        async ({ item, deliveryCount }) => {
          calls.set(item.n, [...(calls.get(item.n) ?? []), deliveryCount]);
          await sleep(Math.random() * 2);
          if (fails(item.n) && deliveryCount === 1) throw new Error(`item ${item.n} fails once`);
          successes.set(item.n, (successes.get(item.n) ?? 0) + 1);
        },
        { concurrency: 8 },
      );
      consumer.on('warning', () => undefined);
      await waitFor('every item done', () => consumer.stats.completed === total, 90_000);
      await consumer.close();
      expect(successes.size).toBe(total);
      expect([...successes.values()].every((n) => n === 1)).toBe(true);
      for (const [n, deliveries] of calls) expect(deliveries).toEqual(fails(n) ? [1, 2] : [1]);
      expect(consumer.stats).toMatchObject({ completed: total, retrying: total / 10, failed: 0, lockLost: 0 });
      expect(await settled(q)).toEqual({ count: 0, locked: 0, delayed: 0 });
    });
  }

  it('no item is acknowledged before its handler finished: every lock id an acknowledgement request carries is of a finished handler', async () => {
    const q = uniqueQueueId('ack-after');
    await bed.client.queue(q).updateSettings({ lock_mode: 'shared' });
    const total = 400;
    await fill(q, total);
    const finished = new Set<string>();
    const early: string[] = [];
    const acknowledged: string[] = [];
    const routes: string[] = [];
    // The consumer's own requests, seen as they leave: an acknowledgement names finished locks only.
    const watched = new PushpopClient({
      baseUrl: bed.svc.url,
      capabilities: FOURTH_CAPABILITIES,
      fetch: async (input, init) => {
        const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
        routes.push(new URL(url).pathname.replace(`/queue/${q}`, ''));
        if (/\/acknowledge(\/batch)?$/.test(url) && typeof init?.body === 'string') {
          const body = JSON.parse(init.body) as { lock_id?: string; lock_ids?: string[] };
          for (const lockId of body.lock_ids ?? [body.lock_id!]) {
            acknowledged.push(lockId);
            if (!finished.has(lockId)) early.push(lockId);
          }
        }
        return fetch(input, init);
      },
    });
    const consumer = consume(
      watched,
      q,
      async ({ lockId }) => {
        await sleep(Math.random() * 3);
        finished.add(lockId);
      },
      { concurrency: 8 },
    );
    await waitFor('all handled', () => consumer.stats.completed === total, 60_000);
    await consumer.close();
    expect(early).toEqual([]);
    expect(acknowledged).toHaveLength(total);
    expect(new Set(acknowledged).size).toBe(total);
    // Many items per round trip: pops of many per-item locks, acknowledgements in batches.
    expect(routes.filter((r) => r === '/acknowledge/batch').length).toBeLessThan(total / 2);
    expect(routes.filter((r) => r === '/pop').length).toBeLessThan(total / 4);
    expect(await settled(q)).toEqual({ count: 0, locked: 0, delayed: 0 });
  });

  /** Starts a consumer of `q` whose handlers hold on until released; resolves once all `concurrency` of them run. */
  async function holdingConsumer(q: string, concurrency: number, options: ConsumerOptions = {}): Promise<{ consumer: Consumer<Job>; release: () => void }> {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let running = 0;
    const consumer = consume(
      bed.client,
      q,
      async () => {
        running += 1;
        await gate;
      },
      { concurrency, ...options },
    );
    await waitFor('every slot running', () => running === concurrency);
    return { consumer, release };
  }

  it('a prefetch given bounds the locks held at concurrency + prefetch: handlers that hold on keep that many at most', async () => {
    // [concurrency, prefetch, locks held once the buffer is filled]: at 2, one pop of 100 (the most a pop asks;
    // 2 + 98 buffered, more than half of 128, so no other pop); at 40, 40 + 160, the bound.
    for (const [concurrency, prefetch, held] of [
      [2, 128, 100],
      [40, 160, 200],
    ]) {
      const q = uniqueQueueId(`given-prefetch-${concurrency}`);
      await bed.client.queue(q).updateSettings({ lock_mode: 'shared' });
      await fill(q, 400);
      const { consumer, release } = await holdingConsumer(q, concurrency, { prefetch });
      await waitFor('the prefetch filled', async () => (await settled(q)).locked === held, 5_000);
      // Nothing more comes while the handlers hold on.
      await sleep(300);
      expect((await settled(q)).locked).toBe(held);
      const closing = consumer.close();
      release();
      await closing;
    }
  });

  it('by default the prefetch follows the handlers: as many as the concurrency until one finished, no hoard behind slow handlers, many per request behind fast ones', async () => {
    // Handlers that hold on: the slots and as many buffered, nothing more.
    const held = uniqueQueueId('adaptive-held');
    await bed.client.queue(held).updateSettings({ lock_mode: 'shared' });
    await fill(held, 400);
    const holding = await holdingConsumer(held, 8);
    await waitFor('the prefetch filled', async () => (await settled(held)).locked === 16, 5_000);
    await sleep(300);
    expect((await settled(held)).locked).toBe(16);
    const closing = holding.consumer.close();
    holding.release();
    await closing;

    // Handlers of 100 ms at concurrency 2: the two slots get through two items in 100 ms, so two
    // wait in the buffer besides the two running; the service also counts those just finished
    // until their acknowledgement commits (one per slot), and acknowledgements that overlap may
    // each bring what the buffer had room for when they left (7 at most in the runs so far).
    // A fixed prefetch of 128 would hold all 40 at once.
    const slow = uniqueQueueId('adaptive-slow');
    await bed.client.queue(slow).updateSettings({ lock_mode: 'shared' });
    await fill(slow, 40);
    const slowConsumer = consume(bed.client, slow, () => sleep(100), { concurrency: 2 });
    let most = 0;
    while (slowConsumer.stats.completed < 40) {
      most = Math.max(most, (await settled(slow)).locked);
      await sleep(20);
    }
    await slowConsumer.close();
    expect(most).toBeGreaterThanOrEqual(2);
    expect(most).toBeLessThanOrEqual(8);

    // No-op handlers: the bound grows to the default's four times the concurrency (at least 128),
    // so each request brings many items.
    const fast = uniqueQueueId('adaptive-fast');
    await bed.client.queue(fast).updateSettings({ lock_mode: 'shared' });
    await fill(fast, 2000);
    const counting = new PushpopClient({ baseUrl: bed.svc.url, capabilities: FOURTH_CAPABILITIES });
    const fastConsumer = consume(counting, fast, () => undefined, { concurrency: 2 });
    await waitFor('all handled', () => fastConsumer.stats.completed === 2000, 60_000);
    await fastConsumer.close();
    // With the bound stuck at the concurrency, pops and `next`s of 4 items at most would take 500
    // requests for 2,000 items, besides the acknowledgements; here about 100 or fewer in all.
    expect(counting.requests).toBeLessThan(250);
  });

  it('close() gives the prefetched items back at once, while the running handler finishes and is acknowledged', async () => {
    const q = uniqueQueueId('close-prefetch');
    await bed.client.queue(q).updateSettings({ lock_mode: 'shared' });
    await fill(q, 30);
    const started: number[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const consumer = consume(
      bed.client,
      q,
      async ({ item }) => {
        started.push(item.n);
        await gate;
      },
      { concurrency: 1, prefetch: 10 },
    );
    await waitFor('the first handler running', () => started.length === 1);
    // One running, ten prefetched: eleven locked.
    await waitFor('the prefetch filled', async () => (await settled(q)).locked === 11, 5_000);
    const closing = consumer.close();
    // The ten waiting come back while the running handler still runs.
    await waitFor('the prefetched items back', async () => (await settled(q)).count === 29, 3_000);
    expect((await settled(q)).locked).toBe(1);
    release();
    await closing;
    expect(started).toEqual([0]);
    expect(consumer.stats.completed).toBe(1);
    expect(await settled(q)).toEqual({ count: 29, locked: 0, delayed: 0 });
    // They were given back without a failure: their delivery count is not held against them.
    const popped = await bed.client.queue<Job>(q).pop({ depth: 1, requireAck: true });
    expect(popped.items).toEqual([{ n: 1 }]);
  });

  it('a consumer killed with SIGKILL holding prefetched items and finished, unacknowledged ones loses none: they come back after the TTL', async () => {
    const q = uniqueQueueId('killed-prefetch');
    await bed.client.queue(q).updateSettings({ lock_mode: 'shared' });
    await fill(q, 40);
    // Its acknowledgements never leave (a fetch that holds them): its handlers finish, their items stay locked.
    const child = runChildScript(
      bed,
      `import { PushpopClient } from ${JSON.stringify(bed.build.indexJs)};
const client = new PushpopClient({
  baseUrl: process.env.PUSHPOP_URL,
  capabilities: ${JSON.stringify(FOURTH_CAPABILITIES)},
  fetch: (input, init) => (String(input).includes('/acknowledge') ? new Promise(() => {}) : fetch(input, init)),
});
client.consume(process.env.QUEUE, ({ item }) => void process.stdout.write('finished ' + item.n + '\\n'), { concurrency: 4, prefetch: 12, ttlSeconds: 2, waitSeconds: 1 });
`,
      { QUEUE: q },
    );
    await waitFor('the child finishing items', () => child.lines().length >= 4);
    const held = await settled(q);
    await child.kill();
    const finishedInChild = child.lines().length;
    // It held more than it finished: prefetched ones too.
    expect(held.locked).toBeGreaterThan(4);
    expect(held.count + held.locked).toBe(40);
    await waitFor('the items back after the TTL', async () => (await settled(q)).count === 40, 15_000);

    const handled = new Map<number, number>();
    const consumer = consume(bed.client, q, ({ item, deliveryCount }) => void handled.set(item.n, deliveryCount), { concurrency: 4, ttlSeconds: 2 });
    await waitFor('all forty handled', () => consumer.stats.completed === 40, 30_000);
    await consumer.close();
    expect([...handled.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: 40 }, (_, n) => n));
    expect(finishedInChild).toBeGreaterThanOrEqual(4);
    expect(await settled(q)).toEqual({ count: 0, locked: 0, delayed: 0 });
  });

  it('an exclusive queue: one request per item, acknowledging and popping the next together, in order', async () => {
    const q = uniqueQueueId('ack-next');
    await fill(q, 50);
    const order: number[] = [];
    const watched = new PushpopClient({ baseUrl: bed.svc.url, capabilities: FOURTH_CAPABILITIES });
    const consumer = consume(watched, q, ({ item }) => void order.push(item.n));
    await waitFor('all handled', () => consumer.stats.completed === 50, 30_000);
    await consumer.close();
    expect(order).toEqual(Array.from({ length: 50 }, (_, n) => n));
    // settings, the first pop, then an acknowledgement per item (carrying the next pop), and the look that finds it empty
    expect(watched.requests).toBeLessThanOrEqual(50 + 6);
    expect(await settled(q)).toEqual({ count: 0, locked: 0, delayed: 0 });
  });
});
