import { isPushpopError, PushpopClient, PushpopError, retryDelayMs } from '@pushpop/client';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { freePort } from '../support/child-service.js';
import { databaseKind, removeDataDir, sharedDatabase, startService, type TestService, uniqueQueueId } from '../support/service.js';

// A plain interface, as the README writes it: the client's generics take any object type.
interface Order {
  id: number;
  sku: string;
}

describe(`PushpopClient and Producer (${databaseKind})`, () => {
  let svc: TestService;
  let limited: TestService;

  beforeAll(async () => {
    svc = await startService();
    limited = await startService({ env: { ...sharedDatabase(svc), RATE_LIMIT_PER_SECOND: '4', RATE_LIMIT_BURST: '2' } });
  });
  afterAll(async () => {
    await limited?.close();
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  it('every queue route, typed by item, with errors thrown as PushpopError', async () => {
    const client = new PushpopClient({ baseUrl: svc.url });
    const orders = client.queue<Order>(uniqueQueueId('orders'));
    await orders.push({ id: 1, sku: 'a' }, { priority: 1 });
    expect(await orders.push({ id: 2, sku: 'b' }, { dedupId: 'o-2' })).toMatchObject({ success: true });
    expect(await orders.push({ id: 2, sku: 'b' }, { dedupId: 'o-2' })).toMatchObject({ duplicate: true });
    expect(await orders.pushBatch([{ item: { id: 3, sku: 'c' } }, { item: { id: 4, sku: 'd' }, delaySeconds: 600 }])).toMatchObject({ count: 2 });

    const info = await orders.info();
    expect(info).toMatchObject({ count: 3, delayed: 1, lock: null });
    expect((await orders.settings()).lock_mode).toBe('exclusive');

    const popped = await orders.pop({ depth: 10, requireAck: true, ttlSeconds: 5 });
    expectTypeOf(popped.items).toEqualTypeOf<Order[]>();
    expect(popped.items.map((o) => o.id)).toEqual([2, 3, 1]);
    expect(popped.delivery_counts).toEqual([1, 1, 1]);

    const locked = await orders.pop().catch((e: unknown) => e);
    expect(locked).toBeInstanceOf(PushpopError);
    expect(locked).toMatchObject({ status: 423, errorCode: 'QUEUE_LOCKED', error_code: 'QUEUE_LOCKED' });
    expect((locked as PushpopError).body?.lock_expires_at).toEqual(expect.any(Number));

    expect(await orders.extendLock(popped.lock_id!, 10)).toMatchObject({ success: true });
    expect(await orders.release(popped.lock_id!)).toMatchObject({ items_returned: 3 });
    const again = await orders.pop({ depth: 10, requireAck: true });
    expect(again.delivery_counts).toEqual([2, 2, 2]);
    expect(await orders.acknowledge(again.lock_id!)).toMatchObject({ items_acknowledged: 3 });
    const gone = await orders.acknowledge(again.lock_id!).catch((e: unknown) => e);
    expect(isPushpopError(gone, 'LOCK_NOT_FOUND', 'INVALID_LOCK_ID')).toBe(true);

    const listed = await client.listQueues({ prefix: orders.id });
    expect(listed.queues).toEqual([{ queue_id: orders.id, count: 0, locked: false, paused: false }]);
    expect(await orders.updateSettings({ lock_mode: 'shared' })).toMatchObject({ lock_mode: 'shared' });
    expect(await orders.delete()).toMatchObject({ success: true });
    await expect(orders.info()).rejects.toMatchObject({ status: 404, errorCode: 'QUEUE_NOT_FOUND' });
  });

  it('popFair pops the queues under a prefix in turn and names the queue, whose lock it acknowledges', async () => {
    const client = new PushpopClient({ baseUrl: svc.url });
    const prefix = `${uniqueQueueId('tenants')}-`;
    for (const [tenant, id] of [
      ['b', 1],
      ['a', 2],
      ['b', 3],
    ] as const)
      await client.queue<Order>(prefix + tenant).push({ id, sku: tenant });
    const first = await client.popFair<Order>(prefix, { requireAck: true });
    expectTypeOf(first.items).toEqualTypeOf<Order[]>();
    expect(first).toMatchObject({ items: [{ id: 2, sku: 'a' }], count: 1, locked: true, queue_id: `${prefix}a` });
    expect(await client.queue(first.queue_id!).acknowledge(first.lock_id!)).toMatchObject({ items_acknowledged: 1 });
    expect(await client.popFair<Order>(prefix)).toMatchObject({ items: [{ id: 1 }], queue_id: `${prefix}b` });
    expect(await client.popFair<Order>(prefix)).toMatchObject({ items: [{ id: 3 }], queue_id: `${prefix}b` });
    expect(await client.popFair<Order>(prefix, { waitSeconds: 1 })).toEqual({ items: [], count: 0 });
    await expect(client.popFair('not a prefix')).rejects.toMatchObject({ status: 400, errorCode: 'VALIDATION_FAILED' });
  });

  it('errors name the method and the path called; with no answer, the address and the reason', async () => {
    const client = new PushpopClient({ baseUrl: svc.url });
    const q = uniqueQueueId('missing');
    await expect(client.queue(q).info()).rejects.toThrow(`GET /queue/${q}: 404 QUEUE_NOT_FOUND: `);
    await expect(client.queue('a b').push({})).rejects.toThrow('POST /queue/a%20b/push: 400 INVALID_QUEUE_ID: ');
    const port = await freePort();
    const nobody = new PushpopClient({ baseUrl: `http://127.0.0.1:${port}`, retry: { retries: 0 } });
    const error = await nobody
      .queue('orders')
      .push({})
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ status: 0, errorCode: 'NETWORK_ERROR' });
    expect((error as Error).message).toBe(`cannot reach http://127.0.0.1:${port} (POST /queue/orders/push): connect ECONNREFUSED 127.0.0.1:${port}`);
  });

  it('peek shows the next items in pop order, across priorities and offloaded segments, and takes nothing', async () => {
    const client = new PushpopClient({ baseUrl: svc.url });
    const queue = client.queue<{ n: number }>(uniqueQueueId('peek'));
    await queue.updateSettings({ segment_size: 2, buffer_segments: 1, lock_mode: 'shared' });
    await queue.pushBatch(Array.from({ length: 9 }, (_, n) => ({ item: { n }, priority: n === 8 ? 0 : 1 })));
    const peeked = await queue.peek(6);
    expect(peeked).toEqual({ items: [0, 1, 2, 3, 4, 5].map((n, i) => ({ priority: i === 0 ? 0 : 1, item: { n: i === 0 ? 8 : n - 1 } })), count: 9, hidden: 0 });
    expect((await queue.peek(100)).items).toHaveLength(9);
    // Given back to a shared queue's front: counted as hidden, popped first.
    const lock = await queue.pop({ requireAck: true, depth: 2 });
    await queue.release(lock.lock_id!, { delaySeconds: 0 });
    expect(await queue.peek(2)).toMatchObject({ hidden: 2, count: 9 });
    expect((await queue.pop({ depth: 9 })).items.map((i) => i.n)).toEqual([8, 0, 1, 2, 3, 4, 5, 6, 7]);
    expect(await queue.peek()).toEqual({ items: [], count: 0, hidden: 0 });
  });

  it('aborts a call with its signal, and times out a call that takes too long', async () => {
    const client = new PushpopClient({ baseUrl: svc.url, timeoutMs: 300 });
    const queue = client.queue(uniqueQueueId('abort'));
    const controller = new AbortController();
    const waiting = queue.pop({ waitSeconds: 5, signal: controller.signal });
    setTimeout(() => controller.abort(), 100);
    await expect(waiting).rejects.toMatchObject({ errorCode: 'ABORTED' });

    // A long poll's wait is added to the timeout, so it is not cut short...
    expect(await queue.pop({ waitSeconds: 1 })).toMatchObject({ items: [] });
    // ...but an answer slower than the timeout is.
    const slow = new PushpopClient({
      baseUrl: svc.url,
      timeoutMs: 300,
      fetch: async (_input, init) => new Promise<Response>((_, reject) => init!.signal!.addEventListener('abort', () => reject(new Error('aborted')))),
    });
    await expect(slow.queue('x').info()).rejects.toMatchObject({ errorCode: 'TIMEOUT', status: 0 });
  });

  it('retries 429 after its Retry-After; without retries the 429 is thrown; other errors are not retried', async () => {
    const client = new PushpopClient({ baseUrl: limited.url, retry: { retries: 10, maxDelayMs: 1000 } });
    const queue = client.queue(uniqueQueueId('limited'));
    for (let i = 0; i < 6; i++) await queue.push({ i });
    expect(client.requests).toBeGreaterThan(6);
    expect((await new PushpopClient({ baseUrl: svc.url }).queue(queue.id).info()).count).toBe(6);

    const impatient = new PushpopClient({ baseUrl: limited.url, retry: { retries: 0 } });
    const errors: unknown[] = [];
    for (let i = 0; i < 4; i++)
      await impatient
        .queue(queue.id)
        .push({ i })
        .catch((e: unknown) => errors.push(e));
    expect(errors.length).toBeGreaterThan(0);
    expect(errors[0]).toMatchObject({ status: 429, errorCode: 'RATE_LIMITED' });

    const plain = new PushpopClient({ baseUrl: svc.url });
    await expect(plain.queue(queue.id).pop({ ttlSeconds: 0, requireAck: true })).rejects.toMatchObject({ status: 400, errorCode: 'VALIDATION_FAILED' });
    expect(plain.requests).toBe(1);
  });

  it('retry waits follow Retry-After, capped and jittered down', () => {
    const options = { retries: 5, minDelayMs: 100, maxDelayMs: 5000, jitter: 0.5, statuses: [429, 503] };
    expect(retryDelayMs(0, 2000, options, () => 0)).toBe(2000);
    expect(retryDelayMs(0, 2000, options, () => 1)).toBe(1000);
    expect(retryDelayMs(0, 60_000, options, () => 0)).toBe(5000);
    expect(retryDelayMs(3, undefined, options, () => 0)).toBe(800);
  });

  it('retries 503 STORE_UNAVAILABLE after its Retry-After, up to the configured retries', async () => {
    const answers: number[] = [];
    const fakeService = (failures: number) => async () => {
      const status = answers.length < failures ? 503 : 200;
      answers.push(status);
      const body =
        status === 503 ? { statusCode: 503, error_code: 'STORE_UNAVAILABLE', message: 'database unreachable' } : { success: true, message: 'pushed' };
      return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', 'retry-after': '0' } });
    };
    const client = new PushpopClient({ baseUrl: 'http://pushpop.invalid', fetch: fakeService(2), retry: { retries: 2 } });
    expect(await client.queue('q').push({})).toMatchObject({ success: true });
    expect(answers).toEqual([503, 503, 200]);

    answers.length = 0;
    const giveUp = new PushpopClient({ baseUrl: 'http://pushpop.invalid', fetch: fakeService(5), retry: { retries: 2 } });
    await expect(giveUp.queue('q').push({})).rejects.toMatchObject({ status: 503, errorCode: 'STORE_UNAVAILABLE' });
    expect(answers).toEqual([503, 503, 503]);
  });

  it('a consumer treats paused and limited answers as "nothing now" and polls again', async () => {
    const calls: string[] = [];
    const answers = [
      { items: [], count: 0, locked: false, paused: true },
      { items: [], count: 0, locked: false, limited: true },
      { items: [{ n: 1 }], count: 1, locked: true, lock_id: 'lock-abcdefghijk', lock_expires_at: Date.now() / 1000 + 30, delivery_counts: [3] },
    ];
    const json = (body: unknown) => new Response(JSON.stringify(body), { headers: { 'content-type': 'application/json' } });
    const client = new PushpopClient({
      baseUrl: 'http://pushpop.invalid',
      fetch: async (input) => {
        const url = new URL(input);
        if (url.pathname.endsWith('/settings')) return json({ lock_mode: 'exclusive', dead_letter_queue: null, max_deliveries: null, retry_delay_seconds: 0 });
        if (url.pathname === '/openapi.json') return new Response('{}', { status: 404 });
        calls.push(url.pathname.split('/').pop()!);
        if (url.pathname.endsWith('/pop')) return json(answers.shift() ?? { items: [], count: 0, locked: false });
        return json({ success: true, message: 'ok', items_acknowledged: 1 });
      },
    });
    const handled: unknown[] = [];
    const consumer = client.consume('q', ({ item, deliveryCount }) => void handled.push({ item, deliveryCount }), {
      lockMode: 'exclusive',
      waitSeconds: 0,
      idleDelayMs: 50,
    });
    await expect.poll(() => consumer.stats.completed).toBe(1);
    await consumer.close();
    expect(handled).toEqual([{ item: { n: 1 }, deliveryCount: 3 }]);
    expect(calls.slice(0, 4)).toEqual(['pop', 'pop', 'pop', 'acknowledge']);
  });

  it('sends the release delay the handler chose as delay_seconds', async () => {
    const bodies: unknown[] = [];
    const client = new PushpopClient({
      baseUrl: 'http://pushpop.invalid',
      fetch: async (_input, init) => {
        bodies.push(JSON.parse(init!.body as string));
        return new Response(JSON.stringify({ success: true, items_returned: 1, items_delayed: 1 }), { headers: { 'content-type': 'application/json' } });
      },
    });
    expect(await client.queue('q').release('lock-1234567890', { delaySeconds: 30 })).toMatchObject({ items_delayed: 1 });
    expect(bodies).toEqual([{ lock_id: 'lock-1234567890', delay_seconds: 30 }]);
  });

  it('a producer batches concurrent pushes into few requests, each caller getting its own outcome', async () => {
    const client = new PushpopClient({ baseUrl: svc.url });
    const producer = client.producer<{ n: number }>(uniqueQueueId('batched'), { lingerMs: 20, maxBatch: 100 });
    const results = await Promise.all(Array.from({ length: 300 }, (_, n) => producer.push({ n }, n === 7 ? { dedupId: 'seven' } : {})));
    expect(results.every((r) => r.duplicate === false)).toBe(true);
    expect(client.requests).toBeLessThanOrEqual(6);
    const popped = await producer.queue.pop({ depth: 100 });
    expect(popped.items.map((i) => i.n)).toEqual(Array.from({ length: 100 }, (_, n) => n));
    expect((await producer.queue.info()).count).toBe(200);

    // One bad entry (priority out of range) fails only its caller.
    const before = client.requests;
    const outcomes = await Promise.allSettled(Array.from({ length: 20 }, (_, n) => producer.push({ n: 1000 + n }, n === 5 ? { priority: 100_000 } : {})));
    expect(outcomes.filter((o) => o.status === 'rejected').map((o) => o.reason)).toEqual([
      expect.objectContaining({ status: 400, errorCode: 'VALIDATION_FAILED' }),
    ]);
    expect(outcomes[5].status).toBe('rejected');
    // The refused batch, then its entries one by one.
    expect(client.requests - before).toBe(1 + 20);
    expect((await producer.queue.info()).count).toBe(219);

    // Pushes awaited one after the other are requests of their own; pushMany is one batch per maxBatch.
    const direct = client.producer<{ n: number }>(uniqueQueueId('direct'), { maxBatch: 50 });
    expect(await direct.push({ n: 1 }, { dedupId: 'one' })).toEqual({ duplicate: false });
    expect(await direct.push({ n: 1 }, { dedupId: 'one' })).toEqual({ duplicate: true });
    const many = await direct.pushMany(Array.from({ length: 120 }, (_, n) => ({ item: { n } })));
    expect(many).toEqual({ count: 120, duplicates: 0 });
  });

  it('by default a producer sends a lone push at once and gathers the pushes made meanwhile into the next request, in call order', async () => {
    const client = new PushpopClient({ baseUrl: svc.url });
    const producer = client.producer<{ n: number }>(uniqueQueueId('adaptive'), { maxBatch: 100 });
    // A lone push: its request is under way before push() returns, no timer in between.
    const lone = producer.push({ n: -1 });
    expect(client.requests).toBe(1);
    await lone;
    // 250 at once: they go out by batches of at most 100 (the first alone when nothing is in flight).
    const results = await Promise.all(Array.from({ length: 250 }, (_, n) => producer.push({ n }, n === 7 ? { dedupId: 'seven' } : {})));
    expect(results.every((r) => r.duplicate === false)).toBe(true);
    expect(client.requests - 1).toBeGreaterThanOrEqual(3);
    expect(client.requests - 1).toBeLessThanOrEqual(4);
    const popped = await producer.queue.pop({ depth: 100 });
    expect(popped.items.map((i) => i.n)).toEqual(Array.from({ length: 100 }, (_, n) => n - 1));
    // A duplicate in a batch where it is the only entry with a dedup id is known as such.
    const again = await Promise.all([producer.push({ n: 1000 }), producer.push({ n: 1001 }, { dedupId: 'seven' }), producer.push({ n: 1002 })]);
    expect(again).toEqual([{ duplicate: false }, { duplicate: true }, { duplicate: false }]);
    expect((await producer.queue.info()).count).toBe(251 - 100 + 2);
    // batch: false: every push a request of its own.
    const plain = client.producer<{ n: number }>(uniqueQueueId('plain'), { batch: false });
    const before = client.requests;
    await Promise.all(Array.from({ length: 10 }, (_, n) => plain.push({ n })));
    expect(client.requests - before).toBe(10);
  });
});
