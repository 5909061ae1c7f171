import { type Consumer, type ConsumerOptions, type Handler, PushpopClient, RetryLater } from '@pushpop/client';
import { describe, expect, it } from 'vitest';
import { databaseKind, pollsWaitingOn, uniqueQueueId } from '../support/service.js';
import { consumerTestBed, FOURTH_CAPABILITIES, runChildScript, settledState, waitFor } from './client-support.js';

// An interface, as users write them: the client's generics take any object type.
interface Job {
  n: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe(`Consumer (${databaseKind})`, () => {
  const bed = consumerTestBed<Job>();

  async function fill(queueId: string, count: number, from = 0): Promise<void> {
    const queue = bed.client.queue<Job>(queueId);
    for (let i = 0; i < count; i += 1000) await queue.pushBatch(Array.from({ length: Math.min(1000, count - i) }, (_, k) => ({ item: { n: from + i + k } })));
  }

  function consume(queueId: string, handler: Handler<Job>, options: ConsumerOptions = {}): Consumer<Job> {
    const consumer = bed.client.consume<Job>(queueId, handler, { waitSeconds: 1, ...options });
    bed.consumers.push(consumer);
    return consumer;
  }

  const settled = (queueId: string) => settledState(bed.client, queueId);

  // The trial of a new user: concurrency 8, about 10% of the items failing once.
  for (const mode of ['exclusive', 'shared'] as const) {
    it(`concurrency 8, 10% failing once (${mode}): each item succeeds exactly once, the failed ones once more after the backoff, none lost`, async () => {
      const q = uniqueQueueId(`trial-${mode}`);
      const total = mode === 'exclusive' ? 300 : 1000;
      await bed.client.queue(q).updateSettings({ lock_mode: mode });
      await fill(q, total);
      const fails = (n: number) => n % 10 === 3;
      const calls = new Map<number, number[]>();
      const successes = new Map<number, number>();
      const firstDeliveries: number[] = [];
      let running = 0;
      let maxRunning = 0;
      const consumer = consume(
        q,
        async ({ item, deliveryCount }) => {
          running++;
          maxRunning = Math.max(maxRunning, running);
          try {
            calls.set(item.n, [...(calls.get(item.n) ?? []), deliveryCount]);
            if (deliveryCount === 1) firstDeliveries.push(item.n);
            await sleep(Math.random() * 2);
            if (fails(item.n) && deliveryCount === 1) throw new Error(`item ${item.n} fails once`);
            successes.set(item.n, (successes.get(item.n) ?? 0) + 1);
          } finally {
            running--;
          }
        },
        { concurrency: 8 },
      );
      const warnings: string[] = [];
      const retrying: { n: number; deliveryCount: number; delaySeconds: number; lockId: string }[] = [];
      const completed = new Set<string>();
      let drained = 0;
      consumer.on('warning', (message) => warnings.push(message));
      consumer.on('retrying', ({ item, deliveryCount, delaySeconds, lockId }) => retrying.push({ n: item.n, deliveryCount, delaySeconds, lockId }));
      consumer.on('completed', ({ item, deliveryCount, lockId }) => completed.add(`${item.n}@${deliveryCount}@${lockId}`));
      consumer.on('drained', () => drained++);
      await waitFor('every item completed', () => consumer.stats.completed === total, 90_000);
      await waitFor('drained', () => drained > 0, 10_000);
      await consumer.close();

      const failing = Array.from({ length: total }, (_, n) => n).filter(fails);
      expect(successes.size).toBe(total);
      expect(
        [...successes.values()].every((times) => times === 1),
        'no item succeeded twice',
      ).toBe(true);
      for (const [n, deliveries] of calls) expect(deliveries, `item ${n}`).toEqual(fails(n) ? [1, 2] : [1]);
      expect(consumer.stats).toEqual({ completed: total, retrying: failing.length, failed: 0, deadLettered: 0, lockLost: 0, released: 0 });
      expect(completed.size).toBe(total);
      expect(retrying.map((r) => r.n).sort((a, b) => a - b)).toEqual(failing);
      expect(retrying.every((r) => r.deliveryCount === 1 && r.delaySeconds === 1 && r.lockId.length >= 11)).toBe(true);
      expect(await settled(q)).toEqual({ count: 0, locked: 0, delayed: 0 });
      if (mode === 'exclusive') {
        // One item at a time, in push order, and the consumer said why it does not run 8 at once.
        expect(maxRunning).toBe(1);
        expect(firstDeliveries).toEqual(Array.from({ length: total }, (_, n) => n));
        expect(warnings).toEqual([expect.stringContaining(`lock_mode: 'shared'`)]);
        expect(consumer.lockMode).toBe('exclusive');
      } else {
        expect(maxRunning).toBeLessThanOrEqual(8);
        expect(maxRunning).toBeGreaterThan(1);
        expect(warnings).toEqual([]);
      }
    });

    it(`a poison item is retried after 1 s and 2 s, then dead-lettered on its third attempt, while the others finish (${mode})`, async () => {
      const q = uniqueQueueId(`poison-${mode}`);
      const dlq = `${q}.dlq`;
      await bed.client.queue(q).updateSettings({ lock_mode: mode, max_deliveries: 3, dead_letter_queue: dlq });
      await fill(q, 20);
      const poison = 4;
      const attempts: { deliveryCount: number; at: number }[] = [];
      const handled = new Map<number, number>();
      const consumer = consume(
        q,
        async ({ item, deliveryCount }) => {
          if (item.n !== poison) return void handled.set(item.n, (handled.get(item.n) ?? 0) + 1);
          attempts.push({ deliveryCount, at: Date.now() });
          throw new Error('poison');
        },
        { concurrency: mode === 'shared' ? 4 : 1 },
      );
      const events: unknown[] = [];
      consumer.on('retrying', ({ item, deliveryCount, delaySeconds }) => events.push(['retrying', item.n, deliveryCount, delaySeconds]));
      consumer.on('failed', ({ item, deliveryCount, deadLettered }) => events.push(['failed', item.n, deliveryCount, deadLettered]));
      consumer.on('deadLettered', ({ item, deadLetterQueue }) => events.push(['deadLettered', item.n, deadLetterQueue]));
      await waitFor('the poison item dead-lettered', () => consumer.stats.deadLettered === 1, 20_000);
      await waitFor('the others completed', () => consumer.stats.completed === 19);
      await consumer.close();

      expect(attempts.map((a) => a.deliveryCount)).toEqual([1, 2, 3]);
      expect(attempts[1].at - attempts[0].at, 'the first backoff: 1 s').toBeGreaterThanOrEqual(950);
      expect(attempts[2].at - attempts[1].at, 'the second backoff: 2 s').toBeGreaterThanOrEqual(1950);
      expect(events).toEqual([
        ['retrying', poison, 1, 1],
        ['retrying', poison, 2, 2],
        ['failed', poison, 3, true],
        ['deadLettered', poison, dlq],
      ]);
      expect([...handled.values()].every((times) => times === 1)).toBe(true);
      expect(handled.size).toBe(19);
      expect(await bed.client.queue<Job>(dlq).pop()).toMatchObject({ items: [{ n: poison }] });
      expect(await settled(q)).toEqual({ count: 0, locked: 0, delayed: 0 });
    });

    it(`an idle consumer closes within a second, its long polls cut, leaving no lock and taking nothing pushed afterwards (${mode})`, async () => {
      const q = uniqueQueueId(`idle-${mode}`);
      await bed.client.queue(q).updateSettings({ lock_mode: mode });
      const polls = mode === 'shared' ? 3 : 1;
      const consumer = consume(q, () => {}, { concurrency: polls, waitSeconds: 20 });
      await pollsWaitingOn(bed.svc, q, polls);
      const started = Date.now();
      await consumer.close();
      expect(Date.now() - started).toBeLessThanOrEqual(1000);
      const info = await bed.client.queue(q).info();
      expect({ lock: info.lock ?? null, locks: info.locks?.count ?? 0 }).toEqual({ lock: null, locks: 0 });
      await bed.client.queue<Job>(q).push({ n: 1 });
      expect(await bed.client.queue<Job>(q).pop({ requireAck: true })).toMatchObject({ items: [{ n: 1 }], delivery_counts: [1] });
    });

    it(`keeps the lock of a handler slower than the TTL by extending it; nothing is redelivered (${mode})`, async () => {
      const q = uniqueQueueId(`slow-${mode}`);
      await bed.client.queue(q).updateSettings({ lock_mode: mode });
      await fill(q, 2);
      const calls: number[] = [];
      const consumer = consume(
        q,
        async ({ item, signal }) => {
          calls.push(item.n);
          await sleep(3500);
          expect(signal.aborted).toBe(false);
        },
        mode === 'shared' ? { concurrency: 2, ttlSeconds: 1 } : { batchSize: 2, ttlSeconds: 1 },
      );
      const lost: unknown[] = [];
      consumer.on('lockLost', (info) => lost.push(info));
      await waitFor('both completed', () => consumer.stats.completed === 2, 15_000);
      await consumer.close();
      expect(calls.sort()).toEqual([0, 1]);
      expect(lost).toEqual([]);
      expect(await settled(q)).toEqual({ count: 0, locked: 0, delayed: 0 });
    });
  }

  for (const mode of ['exclusive', 'shared'] as const) {
    it(`drained comes once the queue runs dry and the last item is acknowledged, not when a long poll's wait runs out (${mode})`, async () => {
      const q = uniqueQueueId(`drained-${mode}`);
      // As the client's README shows it: a few items, a share of the consumers (max_in_flight) below the concurrency.
      await bed.client.queue(q).updateSettings({ lock_mode: mode, max_in_flight: 4 });
      await fill(q, 3);
      const started = Date.now();
      // Acknowledgements that take their time (a slow network): the queue is found empty while the last ones are in flight.
      const slowAcks = new PushpopClient({
        baseUrl: bed.svc.url,
        capabilities: FOURTH_CAPABILITIES,
        fetch: (input, init) =>
          (input instanceof Request ? input.url : input.toString()).includes('/acknowledge') ? sleep(300).then(() => fetch(input, init)) : fetch(input, init),
      });
      // The default wait of 20 s: a drained that waited for a long poll would come after it.
      const consumer = slowAcks.consume<Job>(q, async () => undefined, { concurrency: 8, waitSeconds: 20 });
      bed.consumers.push(consumer);
      let drainedAt: number | undefined;
      consumer.on('drained', () => (drainedAt ??= Date.now()));
      await waitFor('drained', () => drainedAt !== undefined, 10_000);
      expect(consumer.stats.completed).toBe(3);
      expect(drainedAt! - started, 'ms to drain 3 items').toBeLessThan(5_000);
      expect(await settled(q), 'every item acknowledged by then').toEqual({ count: 0, locked: 0, delayed: 0 });
      await consumer.close();
    });
  }

  it('a shared queue: a slow item does not hold up the others', async () => {
    const q = uniqueQueueId('slow-one');
    await bed.client.queue(q).updateSettings({ lock_mode: 'shared' });
    await fill(q, 40);
    const done: number[] = [];
    const consumer = consume(
      q,
      async ({ item }) => {
        await sleep(item.n === 0 ? 3000 : 5);
        done.push(item.n);
      },
      { concurrency: 4 },
    );
    await waitFor('the 39 fast items', () => done.length === 39, 20_000);
    expect(done).not.toContain(0);
    await waitFor('the slow one', () => consumer.stats.completed === 40, 10_000);
    await consumer.close();
  });

  it('an exclusive queue with batchSize: a batch under one lock, given back whole when one item fails', async () => {
    const q = uniqueQueueId('batch');
    await fill(q, 3);
    const calls: string[] = [];
    const errors: unknown[] = [];
    const warnings: string[] = [];
    const consumer = consume(
      q,
      async ({ item, deliveryCount }) => {
        calls.push(`${item.n}@${deliveryCount}`);
        if (item.n === 1 && deliveryCount === 1) throw new RetryLater(0);
      },
      { batchSize: 3, concurrency: 3 },
    );
    consumer.on('error', (error) => errors.push(error));
    consumer.on('warning', (message) => warnings.push(message));
    await waitFor('all completed', () => consumer.stats.completed === 3);
    await consumer.close();
    expect(errors).toEqual([]);
    expect(warnings).toEqual([]);
    expect(calls.sort()).toEqual(['0@1', '0@2', '1@1', '1@2', '2@1', '2@2']);
    expect(consumer.stats).toMatchObject({ completed: 3, retrying: 1, released: 2 });
  });

  it('gives up on a handler past maxProcessingSeconds: its signal aborts, it counts as a failed attempt, and its item comes back after the backoff', async () => {
    const q = uniqueQueueId('too-slow');
    await fill(q, 1);
    const reasons: unknown[] = [];
    const deliveries: number[] = [];
    const consumer = consume(
      q,
      async ({ signal, deliveryCount }) => {
        deliveries.push(deliveryCount);
        if (deliveryCount > 1) return;
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
        reasons.push(signal.reason);
      },
      { ttlSeconds: 5, maxProcessingSeconds: 0.5 },
    );
    const retrying: unknown[] = [];
    consumer.on('retrying', ({ error, delaySeconds }) => retrying.push([(error as Error).name, delaySeconds]));
    await waitFor('the second delivery completed', () => consumer.stats.completed === 1, 10_000);
    await consumer.close();
    expect(reasons).toEqual(['timeout']);
    expect(deliveries).toEqual([1, 2]);
    expect(retrying).toEqual([['HandlerTimeoutError', 1]]);
  });

  it('close() lets running handlers finish and acknowledges them, takes nothing new, leaves nothing locked', async () => {
    const q = uniqueQueueId('close');
    await bed.client.queue(q).updateSettings({ lock_mode: 'shared' });
    await fill(q, 9);
    const started: number[] = [];
    const consumer = consume(
      q,
      async ({ item }) => {
        started.push(item.n);
        await sleep(400);
      },
      { concurrency: 3 },
    );
    await waitFor('three handlers running', () => started.length === 3);
    await consumer.close();
    expect(started.sort()).toEqual([0, 1, 2]);
    expect(consumer.stats.completed).toBe(3);
    expect(await settled(q)).toEqual({ count: 6, locked: 0, delayed: 0 });
  });

  it('close() aborts a handler that outlives its timeout and gives its items back at once', async () => {
    const q = uniqueQueueId('close-timeout');
    await bed.client.queue(q).updateSettings({ lock_mode: 'shared', retry_delay_seconds: 60 });
    await fill(q, 2);
    let running = 0;
    const signals: AbortSignal[] = [];
    const consumer = consume(
      q,
      async ({ signal }) => {
        running++;
        signals.push(signal);
        await sleep(60_000); // ignores its signal
      },
      { concurrency: 2 },
    );
    await waitFor('both handlers running', () => running === 2);
    const started = Date.now();
    await consumer.close(300);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(signals.map((s) => s.reason)).toEqual(['shutdown', 'shutdown']);
    expect(consumer.stats).toMatchObject({ completed: 0, released: 2 });
    // Back without the queue's retry delay: nothing failed.
    expect(await settled(q)).toEqual({ count: 2, locked: 0, delayed: 0 });
  });

  it('a handler that throws RetryLater(2) gives its item back for 2 s: it waits among the delayed items, then comes back once', async () => {
    const q = uniqueQueueId('retry-later');
    await bed.client.queue(q).updateSettings({ lock_mode: 'shared' });
    await fill(q, 1);
    const deliveries: { count: number; at: number }[] = [];
    consume(q, async ({ deliveryCount }) => {
      deliveries.push({ count: deliveryCount, at: Date.now() });
      if (deliveryCount === 1) throw new RetryLater(2);
    });
    await waitFor('the first delivery given back with its delay', async () => deliveries.length === 1 && (await settled(q)).delayed === 1);
    await waitFor(
      'the second delivery, acknowledged',
      async () => deliveries.length === 2 && (await settled(q)).count === 0 && (await settled(q)).delayed === 0,
      10_000,
    );
    expect(deliveries.map((d) => d.count)).toEqual([1, 2]);
    expect(deliveries[1].at - deliveries[0].at, 'not before the 2 s delay').toBeGreaterThanOrEqual(1900);
  });

  it("a queue with a retry delay of its own: the consumer's releases name no delay and the queue's applies", async () => {
    const q = uniqueQueueId('queue-retry');
    await bed.client.queue(q).updateSettings({ lock_mode: 'shared', retry_delay_seconds: 2, retry_backoff: 'fixed' });
    await fill(q, 1);
    const deliveries: number[] = [];
    const consumer = consume(q, async ({ deliveryCount }) => {
      deliveries.push(Date.now());
      if (deliveryCount === 1) throw new Error('once');
    });
    const delays: number[] = [];
    consumer.on('retrying', ({ delaySeconds }) => delays.push(delaySeconds));
    await waitFor('completed on the second delivery', () => consumer.stats.completed === 1, 10_000);
    await consumer.close();
    expect(delays).toEqual([2]);
    expect(deliveries[1] - deliveries[0]).toBeGreaterThanOrEqual(1900);
  });

  it('a paused queue hands the consumer nothing until it is resumed', async () => {
    const q = uniqueQueueId('paused');
    await bed.client.queue(q).updateSettings({ paused: true, lock_mode: 'shared' });
    await fill(q, 3);
    const handled: number[] = [];
    consume(q, async ({ item }) => void handled.push(item.n), { concurrency: 3 });
    // The consumer has asked and waits: a pop that handed out items would have reached the handler first.
    await pollsWaitingOn(bed.svc, q);
    expect(handled, 'nothing while paused').toEqual([]);
    await bed.client.queue(q).updateSettings({ paused: false });
    await waitFor('every item handled after the resume', () => handled.length === 3);
    expect(handled.sort()).toEqual([0, 1, 2]);
  });

  it('lockMode shared given for an exclusive queue: the consumer follows the queue and says so', async () => {
    const q = uniqueQueueId('mode-mismatch');
    await fill(q, 3);
    const order: number[] = [];
    const consumer = consume(q, async ({ item }) => void order.push(item.n), { lockMode: 'shared', concurrency: 4 });
    const warnings: string[] = [];
    consumer.on('warning', (message) => warnings.push(message));
    await waitFor('all three', () => consumer.stats.completed === 3);
    await consumer.close();
    expect(order).toEqual([0, 1, 2]);
    expect(warnings).toEqual([expect.stringContaining('follows the queue'), expect.stringContaining('one at a time')]);
  });

  it('a consumer killed with SIGKILL mid-work: its items come back after the TTL and a second consumer handles them all', async () => {
    const q = uniqueQueueId('killed');
    await bed.client.queue(q).updateSettings({ lock_mode: 'shared' });
    await fill(q, 10);
    const child = runChildScript(
      bed,
      `import { PushpopClient } from ${JSON.stringify(bed.build.indexJs)};
const client = new PushpopClient({ baseUrl: process.env.PUSHPOP_URL });
client.consume(process.env.QUEUE, async ({ item }) => {
  process.stdout.write('started ' + item.n + '\\n');
  await new Promise(() => {});
}, { concurrency: 4, prefetch: 0, ttlSeconds: 2, waitSeconds: 1 });
`,
      { QUEUE: q },
    );
    await waitFor('the child handling four items', () => child.lines().length === 4);
    await child.kill();
    expect(await settled(q)).toMatchObject({ count: 6, locked: 4 });
    // The killed consumer's locks expire and their items come back.
    await waitFor('the items back after the TTL', async () => (await settled(q)).count === 10, 10_000);

    const handled = new Map<number, number>();
    const consumer = consume(q, ({ item, deliveryCount }) => void handled.set(item.n, deliveryCount), { concurrency: 4, ttlSeconds: 2 });
    await waitFor('all ten handled', () => consumer.stats.completed === 10, 20_000);
    await consumer.close();
    expect([...handled.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: 10 }, (_, n) => n));
    // The four the killed consumer held are on their second delivery.
    const started = child.lines().map((line) => Number(line.split(' ')[1]));
    expect(started.map((n) => handled.get(n))).toEqual([2, 2, 2, 2]);
    expect(await settled(q)).toEqual({ count: 0, locked: 0, delayed: 0 });
  });
});
