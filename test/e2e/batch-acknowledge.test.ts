import type { Response } from 'supertest';
import type TestAgent from 'supertest/lib/agent.js';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  acknowledge,
  closeWithin,
  entries,
  expectValidationFailed,
  type IdItem,
  ids,
  LOCK_ERRORS,
  lockItems,
  pushAll,
  timeTravel,
} from '../support/lock-helpers.js';
import { databaseKind, removeDataDir, startService, type TestService, uniqueQueueId } from '../support/service.js';

/**
 * Batch acknowledge and release, dead-lettering on purpose, and an acknowledgement that pops the
 * next items (CONTRACT.md, fourth additions: "Batch acknowledge and release", "Dead-lettering on
 * purpose", "Acknowledge, then pop the next").
 */
type Item = IdItem;

function expectError(res: Response, status: number, code: string, label = ''): void {
  expect({ status: res.status, error_code: res.body?.error_code }, `${label} ${JSON.stringify(res.body)}`).toEqual({ status, error_code: code });
}

async function settle(http: TestAgent, q: string, body: Record<string, unknown>): Promise<void> {
  const res = await http.put(`/queue/${q}/settings`).send(body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
}

const ackBatch = (http: TestAgent, q: string, body: unknown): Promise<Response> => http.post(`/queue/${q}/acknowledge/batch`).send(body as object);
const releaseBatch = (http: TestAgent, q: string, body: unknown): Promise<Response> => http.post(`/queue/${q}/release/batch`).send(body as object);
const releaseWith = (http: TestAgent, q: string, body: unknown): Promise<Response> => http.post(`/queue/${q}/release`).send(body as object);
const ackWith = (http: TestAgent, q: string, body: unknown): Promise<Response> => http.post(`/queue/${q}/acknowledge`).send(body as object);

/** Locks of one item each (`lock_per_item`), on a shared queue. */
async function perItem(http: TestAgent, q: string, depth: number, ttl = 60): Promise<string[]> {
  const res = await http.post(`/queue/${q}/pop?require_ack=true&lock_per_item=true&depth=${depth}&ttl_seconds=${ttl}`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.lock_ids as string[];
}

async function popAll(http: TestAgent, q: string): Promise<string[]> {
  const res = await http.post(`/queue/${q}/pop?depth=100`);
  expect(res.status).toBe(200);
  return ids(res.body.items as Item[]);
}

async function countOf(http: TestAgent, q: string): Promise<number> {
  const res = await http.get(`/queue/${q}`);
  return res.status === 404 ? 0 : (res.body.count as number);
}

async function metric(http: TestAgent, series: string): Promise<number> {
  const text = (await http.get('/metrics')).text;
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1).split(' ')[0]);
}

const notFound = (lockId: string) => ({ lock_id: lockId, status: 404, error_code: 'LOCK_NOT_FOUND' });

