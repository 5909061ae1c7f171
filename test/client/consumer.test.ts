import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Consumer, type ConsumerOptions, type Handler, PushpopClient, RetryLater } from '@pushpop/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseKind, pollsWaitingOn, removeDataDir, startService, type TestService, uniqueQueueId } from '../support/service.js';
import { buildClient, type ClientBuild, waitFor } from './client-support.js';

interface Job extends Record<string, unknown> {
  n: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe(`Consumer (${databaseKind})`, () => {
  let svc: TestService;
  let client: PushpopClient;
  let build: ClientBuild;
  const consumers: Consumer<Job>[] = [];
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    [svc, build] = await Promise.all([startService({ env: { LOCK_SWEEP_INTERVAL_MS: '100' } }), buildClient()]);
    client = new PushpopClient({ baseUrl: svc.url });
  });
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await Promise.all(consumers.map((c) => c.close(100)));
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
    build?.remove();
  });

  async function fill(queueId: string, count: number): Promise<void> {
    const queue = client.queue<Job>(queueId);
    for (let i = 0; i < count; i += 1000) await queue.pushBatch(Array.from({ length: Math.min(1000, count - i) }, (_, k) => ({ item: { n: i + k } })));
  }

  function consume(queueId: string, handler: Handler<Job>, options: ConsumerOptions = {}): Consumer<Job> {
    const consumer = client.consume<Job>(queueId, handler, { waitSeconds: 1, ...options });
    consumers.push(consumer);
    return consumer;
  }

  async function settled(queueId: string): Promise<{ count: number; locked: number; delayed: number }> {
    const info = await client.queue(queueId).info();
    return { count: info.count, locked: info.lock?.item_count ?? info.locks?.item_count ?? 0, delayed: info.delayed };
  }

  for (const mode of ['exclusive', 'shared'] as const) {
    it(`drains a queue with concurrency 8, every item handled and acknowledged once (${mode})`, async () => {
      const q = uniqueQueueId(`drain-${mode}`);
      const total = mode === 'exclusive' ? 10_000 : 400;
      await client.queue(q).updateSettings({ lock_mode: mode });
      await fill(q, total);
      const seen = new Map<number, number>();
      let running = 0;
      let maxRunning = 0;
      const consumer = consume(
        q,
        async ({ item, deliveryCount }) => {
          expect(deliveryCount).toBe(1);
          running++;
          maxRunning = Math.max(maxRunning, running);
          seen.set(item.n, (seen.get(item.n) ?? 0) + 1);
          await sleep(Math.random() * 2);
          running--;
        },
        { concurrency: 8 },
      );
      await waitFor('every item acknowledged', () => consumer.stats.acknowledged === total, 60_000);
      await consumer.close();
      expect(seen.size).toBe(total);
      expect([...seen.values()].every((times) => times === 1)).toBe(true);
      expect(maxRunning).toBeLessThanOrEqual(8);
      expect(maxRunning).toBeGreaterThan(1);
      expect(consumer.stats).toMatchObject({ acknowledged: total, failed: 0, released: 0, lockLost: 0 });
      expect(await settled(q)).toEqual({ count: 0, locked: 0, delayed: 0 });
    });

    it(`keeps the lock of a handler slower than the TTL by extending it; nothing is redelivered (${mode})`, async () => {
      const q = uniqueQueueId(`slow-${mode}`);
      await client.queue(q).updateSettings({ lock_mode: mode });
      await fill(q, 2);
      const calls: number[] = [];
      const consumer = consume(
        q,
        async ({ item, signal }) => {
          calls.push(item.n);
          await sleep(3500);
          expect(signal.aborted).toBe(false);
        },
        { concurrency: 2, ttlSeconds: 1 },
      );
      const lost: unknown[] = [];
      consumer.on('lockLost', (info) => lost.push(info));
      await waitFor('both acknowledged', () => consumer.stats.acknowledged === 2, 15_000);
      await consumer.close();
      expect(calls.sort()).toEqual([0, 1]);
      expect(lost).toEqual([]);
      expect(await settled(q)).toEqual({ count: 0, locked: 0, delayed: 0 });
    });
  }

  it('gives up on a handler past maxProcessingSeconds: its signal aborts and its item comes back', async () => {
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
    await waitFor('the second delivery acknowledged', () => consumer.stats.acknowledged === 1, 10_000);
    await consumer.close();
    expect(reasons).toEqual(['timeout']);
    expect(deliveries).toEqual([1, 2]);
  });

  it('close() lets running handlers finish and acknowledges them, takes nothing new, leaves nothing locked', async () => {
    const q = uniqueQueueId('close');
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
    expect(started).toEqual([0, 1, 2]);
    expect(consumer.stats.acknowledged).toBe(3);
    expect(await settled(q)).toEqual({ count: 6, locked: 0, delayed: 0 });
  });

  it('close() aborts a handler that outlives its timeout and releases its items', async () => {
    const q = uniqueQueueId('close-timeout');
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
    expect(consumer.stats).toMatchObject({ acknowledged: 0, released: 2 });
    expect(await settled(q)).toEqual({ count: 2, locked: 0, delayed: 0 });
  });

  it('releases the items of a failing handler; after max_deliveries they reach the dead-letter queue', async () => {
    const q = uniqueQueueId('failing');
    const dlq = `${q}.dlq`;
    await client.queue(q).updateSettings({ max_deliveries: 3, dead_letter_queue: dlq });
    await fill(q, 1);
    const deliveries: number[] = [];
    const failed: unknown[] = [];
    const consumer = consume(q, async ({ deliveryCount }) => {
      deliveries.push(deliveryCount);
      throw new Error('cannot handle this one');
    });
    consumer.on('failed', ({ error }) => failed.push((error as Error).message));
    await waitFor(
      'the item dead-lettered',
      async () =>
        (
          await client
            .queue(dlq)
            .info()
            .catch(() => ({ count: 0 }))
        ).count === 1,
    );
    await consumer.close();
    expect(deliveries).toEqual([1, 2, 3]);
    expect(failed).toEqual(Array(3).fill('cannot handle this one'));
    expect(await client.queue<Job>(dlq).pop()).toMatchObject({ items: [{ n: 0 }] });
    expect(await settled(q)).toEqual({ count: 0, locked: 0, delayed: 0 });
  });

  it('exclusive mode: one failing handler releases its whole lock, the others are handled again', async () => {
    const q = uniqueQueueId('partial');
    await fill(q, 3);
    const calls: string[] = [];
    const errors: unknown[] = [];
    const consumer = consume(
      q,
      async ({ item, deliveryCount }) => {
        calls.push(`${item.n}@${deliveryCount}`);
        if (item.n === 1 && deliveryCount === 1) throw new RetryLater(0);
      },
      { concurrency: 3 },
    );
    consumer.on('error', (error) => errors.push(error));
    await waitFor('all acknowledged', () => consumer.stats.acknowledged === 3);
    expect(errors, 'the service takes delay_seconds on a release').toEqual([]);
    await consumer.close();
    expect(calls.sort()).toEqual(['0@1', '0@2', '1@1', '1@2', '2@1', '2@2']);
  });

  it('a handler that throws RetryLater(2) gives its item back for 2 s: it waits among the delayed items, then comes back once', async () => {
    const q = uniqueQueueId('retry-later');
    await client.queue(q).updateSettings({ lock_mode: 'shared' });
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

  it('a paused queue hands the consumer nothing until it is resumed', async () => {
    const q = uniqueQueueId('paused');
    await client.queue(q).updateSettings({ paused: true });
    await fill(q, 3);
    const handled: number[] = [];
    consume(q, async ({ item }) => void handled.push(item.n), { concurrency: 3 });
    // The consumer has asked and waits: a pop that handed out items would have reached the handler first.
    await pollsWaitingOn(svc, q);
    expect(handled, 'nothing while paused').toEqual([]);
    await client.queue(q).updateSettings({ paused: false });
    await waitFor('every item handled after the resume', () => handled.length === 3);
    expect(handled.sort()).toEqual([0, 1, 2]);
  });

  it('a consumer killed with SIGKILL mid-batch: its items come back after the TTL and a second consumer handles them all', async () => {
    const q = uniqueQueueId('killed');
    await fill(q, 10);
    const dir = mkdtempSync(join(tmpdir(), 'pushpop-consumer-'));
    const script = join(dir, 'consumer.mjs');
    writeFileSync(
      script,
      `import { PushpopClient } from ${JSON.stringify(build.indexJs)};
const client = new PushpopClient({ baseUrl: process.env.PUSHPOP_URL });
client.consume(process.env.QUEUE, async ({ item }) => {
  process.stdout.write('started ' + item.n + '\\n');
  await new Promise(() => {});
}, { concurrency: 4, ttlSeconds: 2, waitSeconds: 1 });
`,
    );
    const child = spawn(process.execPath, [script], { env: { ...process.env, PUSHPOP_URL: svc.url, QUEUE: q }, stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    await waitFor('the child handling four items', () => output.split('\n').filter(Boolean).length === 4);
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    rmSync(dir, { recursive: true, force: true });
    expect(await settled(q)).toMatchObject({ count: 6, locked: 4 });
    // The killed consumer's lock expires and its items come back.
    await waitFor('the items back after the TTL', async () => (await settled(q)).count === 10, 10_000);

    const handled = new Map<number, number>();
    const consumer = consume(q, ({ item, deliveryCount }) => void handled.set(item.n, deliveryCount), { concurrency: 4, ttlSeconds: 2 });
    await waitFor('all ten handled', () => consumer.stats.acknowledged === 10, 20_000);
    await consumer.close();
    expect([...handled.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: 10 }, (_, n) => n));
    // The four the killed consumer held are on their second delivery.
    expect([0, 1, 2, 3].map((n) => handled.get(n))).toEqual([2, 2, 2, 2]);
    expect(await settled(q)).toEqual({ count: 0, locked: 0, delayed: 0 });
  });
});
