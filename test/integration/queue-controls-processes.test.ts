import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueueEvents } from '../../src/queue/runtime/queue-events.js';
import { until } from '../support/queue-helpers.js';
import { databaseKind, type TestService, uniqueQueueId } from '../support/service.js';
import { closeServicePair, startServicePair } from '../support/service-pair.js';

/**
 * The production controls across processes: two services on one database. A resume made through
 * one process answers a long poll waiting in the other within 200 ms (contract: "also when
 * another process resumes it"); the delivery limits are one budget for both (they live with the
 * queue's row). Timed assertions get slack for a loaded machine; a periodic re-check (5 s while
 * listening) would not pass them.
 */
type Body = { items: { id: string }[]; count: number; paused?: boolean; limited?: boolean; locked?: boolean; lock_id?: string };

async function call(svc: TestService, method: string, path: string, body?: unknown): Promise<{ status: number; body: Body }> {
  const res = await fetch(`${svc.url}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  return { status: res.status, body: (await res.json()) as Body };
}

const push = (svc: TestService, q: string, id: string) => call(svc, 'POST', `/queue/${q}/push`, { item: { id } });
const settings = async (svc: TestService, q: string, body: Record<string, unknown>): Promise<void> => {
  const res = await call(svc, 'PUT', `/queue/${q}/settings`, body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
};

/** Resolves once a long poll of `svc` waits on `queueId` (between its turns). */
async function waitingOn(svc: TestService, queueId: string): Promise<void> {
  const events = svc.app.get(QueueEvents);
  expect(await until(() => events.waitingQueues().includes(queueId), 10_000)).toBe(true);
}

describe(`queue controls across processes (${databaseKind})`, () => {
  let A: TestService;
  let B: TestService;

  beforeAll(async () => ({ A, B } = await startServicePair()));
  afterAll(() => closeServicePair({ A, B }));

  it('a pause made through one process holds in the other; a long poll waiting there is answered within 200 ms of a resume made here (both ways)', async () => {
    const latencies: number[] = [];
    for (const [polls, resumes] of [
      [B, A],
      [A, B],
      [B, A],
      [A, B],
    ] as const) {
      const q = uniqueQueueId('xp-pause');
      await push(resumes, q, 'a');
      // The poller's process knows the queue first (its actor is in memory), then the other pauses it.
      expect((await call(polls, 'GET', `/queue/${q}`)).body.count).toBe(1);
      await settings(resumes, q, { paused: true });
      expect((await call(polls, 'POST', `/queue/${q}/pop`)).body).toEqual({ items: [], count: 0, paused: true });
      const poll = call(polls, 'POST', `/queue/${q}/pop?wait_seconds=10`).then((res) => ({ res, at: performance.now() }));
      await waitingOn(polls, q);
      const resumedAt = performance.now();
      await settings(resumes, q, { paused: false });
      const { res, at } = await poll;
      expect(res.body.items).toEqual([{ id: 'a' }]);
      latencies.push(at - resumedAt);
    }
    console.info(`cross-process resume latency (${databaseKind}): ${latencies.map((l) => `${l.toFixed(1)} ms`).join(', ')}`);
    expect(Math.max(...latencies)).toBeLessThan(200 + 300);
  });

  it('max_pops_per_second is one budget for both processes: together they hand out no more than it allows', async () => {
    const q = uniqueQueueId('xp-rate');
    const res = await call(A, 'POST', `/queue/${q}/push/batch`, { items: Array.from({ length: 60 }, (_, i) => ({ item: { id: `i${i}` } })) });
    expect(res.status).toBe(200);
    await settings(A, q, { max_pops_per_second: 4 });
    const started = performance.now();
    const answers = await Promise.all(Array.from({ length: 24 }, (_, i) => call(i % 2 === 0 ? A : B, 'POST', `/queue/${q}/pop`)));
    const elapsed = (performance.now() - started) / 1000;
    const popped = answers.flatMap((a) => a.body.items.map((i) => i.id));
    const limited = answers.filter((a) => a.body.limited === true).length;
    expect(new Set(popped).size, 'nothing twice').toBe(popped.length);
    // The full budget (4) plus what refilled while they ran, whichever process answered.
    expect(popped.length).toBeGreaterThanOrEqual(4);
    expect(popped.length).toBeLessThanOrEqual(4 + Math.ceil(elapsed * 4));
    expect(limited).toBe(24 - popped.length);
    expect(answers.filter((a, i) => i % 2 === 1 && a.body.limited).length, 'B was limited too').toBeGreaterThan(0);
  });

  it('max_in_flight counts the locks of both processes; a long poll waiting for room in one is woken by an acknowledge in the other', async () => {
    const q = uniqueQueueId('xp-flight');
    await settings(A, q, { lock_mode: 'shared', max_in_flight: 2 });
    for (const id of ['a', 'b', 'c']) await push(A, q, id);
    const held = await call(A, 'POST', `/queue/${q}/pop?require_ack=true&depth=2`);
    expect(held.body.items.map((i) => i.id)).toEqual(['a', 'b']);
    expect((await call(B, 'POST', `/queue/${q}/pop?require_ack=true`)).body).toEqual({ items: [], count: 0, locked: false, limited: true });
    const poll = call(B, 'POST', `/queue/${q}/pop?require_ack=true&wait_seconds=10`).then((res) => ({ res, at: performance.now() }));
    await waitingOn(B, q);
    const ackedAt = performance.now();
    expect((await call(A, 'POST', `/queue/${q}/acknowledge`, { lock_id: held.body.lock_id })).status).toBe(200);
    const { res, at } = await poll;
    expect(res.body.items).toEqual([{ id: 'c' }]);
    console.info(`cross-process room latency (${databaseKind}): ${(at - ackedAt).toFixed(1)} ms`);
    expect(at - ackedAt).toBeLessThan(200 + 300);
  });

  it('an item given back with a retry delay in one process comes back for a long poll waiting in the other when the delay ends, with no other request', async () => {
    const q = uniqueQueueId('xp-retry');
    await settings(A, q, { lock_mode: 'shared', retry_delay_seconds: 1, retry_backoff: 'fixed' });
    await push(A, q, 'a');
    const held = await call(A, 'POST', `/queue/${q}/pop?require_ack=true`);
    const released = await call(A, 'POST', `/queue/${q}/release`, { lock_id: held.body.lock_id });
    expect(released.body).toMatchObject({ items_returned: 1, items_delayed: 1 });
    const releasedAt = performance.now();
    const poll = await call(B, 'POST', `/queue/${q}/pop?wait_seconds=10`);
    const waited = performance.now() - releasedAt;
    expect(poll.body.items).toEqual([{ id: 'a' }]);
    // The delay (1 s), then the delay sweep of either process (every LOCK_SWEEP_INTERVAL_MS, 1 s) and the wake-up.
    expect(waited).toBeGreaterThanOrEqual(900);
    expect(waited).toBeLessThan(1000 + 1000 + 1000);
  });
});
