import type { Response } from 'supertest';
import type TestAgent from 'supertest/lib/agent.js';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  acknowledge,
  closeWithin,
  entries,
  expectLockError,
  expectValidationFailed,
  extendLock,
  type IdItem,
  ids,
  LOCK_ID_PATTERN,
  pushAll,
  release,
  timeTravel,
} from '../support/lock-helpers.js';
import { databaseKind, removeDataDir, sharedDatabase, startService, type TestService, uniqueQueueId } from '../support/service.js';

/**
 * Locks per item over HTTP (CONTRACT.md, fourth additions, "Per-item locks"): `lock_per_item`
 * on a pop with `require_ack` on a shared queue takes each item under a lock of its own, and
 * each such lock is acknowledged, extended, released, expires and counts exactly as a shared
 * lock of one item. The service runs with `MAX_LOCKS_PER_QUEUE` 6, so that the bound is reached.
 */
type Item = IdItem;

const MAX_LOCKS = 6;

function expectError(res: Response, status: number, code: string, label = ''): void {
  expect({ status: res.status, error_code: res.body?.error_code }, `${label} ${JSON.stringify(res.body)}`).toEqual({ status, error_code: code });
}

const popPerItem = (http: TestAgent, q: string, query = ''): Promise<Response> => http.post(`/queue/${q}/pop?require_ack=true&lock_per_item=true${query}`);

