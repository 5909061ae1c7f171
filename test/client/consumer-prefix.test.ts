import { type Consumer, type ConsumerOptions, type Handler, PushpopClient } from '@pushpop/client';
import { describe, expect, it } from 'vitest';
import { databaseKind, uniqueQueueId } from '../support/service.js';
import { consumerTestBed, FOURTH_CAPABILITIES, runChildScript, settledState, waitFor } from './client-support.js';

interface Job {
  n: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The Consumer of a prefix (`client.consumePrefix`): fair pops over the shared queues under it,
 * per-item locks prefetched, each item settled through its own queue by that queue's settings.
 */
describe(`Consumer of the queues under a prefix (${databaseKind})`, () => {
  const bed = consumerTestBed<Job>(FOURTH_CAPABILITIES);

  /** `count` items numbered from `from`, on a shared queue. */
  async function fill(queueId: string, count: number, from = 0): Promise<void> {
    const queue = bed.client.queue<Job>(queueId);
    await queue.updateSettings({ lock_mode: 'shared' });
    await queue.pushBatch(Array.from({ length: count }, (_, k) => ({ item: { n: from + k } })));
  }

  const settled = (queueId: string) => settledState(bed.client, queueId);

  async function total(queueIds: string[]): Promise<{ count: number; locked: number; delayed: number }> {
    const all = await Promise.all(queueIds.map(settled));
    return all.reduce((a, b) => ({ count: a.count + b.count, locked: a.locked + b.locked, delayed: a.delayed + b.delayed }));
  }

  function consume(on: PushpopClient, prefix: string, handler: Handler<Job>, options: ConsumerOptions = {}): Consumer<Job> {
    const consumer = on.consumePrefix<Job>(prefix, handler, { waitSeconds: 1, ...options });
    bed.consumers.push(consumer);
    return consumer;
  }

  it('items of several queues under the prefix are each handled exactly once, told their own queue; other queues are left alone', async () => {
    const prefix = `${uniqueQueueId('pfx-once')}:`;
    const queues = ['a', 'b', 'c', 'd', 'e'].map((t) => prefix + t);
    // Numbered apart per queue: item n belongs to queues[floor(n / 100)].
    for (const [i, q] of queues.entries()) await fill(q, 40 + 10 * i, 100 * i);
    // Outside the prefix (one character short of it), and an exclusive queue under it: not served.
    const outside = prefix.slice(0, -1);
    await fill(outside, 5, 9000);
    const exclusive = `${prefix}x`;
    await bed.client.queue<Job>(exclusive).pushBatch([{ item: { n: 9500 } }]);
    const expected = queues.reduce((sum, _, i) => sum + 40 + 10 * i, 0);
    const seen = new Map<number, string[]>();
    const order: string[] = [];
    const consumer = consume(
      bed.client,
      prefix,
      async ({ item, queueId }) => {
        seen.set(item.n, [...(seen.get(item.n) ?? []), queueId]);
        order.push(queueId);
        await sleep(Math.random() * 2);
      },
      { concurrency: 4, prefetch: 16 },
    );
    const events: string[] = [];
    consumer.on('completed', ({ item, queueId }) => events.push(`${item.n}@${queueId}`));
    await waitFor('every item done', () => consumer.stats.completed === expected, 60_000);
    await sleep(300);
    await consumer.close();
    expect(seen.size).toBe(expected);
    for (const [n, from] of seen) expect(from).toEqual([queues[Math.floor(n / 100)]]);
    expect(events).toHaveLength(expected);
    expect(events.every((e) => e === `${e.split('@')[0]}@${queues[Math.floor(Number(e.split('@')[0]) / 100)]}`)).toBe(true);
    expect(consumer.stats).toMatchObject({ completed: expected, retrying: 0, failed: 0, lockLost: 0 });
    // Taken in turn: the first 100 handled come from all five queues (queue by queue would be three: 40, 50, then 60).
    expect(new Set(order.slice(0, 100)).size).toBe(5);
    expect(await total(queues)).toEqual({ count: 0, locked: 0, delayed: 0 });
    expect(await settled(outside)).toEqual({ count: 5, locked: 0, delayed: 0 });
    expect(await settled(exclusive)).toEqual({ count: 1, locked: 0, delayed: 0 });
  });

  it("a handler failing once: its items come back from their own queue by that queue's settings, read once and only for queues with failures", async () => {
    const prefix = `${uniqueQueueId('pfx-fail')}:`;
    const [retried, deadLettering, quiet] = ['retried', 'dl', 'quiet'].map((t) => prefix + t);
    await fill(retried, 30, 0);
    await fill(deadLettering, 30, 100);
    await fill(quiet, 30, 200);
    // One queue gives failed items back after its own 1 s delay; one dead-letters at the first failure.
    await bed.client.queue(retried).updateSettings({ retry_delay_seconds: 1, retry_backoff: 'fixed' });
    await bed.client.queue(deadLettering).updateSettings({ max_deliveries: 1, dead_letter_queue: `dlq-${deadLettering}` });
    const fails = (n: number) => n < 200 && n % 10 === 3;
    const calls = new Map<number, { queueId: string; deliveryCount: number }[]>();
    const settingsReads: string[] = [];
    const watched = new PushpopClient({
      baseUrl: bed.svc.url,
      capabilities: FOURTH_CAPABILITIES,
      fetch: async (input, init) => {
        const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
        const read = /^\/queue\/([^/]+)\/settings$/.exec(url.pathname);
        if (read && (init?.method ?? 'GET') === 'GET') settingsReads.push(decodeURIComponent(read[1]));
        return fetch(input, init);
      },
    });
    const retrying: { n: number; queueId: string; delaySeconds: number }[] = [];
    const consumer = consume(
      watched,
      prefix,
      async ({ item, queueId, deliveryCount }) => {
        calls.set(item.n, [...(calls.get(item.n) ?? []), { queueId, deliveryCount }]);
        if (fails(item.n) && deliveryCount === 1) throw new Error(`item ${item.n} fails once`);
      },
      { concurrency: 8, backoff: { type: 'fixed', delaySeconds: 0 } },
    );
    consumer.on('retrying', ({ item, queueId, delaySeconds }) => retrying.push({ n: item.n, queueId, delaySeconds }));
    const deadLettered: { n: number; queueId: string; deadLetterQueue: string | null }[] = [];
    consumer.on('deadLettered', ({ item, queueId, deadLetterQueue }) => deadLettered.push({ n: item.n, queueId, deadLetterQueue }));
    // 90 items; the three of `dl` that fail are dead-lettered, the three of `retried` succeed on their second delivery.
    await waitFor('every item settled', () => consumer.stats.completed === 87 && consumer.stats.deadLettered === 3, 60_000);
    await consumer.close();
    for (const [n, deliveries] of calls) {
      const own = n < 100 ? retried : n < 200 ? deadLettering : quiet;
      expect(deliveries.every((d) => d.queueId === own)).toBe(true);
      if (fails(n) && n < 100) expect(deliveries.map((d) => d.deliveryCount)).toEqual([1, 2]);
      else expect(deliveries.map((d) => d.deliveryCount)).toEqual([1]);
    }
    expect(calls.size).toBe(90);
    expect(retrying.sort((a, b) => a.n - b.n)).toEqual([3, 13, 23].map((n) => ({ n, queueId: retried, delaySeconds: 1 })));
    expect(deadLettered.sort((a, b) => a.n - b.n)).toEqual(
      [103, 113, 123].map((n) => ({ n, queueId: deadLettering, deadLetterQueue: `dlq-${deadLettering}` })),
    );
    expect((await bed.client.queue<Job>(`dlq-${deadLettering}`).pop({ depth: 10 })).items.map((i) => i.n).sort((a, b) => a - b)).toEqual([103, 113, 123]);
    // Read once per queue with failures, never for the queue whose items all succeeded.
    expect(settingsReads.sort()).toEqual([deadLettering, retried].sort());
    expect(await total([retried, deadLettering, quiet])).toEqual({ count: 0, locked: 0, delayed: 0 });
  });

  it('close() gives the prefetched items back to their queues at once, while the running handler finishes and is acknowledged', async () => {
    const prefix = `${uniqueQueueId('pfx-close')}:`;
    const queues = ['a', 'b', 'c'].map((t) => prefix + t);
    for (const [i, q] of queues.entries()) await fill(q, 20, 100 * i);
    const started: { n: number; queueId: string }[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const consumer = consume(
      bed.client,
      prefix,
      async ({ item, queueId }) => {
        started.push({ n: item.n, queueId });
        await gate;
      },
      { concurrency: 1, prefetch: 10 },
    );
    await waitFor('the first handler running', () => started.length === 1);
    // One running, ten prefetched: eleven locked over the queues.
    await waitFor('the prefetch filled', async () => (await total(queues)).locked === 11, 5_000);
    const closing = consumer.close();
    await waitFor('the prefetched items back', async () => (await total(queues)).count === 59, 3_000);
    expect((await total(queues)).locked).toBe(1);
    // Poppable at once: sixty less the running one, by fair pops (locked, then given back).
    const taken: { queueId: string; lockId: string; count: number }[] = [];
    for (;;) {
      const answer = await bed.client.popFair<Job>(prefix, { depth: 100, requireAck: true });
      if (answer.count === 0) break;
      taken.push({ queueId: answer.queue_id!, lockId: answer.lock_id!, count: answer.count });
    }
    expect(taken.reduce((sum, t) => sum + t.count, 0)).toBe(59);
    for (const t of taken) await bed.client.queue(t.queueId).release(t.lockId, { delaySeconds: 0 });
    release();
    await closing;
    expect(started).toHaveLength(1);
    expect(consumer.stats.completed).toBe(1);
    const running = started[0];
    expect(await settled(running.queueId)).toEqual({ count: 19, locked: 0, delayed: 0 });
    expect(await total(queues)).toEqual({ count: 59, locked: 0, delayed: 0 });
  });

  it('a consumer of a prefix killed with SIGKILL holding prefetched and finished, unacknowledged items loses none: they come back after the TTL', async () => {
    const prefix = `${uniqueQueueId('pfx-killed')}:`;
    const queues = ['a', 'b', 'c', 'd'].map((t) => prefix + t);
    for (const [i, q] of queues.entries()) await fill(q, 10, 100 * i);
    // Its acknowledgements never leave (a fetch that holds them): its handlers finish, their items stay locked.
    const child = runChildScript(
      bed,
      `import { PushpopClient } from ${JSON.stringify(bed.build.indexJs)};
const client = new PushpopClient({
  baseUrl: process.env.PUSHPOP_URL,
  capabilities: ${JSON.stringify(FOURTH_CAPABILITIES)},
  fetch: (input, init) => (String(input).includes('/acknowledge') ? new Promise(() => {}) : fetch(input, init)),
});
client.consumePrefix(process.env.PREFIX, ({ item, queueId }) => void process.stdout.write('finished ' + item.n + ' ' + queueId + '\\n'), { concurrency: 4, prefetch: 12, ttlSeconds: 2, waitSeconds: 1 });
`,
      { PREFIX: prefix },
    );
    await waitFor('the child finishing items', () => child.lines().length >= 4);
    const held = await total(queues);
    await child.kill();
    const finishedInChild = child.lines();
    expect(held.locked).toBeGreaterThan(4);
    expect(held.count + held.locked).toBe(40);
    for (const line of finishedInChild) {
      const [, n, queueId] = line.split(' ');
      expect(queueId).toBe(queues[Math.floor(Number(n) / 100)]);
    }
    await waitFor('the items back after the TTL', async () => (await total(queues)).count === 40, 15_000);

    const handled = new Map<number, string>();
    const consumer = consume(bed.client, prefix, ({ item, queueId }) => void handled.set(item.n, queueId), { concurrency: 4, ttlSeconds: 2 });
    await waitFor('all forty handled', () => consumer.stats.completed === 40, 30_000);
    await consumer.close();
    expect([...handled.keys()].sort((a, b) => a - b)).toEqual(queues.flatMap((_, i) => Array.from({ length: 10 }, (_, k) => 100 * i + k)));
    for (const [n, queueId] of handled) expect(queueId).toBe(queues[Math.floor(n / 100)]);
    expect(await total(queues)).toEqual({ count: 0, locked: 0, delayed: 0 });
  });

  it('refuses a prefix outside the queue id alphabet at once', () => {
    expect(() => bed.client.consumePrefix('tenant/1', () => undefined)).toThrow(RangeError);
    expect(() => bed.client.consumePrefix('', () => undefined)).toThrow(RangeError);
  });
});