describe(`batch acknowledge and release, dead letters on purpose, acknowledge then pop (${databaseKind})`, () => {
  let svc: TestService;

  beforeAll(async () => {
    svc = await startService({ env: { LOCK_SWEEP_INTERVAL_MS: '60000' } });
  });
  afterAll(async () => {
    if (svc) await closeWithin(() => svc.close());
    if (svc) removeDataDir(svc.dataDir);
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });

  describe('batch acknowledge', () => {
    it('answers one result per lock id in request order, each as the single acknowledge would; the acknowledged ones are gone', async () => {
      const q = uniqueQueueId('ba-results');
      await settle(svc.http, q, { lock_mode: 'shared' });
      await pushAll(svc.http, q, entries(0, 'a0', 'a1', 'a2', 'a3', 'a4'));
      const [l0, l1] = await perItem(svc.http, q, 2);
      const many = await lockItems(svc.http, q, { depth: 2 });
      const before = await metric(svc.http, 'pushpop_items_acknowledged_total');
      const byResult = async (result: string): Promise<number> => metric(svc.http, `pushpop_acknowledgements_total{result="${result}"}`);
      const [okBefore, notFoundBefore, requiredBefore] = [await byResult('ok'), await byResult('LOCK_NOT_FOUND'), await byResult('LOCK_ID_REQUIRED')];
      const res = await ackBatch(svc.http, q, { lock_ids: [many.lockId, 'no-such-lock', l1, '', l0] });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        success: true,
        items_acknowledged: 4,
        results: [
          { lock_id: many.lockId, status: 200, items_acknowledged: 2 },
          notFound('no-such-lock'),
          { lock_id: l1, status: 200, items_acknowledged: 1 },
          { lock_id: '', status: 400, error_code: 'LOCK_ID_REQUIRED' },
          { lock_id: l0, status: 200, items_acknowledged: 1 },
        ],
      });
      expect(await metric(svc.http, 'pushpop_items_acknowledged_total')).toBe(before + 4);
      // Each lock id named is counted by its result, as a single acknowledge of it would be.
      expect([await byResult('ok'), await byResult('LOCK_NOT_FOUND'), await byResult('LOCK_ID_REQUIRED')]).toEqual([
        okBefore + 3,
        notFoundBefore + 1,
        requiredBefore + 1,
      ]);
      // Acknowledged twice: each is 404 now, as a single acknowledge answers.
      expect((await ackBatch(svc.http, q, { lock_ids: [l0, l1] })).body).toEqual({
        success: true,
        items_acknowledged: 0,
        results: [notFound(l0), notFound(l1)],
      });
      expect((await svc.http.get(`/queue/${q}`)).body).toMatchObject({ count: 1, locks: { count: 0, item_count: 0 } });
      expect(await popAll(svc.http, q)).toEqual(['a4']);
    });

    it('an expired lock is 410 LOCK_EXPIRED in its result, and the others still commit', async () => {
      const q = uniqueQueueId('ba-expired');
      await settle(svc.http, q, { lock_mode: 'shared' });
      await pushAll(svc.http, q, entries(0, 'a0', 'a1'));
      const clock = timeTravel(svc.app);
      const [short] = await perItem(svc.http, q, 1, 5);
      const [long] = await perItem(svc.http, q, 1, 300);
      clock.advance(10_000);
      const res = await ackBatch(svc.http, q, { lock_ids: [short, long] });
      expect(res.body).toEqual({
        success: true,
        items_acknowledged: 1,
        results: [
          { lock_id: short, status: 410, error_code: 'LOCK_EXPIRED' },
          { lock_id: long, status: 200, items_acknowledged: 1 },
        ],
      });
      expect(await popAll(svc.http, q)).toEqual(['a0']);
    });

    it('in exclusive mode: another id than the live lock is 400 INVALID_LOCK_ID in its result (the lock stays), the lock itself 200', async () => {
      const q = uniqueQueueId('ba-exclusive');
      await pushAll(svc.http, q, entries(0, 'a0', 'a1'));
      const lock = await lockItems(svc.http, q, { depth: 2 });
      const res = await ackBatch(svc.http, q, { lock_ids: ['other-lock-id', lock.lockId] });
      expect(res.body).toEqual({
        success: true,
        items_acknowledged: 2,
        results: [
          { lock_id: 'other-lock-id', status: 400, error_code: 'INVALID_LOCK_ID' },
          { lock_id: lock.lockId, status: 200, items_acknowledged: 2 },
        ],
      });
      expect((await ackBatch(svc.http, q, { lock_ids: [lock.lockId] })).body.results).toEqual([notFound(lock.lockId)]);
    });

    it('400 VALIDATION_FAILED unless lock_ids is 1-1000 distinct strings (nothing is acknowledged); 1000 are taken', async () => {
      const q = uniqueQueueId('ba-400');
      await settle(svc.http, q, { lock_mode: 'shared' });
      await pushAll(svc.http, q, entries(0, 'a0'));
      const [lock] = await perItem(svc.http, q, 1);
      const bad: [string, unknown][] = [
        ['no lock_ids', {}],
        ['empty', { lock_ids: [] }],
        ['duplicates', { lock_ids: [lock, lock] }],
        ['1001 ids', { lock_ids: [lock, ...Array.from({ length: 1000 }, (_, i) => `id-${i}`)] }],
        ['not strings', { lock_ids: [lock, 5] }],
        ['not an array', { lock_ids: lock }],
        ['null', { lock_ids: null }],
        ['an unknown field', { lock_ids: [lock], lock_id: lock }],
      ];
      for (const [label, body] of bad) {
        expectValidationFailed(await ackBatch(svc.http, q, body), `acknowledge/batch: ${label}`);
        expectValidationFailed(await releaseBatch(svc.http, q, body), `release/batch: ${label}`);
      }
      const thousand = [lock, ...Array.from({ length: 999 }, (_, i) => `id-${i}`)];
      const res = await ackBatch(svc.http, q, { lock_ids: thousand });
      expect(res.status).toBe(200);
      expect(res.body.items_acknowledged).toBe(1);
      expect(res.body.results).toHaveLength(1000);
      expect(res.body.results[0]).toEqual({ lock_id: lock, status: 200, items_acknowledged: 1 });
      expect(res.body.results[999]).toEqual(notFound('id-998'));
    });
  });

  describe('batch release', () => {
    it('gives back each lock as the single release would, with items_returned and items_delayed per lock and in total', async () => {
      const q = uniqueQueueId('br-results');
      await settle(svc.http, q, { lock_mode: 'shared' });
      await pushAll(svc.http, q, entries(0, 'a0', 'a1', 'a2'));
      const [l0, l1, l2] = await perItem(svc.http, q, 3);
      const before = await metric(svc.http, 'pushpop_items_redelivered_total{reason="released"}');
      const res = await releaseBatch(svc.http, q, { lock_ids: [l2, 'gone', l0] });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        success: true,
        items_returned: 2,
        items_delayed: 0,
        results: [
          { lock_id: l2, status: 200, items_returned: 1, items_delayed: 0 },
          notFound('gone'),
          { lock_id: l0, status: 200, items_returned: 1, items_delayed: 0 },
        ],
      });
      expect(await metric(svc.http, 'pushpop_items_redelivered_total{reason="released"}')).toBe(before + 2);
      // Back in push order; l1 still holds a1.
      expect(await popAll(svc.http, q)).toEqual(['a0', 'a2']);
      const delayed = await releaseBatch(svc.http, q, { lock_ids: [l1], delay_seconds: 600 });
      expect(delayed.body).toEqual({
        success: true,
        items_returned: 1,
        items_delayed: 1,
        results: [{ lock_id: l1, status: 200, items_returned: 1, items_delayed: 1 }],
      });
      expect((await svc.http.get(`/queue/${q}`)).body).toMatchObject({ count: 0, delayed: 1 });
      expectValidationFailed(await releaseBatch(svc.http, q, { lock_ids: [l1], delay_seconds: 901 }), 'delay_seconds 901');
    });

    it('nothing is lost: a batch acknowledge and a batch release of locks taken one per item leave every item once', async () => {
      const q = uniqueQueueId('br-lost');
      await settle(svc.http, q, { lock_mode: 'shared' });
      const all = Array.from({ length: 40 }, (_, i) => `a${String(i).padStart(2, '0')}`);
      await pushAll(svc.http, q, entries(0, ...all));
      const lockIds = [...(await perItem(svc.http, q, 20)), ...(await perItem(svc.http, q, 20))];
      const [acked, released] = await Promise.all([
        ackBatch(svc.http, q, { lock_ids: lockIds.filter((_, i) => i % 2 === 0) }),
        releaseBatch(svc.http, q, { lock_ids: lockIds.filter((_, i) => i % 2 === 1) }),
      ]);
      expect(acked.body.items_acknowledged).toBe(20);
      expect(released.body.items_returned).toBe(20);
      const back = await popAll(svc.http, q);
      expect(back).toEqual(all.filter((_, i) => i % 2 === 1));
      expect((await svc.http.get(`/queue/${q}`)).body).toMatchObject({ count: 0, locks: { count: 0, item_count: 0 } });
    });
  });

  describe('dead-lettering on purpose', () => {
    it('release with dead_letter sends the lock items to the tail of the dead-letter queue at their priorities, whatever their deliveries', async () => {
      const q = uniqueQueueId('dl-release');
      const dlq = uniqueQueueId('dl-release-dlq');
      await settle(svc.http, q, { lock_mode: 'shared', dead_letter_queue: dlq });
      await pushAll(svc.http, dlq, entries(3, 'old3'));
      await pushAll(svc.http, q, [...entries(0, 'a0'), ...entries(3, 'd0'), ...entries(0, 'a1')]);
      const lock = await lockItems(svc.http, q, { depth: 3 });
      const before = await metric(svc.http, 'pushpop_items_dead_lettered_total');
      const res = await releaseWith(svc.http, q, { lock_id: lock.lockId, dead_letter: true });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ success: true, items_returned: 0, items_dead_lettered: 3, items_delayed: 0 });
      expect(await metric(svc.http, 'pushpop_items_dead_lettered_total')).toBe(before + 3);
      expect(await countOf(svc.http, q)).toBe(0);
      const dead = await svc.http.get(`/queue/${dlq}`);
      expect(Object.keys(dead.body.priorities).sort()).toEqual(['0', '3']);
      expect(await popAll(svc.http, dlq)).toEqual(['a0', 'a1', 'old3', 'd0']);
      expect(await countOf(svc.http, q)).toBe(0);
    });

    it('in exclusive mode too, and release/batch with dead_letter counts each lock', async () => {
      const q = uniqueQueueId('dl-exclusive');
      const dlq = uniqueQueueId('dl-exclusive-dlq');
      await settle(svc.http, q, { dead_letter_queue: dlq });
      await pushAll(svc.http, q, entries(0, 'a0', 'a1'));
      const lock = await lockItems(svc.http, q, { depth: 2 });
      const res = await releaseBatch(svc.http, q, { lock_ids: [lock.lockId], dead_letter: true });
      expect(res.body).toEqual({
        success: true,
        items_returned: 0,
        items_dead_lettered: 2,
        items_delayed: 0,
        results: [{ lock_id: lock.lockId, status: 200, items_returned: 0, items_dead_lettered: 2, items_delayed: 0 }],
      });
      expect(await popAll(svc.http, dlq)).toEqual(['a0', 'a1']);
    });

    it('409 NO_DEAD_LETTER_QUEUE without a dead-letter queue, after the lock checks; the lock stays', async () => {
      const q = uniqueQueueId('dl-none');
      await settle(svc.http, q, { lock_mode: 'shared' });
      await pushAll(svc.http, q, entries(0, 'a0', 'a1'));
      const [l0, l1] = await perItem(svc.http, q, 2);
      const res = await releaseWith(svc.http, q, { lock_id: l0, dead_letter: true });
      expect({ status: res.status, body: res.body }).toMatchObject({
        status: 409,
        body: { statusCode: 409, success: false, error_code: 'NO_DEAD_LETTER_QUEUE', message: expect.any(String) },
      });
      expect((await releaseWith(svc.http, q, { lock_id: 'unknown', dead_letter: true })).body).toMatchObject(LOCK_ERRORS.LOCK_NOT_FOUND);
      const batch = await releaseBatch(svc.http, q, { lock_ids: [l1, 'unknown'], dead_letter: true });
      expect(batch.body).toEqual({
        success: true,
        items_returned: 0,
        items_delayed: 0,
        results: [{ lock_id: l1, status: 409, error_code: 'NO_DEAD_LETTER_QUEUE' }, notFound('unknown')],
      });
      expect((await svc.http.get(`/queue/${q}`)).body.locks).toMatchObject({ count: 2, item_count: 2 });
      expect((await ackBatch(svc.http, q, { lock_ids: [l0, l1] })).body.items_acknowledged).toBe(2);
    });

    it('400 VALIDATION_FAILED for dead_letter with delay_seconds (even 0) or a value that is not a boolean; the lock stays', async () => {
      const q = uniqueQueueId('dl-400');
      const dlq = uniqueQueueId('dl-400-dlq');
      await settle(svc.http, q, { lock_mode: 'shared', dead_letter_queue: dlq });
      await pushAll(svc.http, q, entries(0, 'a0'));
      const [lock] = await perItem(svc.http, q, 1);
      expectValidationFailed(await releaseWith(svc.http, q, { lock_id: lock, dead_letter: true, delay_seconds: 0 }), 'with delay_seconds');
      expectValidationFailed(await releaseBatch(svc.http, q, { lock_ids: [lock], dead_letter: true, delay_seconds: 5 }), 'batch with delay_seconds');
      expectValidationFailed(await releaseWith(svc.http, q, { lock_id: lock, dead_letter: 'yes' }), 'not a boolean');
      expect((await svc.http.get(`/queue/${q}`)).body.locks).toMatchObject({ count: 1 });
      // dead_letter false with a delay is an ordinary release.
      expect((await releaseWith(svc.http, q, { lock_id: lock, dead_letter: false, delay_seconds: 0 })).body).toEqual({
        success: true,
        items_returned: 1,
        items_delayed: 0,
      });
      expect(await countOf(svc.http, dlq)).toBe(0);
    });
  });

  describe('acknowledge, then pop the next', () => {
    it('a successful acknowledgement then pops with require_ack and the parameters of next, and answers that pop as next', async () => {
      const q = uniqueQueueId('next-ok');
      await pushAll(svc.http, q, entries(0, 'a0', 'a1', 'a2', 'a3'));
      const lock = await lockItems(svc.http, q);
      // Exclusive mode: the next lock can only be taken once the first one is acknowledged, in the same turn.
      const res = await ackWith(svc.http, q, { lock_id: lock.lockId, next: { depth: 2, ttl_seconds: 120 } });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        success: true,
        items_acknowledged: 1,
        next: { items: [{ id: 'a1' }, { id: 'a2' }], count: 2, locked: true, delivery_counts: [1, 1] },
      });
      expect(res.body.next.lock_expires_at).toBeGreaterThan(Date.now() / 1000 + 100);
      const again = await ackWith(svc.http, q, { lock_id: res.body.next.lock_id, next: {} });
      expect(again.body.next).toMatchObject({ items: [{ id: 'a3' }], count: 1, locked: true });
      const last = await ackWith(svc.http, q, { lock_id: again.body.next.lock_id, next: { depth: 5 } });
      expect(last.body).toEqual({
        success: true,
        message: 'Successfully acknowledged 1 item(s)',
        items_acknowledged: 1,
        next: { items: [], count: 0, locked: false },
      });
    });

    it('next takes lock_per_item and include_headers, and answers paused or limited as a pop would', async () => {
      const q = uniqueQueueId('next-options');
      await settle(svc.http, q, { lock_mode: 'shared' });
      const push = await svc.http.post(`/queue/${q}/push`).send({ item: { id: 'h0' }, headers: { tenant: 'acme' } });
      expect(push.status).toBe(200);
      await pushAll(svc.http, q, entries(0, 'a1', 'a2', 'a3'));
      const [first] = await perItem(svc.http, q, 1);
      const res = await ackWith(svc.http, q, { lock_id: first, next: { depth: 2, lock_per_item: true, include_headers: true } });
      expect(res.body.next).toMatchObject({ items: [{ id: 'a1' }, { id: 'a2' }], headers: [{}, {}], count: 2, locked: true });
      expect(res.body.next.lock_ids).toHaveLength(2);
      expect(res.body.next.lock_id).toBeUndefined();

      // max_in_flight: the next pop takes the room the acknowledgement left, and none left is limited.
      const [l1, l2] = res.body.next.lock_ids as string[];
      await settle(svc.http, q, { max_in_flight: 2 });
      const third = await ackWith(svc.http, q, { lock_id: l1, next: { depth: 5 } });
      expect(third.body.next).toMatchObject({ items: [{ id: 'a3' }], count: 1, locked: true });
      await pushAll(svc.http, q, entries(0, 'a4', 'a5'));
      const fourth = await ackBatch(svc.http, q, { lock_ids: [l2], next: { depth: 5 } });
      expect(fourth.body.next).toMatchObject({ items: [{ id: 'a4' }], count: 1, locked: true });
      await settle(svc.http, q, { max_in_flight: 1 });
      const limited = await ackWith(svc.http, q, { lock_id: third.body.next.lock_id, next: {} });
      expect(limited.body).toMatchObject({ items_acknowledged: 1, next: { items: [], count: 0, locked: false, limited: true } });
      expect((await ackWith(svc.http, q, { lock_id: 'gone', next: {} })).status).toBe(404);
      await settle(svc.http, q, { paused: true, max_in_flight: null });
      const paused = await ackWith(svc.http, q, { lock_id: fourth.body.next.lock_id, next: {} });
      expect(paused.body.next).toEqual({ items: [], count: 0, locked: false, paused: true });
    });

    it('a failed acknowledgement pops nothing and answers its error; an invalid next is 400 before anything is acknowledged', async () => {
      const q = uniqueQueueId('next-fail');
      await settle(svc.http, q, { lock_mode: 'shared' });
      await pushAll(svc.http, q, entries(0, 'a0', 'a1', 'a2'));
      const [lock] = await perItem(svc.http, q, 1);
      expect((await ackWith(svc.http, q, { lock_id: 'unknown', next: { depth: 2 } })).body).toEqual(LOCK_ERRORS.LOCK_NOT_FOUND);
      expect((await ackWith(svc.http, q, { next: { depth: 2 } })).body).toEqual(LOCK_ERRORS.LOCK_ID_REQUIRED);
      expect(await countOf(svc.http, q)).toBe(2);
      const invalid: [string, unknown][] = [
        ['depth 0', { depth: 0 }],
        ['depth 101', { depth: 101 }],
        ['ttl_seconds 301', { ttl_seconds: 301 }],
        ['ttl_seconds 0', { ttl_seconds: 0 }],
        ['lock_per_item not a boolean', { lock_per_item: 'yes' }],
        ['include_headers not a boolean', { include_headers: 1 }],
        ['an unknown field', { wait_seconds: 1 }],
        ['not an object', 5],
        ['null', null],
      ];
      for (const [label, next] of invalid) {
        expectValidationFailed(await ackWith(svc.http, q, { lock_id: lock, next }), `acknowledge: ${label}`);
        expectValidationFailed(await ackBatch(svc.http, q, { lock_ids: [lock], next }), `acknowledge/batch: ${label}`);
      }
      // All batch acknowledgements failed: nothing popped, no next.
      expect((await ackBatch(svc.http, q, { lock_ids: ['unknown'], next: { depth: 2 } })).body).toEqual({
        success: true,
        items_acknowledged: 0,
        results: [notFound('unknown')],
      });
      expect(await countOf(svc.http, q)).toBe(2);
      expect((await svc.http.get(`/queue/${q}`)).body.locks).toMatchObject({ count: 1 });
      const ok = await ackBatch(svc.http, q, { lock_ids: [lock, 'unknown'], next: { depth: 5 } });
      expect(ok.body).toMatchObject({ items_acknowledged: 1, next: { items: [{ id: 'a1' }, { id: 'a2' }], count: 2, locked: true } });
    });

    it('next.lock_per_item on a queue in exclusive mode is 400 before anything is acknowledged', async () => {
      const q = uniqueQueueId('next-exclusive');
      await pushAll(svc.http, q, entries(0, 'a0', 'a1'));
      const lock = await lockItems(svc.http, q);
      expectValidationFailed(await ackWith(svc.http, q, { lock_id: lock.lockId, next: { lock_per_item: true } }), 'single');
      expectValidationFailed(await ackBatch(svc.http, q, { lock_ids: [lock.lockId], next: { lock_per_item: true } }), 'batch');
      expect((await acknowledge(svc.http, q, lock.lockId)).body).toMatchObject({ items_acknowledged: 1 });
      expectError(await ackWith(svc.http, q, { lock_id: lock.lockId, next: { lock_per_item: true } }), 400, 'VALIDATION_FAILED');
    });
  });
});