async function settle(http: TestAgent, q: string, body: Record<string, unknown>): Promise<void> {
  const res = await http.put(`/queue/${q}/settings`).send(body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
}

/** A pop with a lock per item that took items: checks the shape; returns the items and their lock ids. */
async function lockEach(http: TestAgent, q: string, query = ''): Promise<{ items: Item[]; lockIds: string[]; body: Record<string, unknown> }> {
  const res = await popPerItem(http, q, query);
  expect({ status: res.status, locked: res.body?.locked }, JSON.stringify(res.body)).toEqual({ status: 200, locked: true });
  const body = res.body as { items: Item[]; lock_ids: string[]; count: number; lock_expires_at: number; delivery_counts: number[] };
  expect(body.lock_ids).toHaveLength(body.items.length);
  expect(body.count).toBe(body.items.length);
  for (const id of body.lock_ids) expect(id).toMatch(LOCK_ID_PATTERN);
  expect(new Set(body.lock_ids).size, 'every item has a lock of its own').toBe(body.items.length);
  expect(res.body).not.toHaveProperty('lock_id');
  expect(typeof body.lock_expires_at).toBe('number');
  return { items: body.items, lockIds: body.lock_ids, body: res.body as Record<string, unknown> };
}

async function popAll(http: TestAgent, q: string): Promise<string[]> {
  const res = await http.post(`/queue/${q}/pop?depth=100`);
  expect(res.status).toBe(200);
  return ids(res.body.items as Item[]);
}

describe(`per-item locks (${databaseKind})`, () => {
  let svc: TestService;

  beforeAll(async () => {
    svc = await startService({ env: { MAX_LOCKS_PER_QUEUE: String(MAX_LOCKS), LOCK_SWEEP_INTERVAL_MS: '60000' } });
  });
  afterAll(async () => {
    if (svc) await closeWithin(() => svc.close());
    if (svc) removeDataDir(svc.dataDir);
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('takes up to depth items, each under a lock of its own: lock_ids parallel to items, one expiry, delivery counts; the queue counts one lock per item', async () => {
    const q = uniqueQueueId('pil-shape');
    await settle(svc.http, q, { lock_mode: 'shared' });
    await pushAll(svc.http, q, [...entries(1, 'b0'), ...entries(0, 'a0', 'a1'), ...entries(2, 'c0')]);
    const { items, lockIds, body } = await lockEach(svc.http, q, '&depth=3&ttl_seconds=60');
    expect(ids(items)).toEqual(['a0', 'a1', 'b0']);
    expect(Object.keys(body).sort()).toEqual(['count', 'delivery_counts', 'items', 'lock_expires_at', 'lock_ids', 'locked']);
    expect(body.delivery_counts).toEqual([1, 1, 1]);
    expect(body.lock_expires_at as number).toBeGreaterThan(Date.now() / 1000 + 50);
    const info = await svc.http.get(`/queue/${q}`);
    expect(info.body).toMatchObject({ count: 1, locks: { count: 3, item_count: 3 } });
    expect(lockIds).toHaveLength(3);
  });

  it('an empty queue answers {items: [], count: 0, locked: false}', async () => {
    const q = uniqueQueueId('pil-empty');
    await settle(svc.http, q, { lock_mode: 'shared' });
    const res = await popPerItem(svc.http, q, '&depth=5');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ items: [], count: 0, locked: false });
  });

  it('each lock is acknowledged, extended and released as a shared lock of one item; a released item goes back to its push-order place', async () => {
    const q = uniqueQueueId('pil-each');
    await settle(svc.http, q, { lock_mode: 'shared' });
    await pushAll(svc.http, q, entries(0, 'a0', 'a1', 'a2', 'a3'));
    const { lockIds } = await lockEach(svc.http, q, '&depth=3');
    const acked = await acknowledge(svc.http, q, lockIds[0]);
    expect(acked.status).toBe(200);
    expect(acked.body).toMatchObject({ success: true, items_acknowledged: 1 });
    expectLockError(await acknowledge(svc.http, q, lockIds[0]), 'LOCK_NOT_FOUND', 'acknowledged twice');
    const extended = await extendLock(svc.http, q, lockIds[1], 120);
    expect(extended.status).toBe(200);
    expect(extended.body).toMatchObject({ success: true, lock_id: lockIds[1] });
    const released = await release(svc.http, q, lockIds[2]);
    expect(released.status).toBe(200);
    expect(released.body).toEqual({ success: true, items_returned: 1, items_delayed: 0 });
    // a2 went back before a3 (push order); a1 is still held by its extended lock.
    expect(await popAll(svc.http, q)).toEqual(['a2', 'a3']);
    expect((await svc.http.get(`/queue/${q}`)).body.locks).toMatchObject({ count: 1, item_count: 1 });
    expect((await acknowledge(svc.http, q, lockIds[1])).body).toMatchObject({ items_acknowledged: 1 });
  });

  it('each lock expires on its own (410 afterwards) and its item comes back with its delivery count', async () => {
    const q = uniqueQueueId('pil-expire');
    await settle(svc.http, q, { lock_mode: 'shared' });
    await pushAll(svc.http, q, entries(0, 'a0', 'a1'));
    const clock = timeTravel(svc.app);
    const { lockIds } = await lockEach(svc.http, q, '&depth=2&ttl_seconds=5');
    expect((await extendLock(svc.http, q, lockIds[1], 300)).status).toBe(200);
    clock.advance(10_000);
    expectLockError(await acknowledge(svc.http, q, lockIds[0]), 'LOCK_EXPIRED');
    const again = await lockEach(svc.http, q, '&depth=5');
    expect(ids(again.items)).toEqual(['a0']);
    expect(again.body.delivery_counts).toEqual([2]);
    expect((await acknowledge(svc.http, q, lockIds[1])).body).toMatchObject({ items_acknowledged: 1 });
  });

  it('counts toward MAX_LOCKS_PER_QUEUE as one lock per item: a pop takes at most the locks left, then 429 QUEUE_BUSY', async () => {
    const q = uniqueQueueId('pil-max-locks');
    await settle(svc.http, q, { lock_mode: 'shared' });
    await pushAll(svc.http, q, entries(0, ...Array.from({ length: 10 }, (_, i) => `a${i}`)));
    const first = await lockEach(svc.http, q, '&depth=4');
    expect(first.items).toHaveLength(4);
    const second = await lockEach(svc.http, q, '&depth=4');
    expect(ids(second.items), 'only the locks left under MAX_LOCKS_PER_QUEUE').toEqual(['a4', 'a5']);
    expectError(await popPerItem(svc.http, q), 429, 'QUEUE_BUSY');
    expectError(await svc.http.post(`/queue/${q}/pop?require_ack=true`), 429, 'QUEUE_BUSY', 'a lock for all items counts the same');
    expect((await acknowledge(svc.http, q, first.lockIds[0])).status).toBe(200);
    expect(ids((await lockEach(svc.http, q, '&depth=4')).items)).toEqual(['a6']);
    expect((await svc.http.get(`/queue/${q}`)).body).toMatchObject({ count: 3, locks: { count: MAX_LOCKS, item_count: MAX_LOCKS } });
  });

  it('counts toward max_in_flight item by item: a pop takes the room left, then answers limited', async () => {
    const q = uniqueQueueId('pil-in-flight');
    await settle(svc.http, q, { lock_mode: 'shared', max_in_flight: 3 });
    await pushAll(svc.http, q, entries(0, 'a0', 'a1', 'a2', 'a3', 'a4'));
    expect((await lockEach(svc.http, q, '&depth=2')).items).toHaveLength(2);
    const rest = await lockEach(svc.http, q, '&depth=5');
    expect(ids(rest.items)).toEqual(['a2']);
    const limited = await popPerItem(svc.http, q, '&depth=5');
    expect(limited.body).toEqual({ items: [], count: 0, locked: false, limited: true });
    expect((await release(svc.http, q, rest.lockIds[0])).status).toBe(200);
    expect(ids((await lockEach(svc.http, q, '&depth=5')).items)).toEqual(['a2']);
  });

  it('a paused queue answers paused, as a pop does', async () => {
    const q = uniqueQueueId('pil-paused');
    await settle(svc.http, q, { lock_mode: 'shared', paused: true });
    await pushAll(svc.http, q, entries(0, 'a0'));
    const res = await popPerItem(svc.http, q);
    expect(res.body).toEqual({ items: [], count: 0, locked: false, paused: true });
  });

  it('400 VALIDATION_FAILED without require_ack=true, on a queue in exclusive mode (also a long poll, and a queue not yet created), or for a value that is not a boolean; nothing is taken', async () => {
    const shared = uniqueQueueId('pil-400-shared');
    await settle(svc.http, shared, { lock_mode: 'shared' });
    await pushAll(svc.http, shared, entries(0, 'a0'));
    expectValidationFailed(await svc.http.post(`/queue/${shared}/pop?lock_per_item=true`), 'without require_ack');
    expectValidationFailed(await svc.http.post(`/queue/${shared}/pop?require_ack=false&lock_per_item=1`), 'require_ack=false');
    expectValidationFailed(await svc.http.post(`/queue/${shared}/pop?require_ack=true&lock_per_item=yes`), 'not a boolean');
    expect((await svc.http.get(`/queue/${shared}`)).body.count).toBe(1);
    // lock_per_item=false (and 0) is an ordinary pop.
    const plain = await svc.http.post(`/queue/${shared}/pop?require_ack=true&lock_per_item=0`);
    expect(plain.body).toMatchObject({ locked: true, count: 1 });
    expect(typeof plain.body.lock_id).toBe('string');
    expect(plain.body.lock_ids).toBeUndefined();

    const exclusive = uniqueQueueId('pil-400-exclusive');
    await pushAll(svc.http, exclusive, entries(0, 'x0'));
    expectValidationFailed(await popPerItem(svc.http, exclusive), 'exclusive mode');
    const started = Date.now();
    expectValidationFailed(await popPerItem(svc.http, exclusive, '&wait_seconds=5'), 'exclusive mode, long poll');
    expect(Date.now() - started, 'answered without waiting').toBeLessThan(4000);
    expect((await svc.http.get(`/queue/${exclusive}`)).body).toMatchObject({ count: 1, lock: null });
    expectValidationFailed(await popPerItem(svc.http, uniqueQueueId('pil-400-none')), 'a queue not yet created is exclusive');
  });

  it('a long poll with a lock per item is answered by a push, each item under its own lock', async () => {
    const q = uniqueQueueId('pil-poll');
    await settle(svc.http, q, { lock_mode: 'shared' });
    const waiting = popPerItem(svc.http, q, '&depth=3&wait_seconds=10');
    await new Promise((resolve) => setTimeout(resolve, 300));
    await pushAll(svc.http, q, entries(0, 'a0', 'a1'));
    const res = await waiting;
    expect(res.status).toBe(200);
    expect(res.body.items.length).toBeGreaterThanOrEqual(1);
    expect(res.body.lock_ids).toHaveLength(res.body.items.length);
  });

  it('nothing is lost: items taken a lock each and ended every way are each acknowledged exactly once', async () => {
    const q = uniqueQueueId('pil-lost');
    await settle(svc.http, q, { lock_mode: 'shared' });
    const all = Array.from({ length: 12 }, (_, i) => `a${String(i).padStart(2, '0')}`);
    await pushAll(svc.http, q, entries(0, ...all));
    const acknowledged: string[] = [];
    for (let round = 0; round < 20 && acknowledged.length < all.length; round++) {
      const res = await popPerItem(svc.http, q, '&depth=5');
      const items = res.body.items as Item[];
      const lockIds = (res.body.lock_ids ?? []) as string[];
      for (let i = 0; i < items.length; i++) {
        if ((i + round) % 3 === 0) {
          expect((await release(svc.http, q, lockIds[i])).status).toBe(200);
        } else {
          expect((await acknowledge(svc.http, q, lockIds[i])).status).toBe(200);
          acknowledged.push(items[i].id);
        }
      }
    }
    expect(acknowledged.sort()).toEqual(all);
    expect((await svc.http.get(`/queue/${q}`)).body).toMatchObject({ count: 0, locks: { count: 0, item_count: 0 } });
  });

  it("stores each lock with its item's delivery count, headers and dead-letter origin: another process, reading the locks' rows, gives the items back with them", async () => {
    const src = uniqueQueueId('pil-src');
    const dlq = uniqueQueueId('pil-dlq');
    await settle(svc.http, src, { lock_mode: 'shared', dead_letter_queue: dlq });
    await settle(svc.http, dlq, { lock_mode: 'shared' });
    const pushed = await svc.http.post(`/queue/${src}/push/batch`).send({
      items: [
        { item: { id: 'h1' }, headers: { tenant: 'acme' } },
        { item: { id: 'h2' } },
        { item: { id: 'h3' }, headers: { tenant: 'umbrella', trace: 't-3' } },
      ],
    });
    expect(pushed.status, JSON.stringify(pushed.body)).toBe(200);
    // Into the dead-letter queue, where each item knows the queue it came from.
    const first = await lockEach(svc.http, src, '&depth=3');
    const dead = await svc.http.post(`/queue/${src}/release/batch`).send({ lock_ids: first.lockIds, dead_letter: true });
    expect(dead.status, JSON.stringify(dead.body)).toBe(200);
    // Taken a lock each in this process: each lock's row holds its item, headers and origin.
    const taken = await lockEach(svc.http, dlq, '&depth=3');
    expect(ids(taken.items)).toEqual(['h1', 'h2', 'h3']);
    const other = await startService({ env: { ...sharedDatabase(svc), MAX_LOCKS_PER_QUEUE: String(MAX_LOCKS), LOCK_SWEEP_INTERVAL_MS: '60000' } });
    try {
      // The other process has no actor of the queue: it reads the locks' rows to give the items back.
      const back = await other.http.post(`/queue/${dlq}/release/batch`).send({ lock_ids: taken.lockIds });
      expect(back.status, JSON.stringify(back.body)).toBe(200);
      const again = await other.http.post(`/queue/${dlq}/pop?require_ack=true&lock_per_item=true&depth=3&include_headers=true`);
      expect(again.body).toMatchObject({
        items: [{ id: 'h1' }, { id: 'h2' }, { id: 'h3' }],
        headers: [{ tenant: 'acme' }, {}, { tenant: 'umbrella', trace: 't-3' }],
        delivery_counts: [2, 2, 2],
      });
      const settled = await other.http.post(`/queue/${dlq}/release/batch`).send({ lock_ids: again.body.lock_ids });
      expect(settled.status, JSON.stringify(settled.body)).toBe(200);
      // Redriven to the queue each came from, which the locks' rows carried.
      const redriven = await other.http.post(`/queue/${dlq}/redrive`).send({});
      expect(redriven.body).toMatchObject({ success: true, items_moved: 3 });
      expect(await popAll(other.http, src)).toEqual(['h1', 'h2', 'h3']);
    } finally {
      await closeWithin(() => other.close());
      removeDataDir(other.dataDir);
    }
  });
});
