import type { Response } from 'supertest';
import type TestAgent from 'supertest/lib/agent.js';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { closeWithin, timeTravel } from '../support/lock-helpers.js';
import { databaseKind, pollsWaitingOn, removeDataDir, startService, type TestService, uniqueQueueId } from '../support/service.js';

/**
 * The production controls over HTTP (CONTRACT.md, third additions: "More queue settings",
 * "Pause and resume", "Retry delays", "Delivery limits", "Details of the third additions").
 */
type Item = { id: string };
const ids = (items: Item[]): string[] => items.map((i) => i.id);

const DEFAULT_CONTROLS = {
  paused: false,
  retry_delay_seconds: 0,
  retry_backoff: 'exponential',
  retry_delay_max_seconds: 900,
  max_in_flight: null,
  max_pops_per_second: null,
};

const putSettings = (http: TestAgent, q: string, body: unknown): Promise<Response> => http.put(`/queue/${q}/settings`).send(body as object);

async function settle(http: TestAgent, q: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const res = await putSettings(http, q, body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as Record<string, unknown>;
}

function expectError(res: Response, status: number, code: string, label = ''): void {
  expect({ status: res.status, error_code: res.body?.error_code }, `${label} ${JSON.stringify(res.body)}`).toEqual({ status, error_code: code });
}

const push = async (http: TestAgent, q: string, id: string, priority = 0): Promise<void> => {
  const res = await http.post(`/queue/${q}/push`).send({ item: { id }, priority });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
};

describe(`queue controls (${databaseKind})`, () => {
  let svc: TestService;

  beforeAll(async () => {
    svc = await startService({ env: { SEGMENT_SIZE: '5', BUFFER_SEGMENTS: '2' } });
  });
  afterAll(async () => {
    if (svc) await closeWithin(() => svc.close());
    if (svc) removeDataDir(svc.dataDir);
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });

  describe('more queue settings', () => {
    it('GET, PUT and config of GET /queue/{id} show the six controls, at their defaults for a new queue', async () => {
      const q = uniqueQueueId('ctl-defaults');
      const put = await settle(svc.http, q, {});
      expect(put).toEqual({ segment_size: 5, buffer_segments: 2, lock_mode: 'exclusive', max_deliveries: null, dead_letter_queue: null, ...DEFAULT_CONTROLS });
      expect((await svc.http.get(`/queue/${q}/settings`)).body).toEqual(put);
      expect((await svc.http.get(`/queue/${q}`)).body.config).toEqual(put);
    });

    it('every control may change at any time, items and locks or not; fields left out stay', async () => {
      const q = uniqueQueueId('ctl-change');
      await push(svc.http, q, 'a');
      await push(svc.http, q, 'b');
      const pop = await svc.http.post(`/queue/${q}/pop?require_ack=true`);
      expect(pop.body.locked).toBe(true);
      const all = {
        paused: true,
        retry_delay_seconds: 5,
        retry_backoff: 'fixed',
        retry_delay_max_seconds: 60,
        max_in_flight: 10,
        max_pops_per_second: 2.5,
      };
      expect(await settle(svc.http, q, all)).toMatchObject(all);
      expect(await settle(svc.http, q, { max_in_flight: null })).toMatchObject({ ...all, max_in_flight: null });
      expect((await svc.http.get(`/queue/${q}`)).body.config).toMatchObject({ ...all, max_in_flight: null });
      expect(await settle(svc.http, q, { paused: false, max_pops_per_second: null })).toMatchObject({
        paused: false,
        max_pops_per_second: null,
        retry_delay_seconds: 5,
      });
    });

    it('the ranges: out of range, wrong types and null where null is not allowed are 400 VALIDATION_FAILED, and change nothing', async () => {
      const q = uniqueQueueId('ctl-ranges');
      const before = await settle(svc.http, q, { retry_delay_seconds: 3 });
      const bad: Record<string, unknown>[] = [
        { paused: null },
        { paused: 'yes' },
        { paused: 1 },
        { retry_delay_seconds: -1 },
        { retry_delay_seconds: 901 },
        { retry_delay_seconds: 1.5 },
        { retry_delay_seconds: null },
        { retry_backoff: 'linear' },
        { retry_backoff: null },
        { retry_delay_max_seconds: 0 },
        { retry_delay_max_seconds: 901 },
        { retry_delay_max_seconds: null },
        { max_in_flight: 0 },
        { max_in_flight: 100001 },
        { max_in_flight: 2.5 },
        { max_pops_per_second: 0.05 },
        { max_pops_per_second: 100001 },
        { max_pops_per_second: '5' },
        { paused: true, retry_delay_seconds: 901 },
      ];
      for (const body of bad) expectError(await putSettings(svc.http, q, body), 400, 'VALIDATION_FAILED', JSON.stringify(body));
      expect((await svc.http.get(`/queue/${q}/settings`)).body).toEqual(before);
      // The edges are accepted.
      expect(await settle(svc.http, q, { retry_delay_seconds: 0, retry_delay_max_seconds: 1, max_in_flight: 1, max_pops_per_second: 0.1 })).toMatchObject({
        retry_delay_seconds: 0,
        retry_delay_max_seconds: 1,
        max_in_flight: 1,
        max_pops_per_second: 0.1,
      });
      expect(
        await settle(svc.http, q, { retry_delay_seconds: 900, retry_delay_max_seconds: 900, max_in_flight: 100000, max_pops_per_second: 100000 }),
      ).toMatchObject({
        retry_delay_seconds: 900,
        max_in_flight: 100000,
      });
    });

    it('a PUT is judged by the settings it would leave: retry_delay_seconds above the stored maximum is 400 even when only one is named, and changes nothing', async () => {
      const q = uniqueQueueId('ctl-judged');
      const before = await settle(svc.http, q, { retry_delay_seconds: 10, retry_delay_max_seconds: 20, paused: false });
      const refused = await putSettings(svc.http, q, { retry_delay_seconds: 21, paused: true });
      expectError(refused, 400, 'VALIDATION_FAILED');
      expect(refused.body.message).toMatch(/retry_delay_seconds/);
      expectError(await putSettings(svc.http, q, { retry_delay_max_seconds: 9 }), 400, 'VALIDATION_FAILED');
      expect((await svc.http.get(`/queue/${q}/settings`)).body, 'a refused PUT changes nothing (paused stays false)').toEqual(before);
      expect(await settle(svc.http, q, { retry_delay_seconds: 30, retry_delay_max_seconds: 30 })).toMatchObject({
        retry_delay_seconds: 30,
        retry_delay_max_seconds: 30,
      });
    });

    it('the controls hold across a restart of the actor (they live in the queue row)', async () => {
      const q = uniqueQueueId('ctl-stored');
      const set = await settle(svc.http, q, { paused: true, retry_delay_seconds: 2, retry_backoff: 'fixed', max_in_flight: 7, max_pops_per_second: 3 });
      const { ActorRegistry } = await import('../../src/queue/runtime/actor-registry.js');
      svc.app.get(ActorRegistry).deactivate(q);
      expect((await svc.http.get(`/queue/${q}/settings`)).body).toEqual(set);
    });
  });

  describe('pause and resume', () => {
    it('a paused queue: every pop answers 200 {items: [], count: 0, paused: true} at once (locked: false with ack), and 423 comes after paused', async () => {
      const q = uniqueQueueId('pause-pop');
      await push(svc.http, q, 'a');
      await push(svc.http, q, 'b');
      const lock = await svc.http.post(`/queue/${q}/pop?require_ack=true`);
      expect(lock.body.locked).toBe(true);
      expect((await svc.http.post(`/queue/${q}/pop`)).status, 'locked: 423').toBe(423);
      await settle(svc.http, q, { paused: true });
      expect((await svc.http.post(`/queue/${q}/pop`)).body).toEqual({ items: [], count: 0, paused: true });
      expect((await svc.http.post(`/queue/${q}/pop?depth=10`)).body).toEqual({ items: [], count: 0, paused: true });
      expect((await svc.http.post(`/queue/${q}/pop?require_ack=true`)).body).toEqual({ items: [], count: 0, locked: false, paused: true });
      // The lock goes on: acknowledge works while paused.
      const ack = await svc.http.post(`/queue/${q}/acknowledge`).send({ lock_id: lock.body.lock_id });
      expect(ack.body).toMatchObject({ success: true, items_acknowledged: 1 });
      // Pushes and batches go on, and count.
      await push(svc.http, q, 'c');
      expect((await svc.http.post(`/queue/${q}/push/batch`).send({ items: [{ item: { id: 'd' } }] })).status).toBe(200);
      const info = await svc.http.get(`/queue/${q}`);
      expect(info.body).toMatchObject({ count: 3, config: { paused: true } });
      expect((await svc.http.post(`/queue/${q}/pop`)).body.paused).toBe(true);
      await settle(svc.http, q, { paused: false });
      const after = await svc.http.post(`/queue/${q}/pop?depth=10`);
      expect(after.body).toEqual({ items: [{ id: 'b' }, { id: 'c' }, { id: 'd' }], count: 3 });
    });

    it('a paused queue that never held anything, and one emptied: paused answers too', async () => {
      const q = uniqueQueueId('pause-empty');
      await settle(svc.http, q, { paused: true });
      expect((await svc.http.post(`/queue/${q}/pop`)).body).toEqual({ items: [], count: 0, paused: true });
      await settle(svc.http, q, { paused: false });
      expect((await svc.http.post(`/queue/${q}/pop`)).body).toEqual({ items: [], count: 0 });
    });

    it('a long poll on a paused queue waits, and answers with items within 200 ms of the resume', async () => {
      const q = uniqueQueueId('pause-poll');
      await push(svc.http, q, 'a');
      await settle(svc.http, q, { paused: true });
      const poll = svc.http.post(`/queue/${q}/pop?wait_seconds=10&require_ack=true`).then((res) => ({ res, at: Date.now() }));
      await pollsWaitingOn(svc, q);
      // Nothing may answer it while the queue is paused: watched for 300 ms.
      await new Promise((r) => setTimeout(r, 300));
      const resumedAt = Date.now();
      await settle(svc.http, q, { paused: false });
      const { res, at } = await poll;
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ items: [{ id: 'a' }], count: 1, locked: true });
      expect(at, 'it waited for the resume').toBeGreaterThanOrEqual(resumedAt);
      expect(at - resumedAt, 'answered within 200 ms of the resume').toBeLessThan(200 + 150);
    });

    it('a long poll on a paused queue whose wait ends answers empty with paused: true (with locked: false when it asked for a lock)', async () => {
      const q = uniqueQueueId('pause-timeout');
      await push(svc.http, q, 'a');
      await settle(svc.http, q, { paused: true });
      const res = await svc.http.post(`/queue/${q}/pop?wait_seconds=1&require_ack=true`);
      expect(res.body).toEqual({ items: [], count: 0, locked: false, paused: true });
      const empty = uniqueQueueId('pause-timeout-empty');
      await settle(svc.http, empty, { paused: true });
      expect((await svc.http.post(`/queue/${empty}/pop?wait_seconds=1`)).body).toEqual({ items: [], count: 0, paused: true });
    });

    it('a pause holds for a queue read afresh from the database (as after a restart or in another process)', async () => {
      const q = uniqueQueueId('pause-stored');
      await push(svc.http, q, 'a');
      await settle(svc.http, q, { paused: true });
      const { ActorRegistry } = await import('../../src/queue/runtime/actor-registry.js');
      svc.app.get(ActorRegistry).deactivate(q);
      expect((await svc.http.post(`/queue/${q}/pop`)).body).toEqual({ items: [], count: 0, paused: true });
      expect((await svc.http.get(`/queue/${q}`)).body.count).toBe(1);
    });
  });

  describe.each(['exclusive', 'shared'] as const)('retry delays (%s lock mode)', (mode) => {
    /** A queue in `mode` with the given settings, holding items `a0`… at priority 0 and `b0`… at priority 1. */
    async function queueWith(label: string, settings: Record<string, unknown>, a: number, b = 0): Promise<string> {
      const q = uniqueQueueId(label);
      await settle(svc.http, q, { lock_mode: mode, ...settings });
      const items = [
        ...Array.from({ length: a }, (_, i) => ({ item: { id: `a${i}` }, priority: 0 })),
        ...Array.from({ length: b }, (_, i) => ({ item: { id: `b${i}` }, priority: 1 })),
      ];
      expect((await svc.http.post(`/queue/${q}/push/batch`).send({ items })).status).toBe(200);
      return q;
    }
    const popAck = async (q: string, depth: number, ttl = 30): Promise<{ items: Item[]; lock_id: string; delivery_counts: number[] }> => {
      const res = await svc.http.post(`/queue/${q}/pop?require_ack=true&depth=${depth}&ttl_seconds=${ttl}`);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body;
    };
    const popAll = async (q: string): Promise<string[]> => ids((await svc.http.post(`/queue/${q}/pop?depth=100`)).body.items as Item[]);
    const info = async (q: string): Promise<{ count: number; delayed: number }> => (await svc.http.get(`/queue/${q}`)).body;

    it('release: the items wait out the fixed delay, counted in delayed and not in count; then they are back at the front in push order', async () => {
      const clock = timeTravel(svc.app);
      const q = await queueWith(`retry-fixed-${mode}`, { retry_delay_seconds: 30, retry_backoff: 'fixed' }, 4, 1);
      const lock = await popAck(q, 2);
      expect(ids(lock.items)).toEqual(['a0', 'a1']);
      const released = await svc.http.post(`/queue/${q}/release`).send({ lock_id: lock.lock_id });
      expect(released.body).toEqual({ success: true, items_returned: 2, items_delayed: 2 });
      expect(await info(q)).toMatchObject({ count: 3, delayed: 2 });
      expect(ids((await svc.http.post(`/queue/${q}/pop`)).body.items), 'not visible before the delay ends').toEqual(['a2']);
      clock.advance(30_000);
      expect(await info(q)).toMatchObject({ count: 4, delayed: 0 });
      expect(await popAll(q), 'ahead of the undelivered a3, in push order').toEqual(['a0', 'a1', 'a3', 'b0']);
    });

    it('expiry: exponential delays by delivery count, up to the maximum', async () => {
      const clock = timeTravel(svc.app);
      const q = await queueWith(`retry-exp-${mode}`, { retry_delay_seconds: 10, retry_delay_max_seconds: 25 }, 1);
      const delays: number[] = [];
      for (let d = 1; d <= 3; d++) {
        const lock = await popAck(q, 1, 1);
        expect(lock.delivery_counts).toEqual([d]);
        clock.advance(1_000);
        expect(await info(q), `delivery ${d}: given back and waiting`).toMatchObject({ count: 0, delayed: 1 });
        let waited = 0;
        while ((await info(q)).delayed > 0 && waited < 60) {
          clock.advance(1_000);
          waited += 1;
        }
        delays.push(waited);
      }
      expect(delays).toEqual([10, 20, 25]);
      expect(await popAll(q)).toEqual(['a0']);
    });

    it('release delay_seconds replaces the queue delay (0: at once), and is checked (0-900)', async () => {
      const clock = timeTravel(svc.app);
      const q = await queueWith(`retry-release-${mode}`, { retry_delay_seconds: 100 }, 2);
      const first = await popAck(q, 1);
      for (const bad of [-1, 901, 1.5, '3', null]) {
        const res = await svc.http.post(`/queue/${q}/release`).send({ lock_id: first.lock_id, delay_seconds: bad });
        expectError(res, 400, 'VALIDATION_FAILED', `delay_seconds ${JSON.stringify(bad)}`);
      }
      expect((await svc.http.post(`/queue/${q}/release`).send({ lock_id: first.lock_id, delay_seconds: 0 })).body).toEqual({
        success: true,
        items_returned: 1,
        items_delayed: 0,
      });
      const second = await popAck(q, 1);
      expect(ids(second.items)).toEqual(['a0']);
      expect((await svc.http.post(`/queue/${q}/release`).send({ lock_id: second.lock_id, delay_seconds: 5 })).body.items_delayed).toBe(1);
      expect(await popAll(q)).toEqual(['a1']);
      clock.advance(5_000);
      expect(await popAll(q)).toEqual(['a0']);
    });

    it('an item reaching max_deliveries is dead-lettered at once, never delayed', async () => {
      const dlq = uniqueQueueId('retry-dlq');
      const q = await queueWith(`retry-dead-${mode}`, { retry_delay_seconds: 60, max_deliveries: 1, dead_letter_queue: dlq }, 1);
      const lock = await popAck(q, 1);
      expect((await svc.http.post(`/queue/${q}/release`).send({ lock_id: lock.lock_id })).body).toEqual({
        success: true,
        items_returned: 0,
        items_dead_lettered: 1,
        items_delayed: 0,
      });
      expect(await info(q)).toMatchObject({ count: 0, delayed: 0 });
      expect(await popAll(dlq)).toEqual(['a0']);
    });

    it('a long poll waiting on the queue is answered when the delayed item comes due (the background sweep, no other request)', async () => {
      const q = await queueWith(`retry-poll-${mode}`, { retry_delay_seconds: 1, retry_backoff: 'fixed' }, 1);
      const lock = await popAck(q, 1);
      await svc.http.post(`/queue/${q}/release`).send({ lock_id: lock.lock_id });
      const started = Date.now();
      const res = await svc.http.post(`/queue/${q}/pop?wait_seconds=10`);
      expect(ids(res.body.items)).toEqual(['a0']);
      expect(Date.now() - started).toBeLessThan(5_000);
    });
  });

  describe('delivery limits', () => {
    it('max_in_flight: pops with ack take at most the room left; none → empty with limited: true; plain pops are not limited by it', async () => {
      const q = uniqueQueueId('limit-flight');
      await settle(svc.http, q, { lock_mode: 'shared', max_in_flight: 3 });
      for (const id of ['a', 'b', 'c', 'd', 'e', 'f']) await push(svc.http, q, id);
      const first = await svc.http.post(`/queue/${q}/pop?require_ack=true&depth=2`);
      expect(ids(first.body.items)).toEqual(['a', 'b']);
      const second = await svc.http.post(`/queue/${q}/pop?require_ack=true&depth=5`);
      expect(ids(second.body.items), 'the room left').toEqual(['c']);
      expect((await svc.http.post(`/queue/${q}/pop?require_ack=true`)).body).toEqual({ items: [], count: 0, locked: false, limited: true });
      expect(ids((await svc.http.post(`/queue/${q}/pop`)).body.items), 'a plain pop takes items').toEqual(['d']);
      await svc.http.post(`/queue/${q}/acknowledge`).send({ lock_id: first.body.lock_id });
      expect(ids((await svc.http.post(`/queue/${q}/pop?require_ack=true&depth=5`)).body.items)).toEqual(['e', 'f']);
    });

    it('max_in_flight: a long poll waiting for room is answered within 200 ms of an acknowledge', async () => {
      const q = uniqueQueueId('limit-flight-poll');
      await settle(svc.http, q, { max_in_flight: 1, lock_mode: 'shared' });
      await push(svc.http, q, 'a');
      await push(svc.http, q, 'b');
      const held = await svc.http.post(`/queue/${q}/pop?require_ack=true`);
      const poll = svc.http.post(`/queue/${q}/pop?require_ack=true&wait_seconds=10`).then((res) => ({ res, at: Date.now() }));
      await pollsWaitingOn(svc, q);
      const ackedAt = Date.now();
      expect((await svc.http.post(`/queue/${q}/acknowledge`).send({ lock_id: held.body.lock_id })).status).toBe(200);
      const { res, at } = await poll;
      expect(ids(res.body.items)).toEqual(['b']);
      expect(at - ackedAt).toBeLessThan(200 + 150);
    });

    it('max_pops_per_second: pops of any kind take at most the budget (full at first: one second worth); none → limited: true', async () => {
      const q = uniqueQueueId('limit-rate');
      for (const id of ['a', 'b', 'c', 'd']) await push(svc.http, q, id);
      await settle(svc.http, q, { max_pops_per_second: 2 });
      expect(ids((await svc.http.post(`/queue/${q}/pop?depth=5`)).body.items)).toEqual(['a', 'b']);
      expect((await svc.http.post(`/queue/${q}/pop`)).body).toEqual({ items: [], count: 0, limited: true });
      expect((await svc.http.post(`/queue/${q}/pop?require_ack=true`)).body).toEqual({ items: [], count: 0, locked: false, limited: true });
      await settle(svc.http, q, { max_pops_per_second: null });
      expect(ids((await svc.http.post(`/queue/${q}/pop?depth=5`)).body.items)).toEqual(['c', 'd']);
    });

    it('max_pops_per_second: a long poll waits for budget and is answered within 200 ms of it coming', async () => {
      const q = uniqueQueueId('limit-rate-poll');
      for (const id of ['a', 'b']) await push(svc.http, q, id);
      await settle(svc.http, q, { max_pops_per_second: 1 });
      const takenAt = Date.now();
      expect(ids((await svc.http.post(`/queue/${q}/pop`)).body.items)).toEqual(['a']);
      const res = await svc.http.post(`/queue/${q}/pop?wait_seconds=5`);
      const waited = Date.now() - takenAt;
      expect(ids(res.body.items)).toEqual(['b']);
      expect(waited, 'the budget comes a second after the first pop').toBeGreaterThanOrEqual(900);
      expect(waited).toBeLessThan(1000 + 200 + 150);
    });

    it('/metrics: paused queues, items delayed for retry, pops limited by reason', async () => {
      const q = uniqueQueueId('limit-metrics');
      await settle(svc.http, q, { paused: true });
      const flight = uniqueQueueId('limit-metrics-flight');
      await settle(svc.http, flight, { lock_mode: 'shared', max_in_flight: 1, max_pops_per_second: 100, retry_delay_seconds: 60 });
      await push(svc.http, flight, 'a');
      await push(svc.http, flight, 'b');
      const held = await svc.http.post(`/queue/${flight}/pop?require_ack=true`);
      expect((await svc.http.post(`/queue/${flight}/pop?require_ack=true`)).body.limited).toBe(true);
      await svc.http.post(`/queue/${flight}/release`).send({ lock_id: held.body.lock_id });
      const text = (await svc.http.get('/metrics')).text;
      const sample = (series: string): number =>
        Number(
          text
            .split('\n')
            .find((l) => l.startsWith(`${series} `))
            ?.split(' ')[1] ?? 'NaN',
        );
      expect(sample('pushpop_paused_queues')).toBeGreaterThanOrEqual(1);
      expect(sample('pushpop_pops_limited_total{reason="in_flight"}')).toBeGreaterThanOrEqual(1);
      expect(sample('pushpop_items_retry_delayed_total')).toBeGreaterThanOrEqual(1);
      expect(text).toMatch(/^# TYPE pushpop_pops_limited_total counter$/m);
    });

    it('GET /queues marks paused queues', async () => {
      const q = uniqueQueueId('list-paused');
      await settle(svc.http, q, { paused: true });
      const listed = (await svc.http.get(`/queues?prefix=${q}`)).body.queues;
      expect(listed).toEqual([{ queue_id: q, count: 0, locked: false, paused: true }]);
    });
  });
});
