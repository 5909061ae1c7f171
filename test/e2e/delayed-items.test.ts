import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { Clock } from '../../src/common/clock.js';
import { ActorRegistry } from '../../src/queue/runtime/actor-registry.js';
import { listed } from '../support/lock-helpers.js';
import { answer, drain, sleep } from '../support/queue-helpers.js';
import { databaseKind, removeDataDir, startService, TestService, uniqueQueueId } from '../support/service.js';

/**
 * Delayed items over HTTP (CONTRACT.md, "Delayed items"): `delay_seconds` on push and batch
 * entries; a delayed item is invisible to pops, `count` and listings until it is due, then
 * joins the tail of its priority (due order, ties in push order); `GET /queue/{id}` shows
 * `delayed`; the next operation or the background sweep makes due items visible, and a long
 * poll waiting on the queue is answered then.
 *
 * Time is simulated where exact boundaries matter: the service's Clock runs `offset` ms ahead
 * of real time. The sweep runs every 200 ms.
 */

type Item = { id: string };
const ids = (items: Item[]): string[] => items.map((i) => i.id);

/** A simulated clock: the service's Clock runs `offset` ms ahead of real time. Restored after each test. */
function timeTravel(svc: TestService): { advance(ms: number): void } {
  let offset = 0;
  vi.spyOn(svc.app.get(Clock), 'now').mockImplementation(() => Date.now() + offset);
  return { advance: (ms) => void (offset += ms) };
}

/** With the clock mocked, real time still passes between requests: a margin that keeps "before the due time" honest. */
const MARGIN_MS = 2000;

describe(`delayed items (${databaseKind})`, () => {
  let svc: TestService;

  beforeAll(async () => {
    svc = await startService({ env: { LOCK_SWEEP_INTERVAL_MS: '200', SEGMENT_SIZE: '3' } });
  });
  afterEach(() => vi.restoreAllMocks());
  afterAll(async () => {
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  const push = (q: string, body: Record<string, unknown>) => answer(svc.http.post(`/queue/${q}/push`).send(body));
  const batch = (q: string, items: Record<string, unknown>[]) => answer(svc.http.post(`/queue/${q}/push/batch`).send({ items }));
  const info = async (q: string): Promise<{ count: number; delayed: number }> => {
    const res = await answer(svc.http.get(`/queue/${q}`));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body as { count: number; delayed: number };
  };

  it('delay_seconds: an integer 0-31536000 on push and batch entries; anything else is 400 VALIDATION_FAILED', async () => {
    const q = uniqueQueueId('delay-valid');
    for (const bad of [-1, 31_536_001, 1.5, '5', null, true]) {
      const res = await push(q, { item: { id: 'x' }, delay_seconds: bad });
      expect({ status: res.status, code: res.body.error_code }, `delay_seconds ${JSON.stringify(bad)}`).toEqual({ status: 400, code: 'VALIDATION_FAILED' });
      const inBatch = await batch(q, [{ item: { id: 'y' } }, { item: { id: 'x' }, delay_seconds: bad }]);
      expect({ status: inBatch.status, code: inBatch.body.error_code }, `batch delay_seconds ${JSON.stringify(bad)}`).toEqual({
        status: 400,
        code: 'VALIDATION_FAILED',
      });
      expect(inBatch.body.message).toContain('items.1.delay_seconds');
    }
    expect(await push(q, { item: { id: 'now' }, delay_seconds: 0 })).toMatchObject({
      status: 200,
      body: { success: true, message: `Item pushed to queue ${q} at priority 0` },
    });
    expect(await push(q, { item: { id: 'late' }, delay_seconds: 900 })).toMatchObject({
      status: 200,
      body: { success: true, message: `Item pushed to queue ${q} at priority 0, visible in 900 s` },
    });
    expect(await info(q)).toMatchObject({ count: 1, delayed: 1 });
  });

  it('invisible until due: not popped, not counted, not listed; visible from the due time on, with the next operation', async () => {
    const clock = timeTravel(svc);
    const q = uniqueQueueId('delay-bound');
    expect(await push(q, { item: { id: 'd' }, delay_seconds: 30, priority: 2 })).toMatchObject({ status: 200, body: { success: true } });
    expect(await info(q)).toMatchObject({ count: 0, delayed: 1, priorities: {} });
    expect(await listed(svc.http, q)).toEqual({ queue_id: q, count: 0, locked: false, paused: false });
    expect((await answer(svc.http.post(`/queue/${q}/pop?depth=10`))).body).toEqual({ items: [], count: 0 });
    expect((await answer(svc.http.post(`/queue/${q}/pop?require_ack=true`))).body).toEqual({ items: [], count: 0, locked: false });
    clock.advance(30_000 - MARGIN_MS);
    expect((await answer(svc.http.post(`/queue/${q}/pop`))).body, 'just before the due time').toEqual({ items: [], count: 0 });
    expect(await info(q)).toMatchObject({ count: 0, delayed: 1 });
    clock.advance(MARGIN_MS);
    expect(await info(q), 'the inspection is the operation that makes it visible').toMatchObject({ count: 1, delayed: 0, priorities: { '2': { count: 1 } } });
    expect((await answer(svc.http.post(`/queue/${q}/pop`))).body).toEqual({ items: [{ id: 'd' }], count: 1 });
  });

  it('due items join the tail of their priority in due-time order, ties in push order, after what was visible and before later pushes', async () => {
    const clock = timeTravel(svc);
    const q = uniqueQueueId('delay-order');
    expect(
      (
        await batch(q, [
          { item: { id: 'a' }, delay_seconds: 20 },
          { item: { id: 'b' }, delay_seconds: 10 },
          { item: { id: 'p1' }, delay_seconds: 10, priority: 1 },
          { item: { id: 'e' } },
          { item: { id: 'c' }, delay_seconds: 10 },
        ])
      ).body,
    ).toMatchObject({ success: true, count: 5, duplicates: 0 });
    clock.advance(5000);
    // Due at 10 s as well (5 + 5), pushed after b and c.
    expect((await push(q, { item: { id: 'f' }, delay_seconds: 5 })).status).toBe(200);
    expect(await info(q)).toMatchObject({ count: 1, delayed: 5 });
    clock.advance(15_000);
    expect((await push(q, { item: { id: 'g' } })).status).toBe(200);
    expect(await info(q)).toMatchObject({ count: 7, delayed: 0 });
    expect(ids(await drain<Item>(svc.http, q))).toEqual(['e', 'b', 'c', 'f', 'a', 'g', 'p1']);
  });

  it('with no request on the queue, the sweep makes due items visible within LOCK_SWEEP_INTERVAL_MS', async () => {
    const clock = timeTravel(svc);
    const q = uniqueQueueId('delay-sweep');
    expect(
      (
        await batch(q, [
          { item: { id: 'x' }, delay_seconds: 60 },
          { item: { id: 'y' }, delay_seconds: 60 },
        ])
      ).status,
    ).toBe(200);
    // Nothing may move them before they are due: watched over a few sweeps.
    await sleep(500);
    expect(await listed(svc.http, q), 'not due: the sweep leaves it').toEqual({ queue_id: q, count: 0, locked: false, paused: false });
    clock.advance(60_000);
    // The listing runs no turn: only the sweep can have moved the items.
    let row = await listed(svc.http, q);
    for (let i = 0; i < 40 && row?.count !== 2; i++) {
      await sleep(50);
      row = await listed(svc.http, q);
    }
    expect(row).toEqual({ queue_id: q, count: 2, locked: false, paused: false });
    expect(await info(q)).toMatchObject({ count: 2, delayed: 0 });
    expect(ids(await drain<Item>(svc.http, q))).toEqual(['x', 'y']);
  });

  it('a long poll waiting on the queue is answered when a delayed item comes due (real time)', async () => {
    const q = uniqueQueueId('delay-poll');
    expect((await push(q, { item: { id: 'soon' }, delay_seconds: 1 })).status).toBe(200);
    const started = Date.now();
    const res = await answer(svc.http.post(`/queue/${q}/pop?wait_seconds=10`), 15_000);
    const waited = Date.now() - started;
    expect(res.body).toEqual({ items: [{ id: 'soon' }], count: 1 });
    expect(waited, 'not before it was due').toBeGreaterThanOrEqual(900);
    expect(waited, 'soon after it was due').toBeLessThan(2500);
  });

  it('delayed items survive the actor leaving memory, and a deleted queue takes them along (counted in items_deleted)', async () => {
    const clock = timeTravel(svc);
    const q = uniqueQueueId('delay-delete');
    expect(
      (await batch(q, [{ item: { id: 'now' } }, { item: { id: 'later' }, delay_seconds: 10 }, { item: { id: 'later2' }, delay_seconds: 100 }])).status,
    ).toBe(200);
    svc.app.get(ActorRegistry).deactivateIdle(Date.now() + 1);
    expect(await info(q)).toMatchObject({ count: 1, delayed: 2 });
    svc.app.get(ActorRegistry).deactivateIdle(Date.now() + 1);
    clock.advance(10_000);
    expect(ids(await drain<Item>(svc.http, q))).toEqual(['now', 'later']);
    expect((await answer(svc.http.delete(`/queue/${q}`))).body).toEqual({ success: true, items_deleted: 1 });
    expect((await answer(svc.http.get(`/queue/${q}`))).status).toBe(404);
    expect((await push(q, { item: { id: 'fresh' } })).status).toBe(200);
    clock.advance(100_000);
    expect(ids(await drain<Item>(svc.http, q)), 'the deleted delayed item never comes back').toEqual(['fresh']);
    expect(await info(q)).toMatchObject({ count: 0, delayed: 0 });
  });

  it('a backlog of more due items than one turn moves comes out whole and in order before anything pushed after it', async () => {
    const clock = timeTravel(svc);
    const q = uniqueQueueId('delay-backlog');
    const n = 2500;
    for (let start = 0; start < n; start += 1000) {
      const items = Array.from({ length: Math.min(1000, n - start) }, (_, i) => ({
        item: { id: `d${start + i}` },
        delay_seconds: 1 + Math.floor((start + i) / 500),
      }));
      expect((await batch(q, items)).status).toBe(200);
    }
    clock.advance(10_000);
    expect((await push(q, { item: { id: 'after' } })).status).toBe(200);
    expect(await info(q)).toMatchObject({ count: n + 1, delayed: 0 });
    const popped = ids(await drain<Item>(svc.http, q));
    expect(popped).toEqual([...Array.from({ length: n }, (_, i) => `d${i}`), 'after']);
  });

  it('the metrics count delayed items and those that came due', async () => {
    const clock = timeTravel(svc);
    const q = uniqueQueueId('delay-metrics');
    expect((await push(q, { item: { id: 'm' }, delay_seconds: 5 })).status).toBe(200);
    clock.advance(5000);
    await info(q);
    const text = (await svc.http.get('/metrics')).text;
    expect(text).toMatch(/^pushpop_delayed_items \d+$/m);
    expect(Number(/^pushpop_delayed_items_due_total (\d+)$/m.exec(text)?.[1])).toBeGreaterThanOrEqual(1);
  });
});
