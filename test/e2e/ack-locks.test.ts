import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { Clock } from '../../src/common/clock.js';
import { LockSweeper } from '../../src/lock/lock-sweeper.js';
import { buildService, startChildService, type ChildService, type ServiceBuild } from '../support/child-service.js';
import {
  acknowledge,
  closeWithin,
  entries,
  expectLockError,
  expectQueueLocked,
  expectValidationFailed,
  extendLock,
  type IdItem,
  ids,
  listed,
  LOCK_ENDPOINTS,
  LOCK_ID_PATTERN,
  lockCall,
  type LockEndpoint,
  lockItems,
  popAck,
  pushAll,
  release,
} from '../support/lock-helpers.js';
import { drain, sleep } from '../support/queue-helpers.js';
import { databaseKind, makeDataDir, removeDataDir, startService, TestService, uniqueQueueId } from '../support/service.js';

/**
 * Acknowledgement locks over HTTP (CONTRACT.md: pop with `require_ack`, acknowledge,
 * extend-lock, release, "Lock expiry"): every row of the acknowledge table in its check order,
 * for all three lock endpoints; what a lock does to pops, inspection, listing and deletion;
 * expiry returning items to the front of their original priorities, on the next request and
 * by the background sweep; and locks surviving a SIGKILL of the service.
 *
 * Items are `{ id }` with ids like `a0` (priority 0), `b0` (priority 1), `c0` (priority 2).
 */

type Item = IdItem;
const nowSeconds = (): number => Date.now() / 1000;

/** A simulated clock: the service's Clock runs `offset` ms ahead of real time. Restored after each test. */
function timeTravel(svc: TestService): { advance(ms: number): void; nowSeconds(): number } {
  let offset = 0;
  vi.spyOn(svc.app.get(Clock), 'now').mockImplementation(() => Date.now() + offset);
  return {
    advance: (ms) => {
      offset += ms;
    },
    nowSeconds: () => (Date.now() + offset) / 1000,
  };
}

/** Bodies whose lock_id is missing, empty or not a string. */
const BAD_LOCK_ID_BODIES: [string, Record<string, unknown>][] = [
  ['missing', {}],
  ['empty', { lock_id: '' }],
  ['a number', { lock_id: 12345678901 }],
  ['null', { lock_id: null }],
  ['a boolean', { lock_id: true }],
  ['an array', { lock_id: ['abcdefghijk'] }],
  ['an object', { lock_id: { id: 'abcdefghijk' } }],
];

/** A well-formed lock id that no lock has. */
const OTHER_ID = 'AAAAAAAAAAA';

describe(`acknowledgement locks (${databaseKind})`, () => {
  /**
   * In this service only requests expire locks (its sweep is stopped): the tests here check
   * that each kind of request expires a due lock, on a clock they move ahead.
   */
  let svc: TestService;
  beforeAll(async () => {
    svc = await startService({ env: { LOCK_SWEEP_INTERVAL_MS: '60000' } });
    await svc.app.get(LockSweeper).onModuleDestroy();
  });
  afterAll(async () => {
    if (svc) await closeWithin(() => svc.close());
    if (svc) removeDataDir(svc.dataDir);
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });

  describe('expiry on the next request (the sweep is 60 s away)', () => {
    // First in the file, so that the sweep's first tick (60 s after boot) cannot be the cause.
    it('real TTL 1 s: after expiry nothing changes until a request comes; then the items are back at the front of their ORIGINAL priorities, in order', async () => {
      const q = uniqueQueueId('exp-next');
      await pushAll(svc.http, q, [...entries(0, 'a0', 'a1', 'a2'), ...entries(2, 'c0', 'c1', 'c2')]);
      const lock = await lockItems<Item>(svc.http, q, { depth: 5, ttl: 1 });
      expect(ids(lock.items)).toEqual(['a0', 'a1', 'a2', 'c0', 'c1']);
      // Pushed while locked, to every priority (priority 0 was emptied by the lock).
      for (const [p, id] of [
        [0, 'a3'],
        [1, 'b0'],
        [2, 'c3'],
        [1, 'b1'],
      ] as const) {
        expect((await svc.http.post(`/queue/${q}/push`).send({ item: { id }, priority: p })).status).toBe(200);
      }
      expect(await listed(svc.http, q)).toEqual({ queue_id: q, count: 5, locked: true, paused: false });

      await sleep(Math.max(0, lock.expiresAt * 1000 - Date.now()) + 400);
      // On the embedded database this service is the only one on it, and its sweep is 60 s away: nothing
      // has run a turn on the queue, so the stored count is still without the lock's items. On a
      // shared PostgreSQL the other test files' services sweep every queue of the database (as
      // several pushpop processes should), so only the outcome below is checked there; the
      // simulated-clock tests that follow prove the request-triggered expiry on both databases.
      if (databaseKind === 'embedded') {
        expect(await listed(svc.http, q)).toEqual({ queue_id: q, count: 5, locked: false, paused: false });
        await sleep(300);
        expect((await listed(svc.http, q))?.count, 'no sweep may have returned the items').toBe(5);
      }

      // The next request (this pop) returns them first.
      const all = await svc.http.post(`/queue/${q}/pop?depth=100`);
      expect(all.status).toBe(200);
      expect(ids(all.body.items)).toEqual(['a0', 'a1', 'a2', 'a3', 'b0', 'b1', 'c0', 'c1', 'c2', 'c3']);
      expectLockError(await acknowledge(svc.http, q, lock.lockId), 'LOCK_EXPIRED');
    });

    const triggers: [string, (q: string, lockId: string) => Promise<void>][] = [
      ['GET /queue/{id}', async (q) => void expect((await svc.http.get(`/queue/${q}`)).status).toBe(200)],
      ['GET /queue/{id}/state/metadata', async (q) => void expect((await svc.http.get(`/queue/${q}/state/metadata`)).status).toBe(200)],
      ['acknowledge (old id: 410)', async (q, id) => expectLockError(await acknowledge(svc.http, q, id), 'LOCK_EXPIRED')],
      ['extend-lock (old id: 410)', async (q, id) => expectLockError(await extendLock(svc.http, q, id, 30), 'LOCK_EXPIRED')],
      ['release (old id: 410)', async (q, id) => expectLockError(await release(svc.http, q, id), 'LOCK_EXPIRED')],
      ['acknowledge with a wrong id (410)', async (q) => expectLockError(await acknowledge(svc.http, q, OTHER_ID), 'LOCK_EXPIRED')],
      ['a push', async (q) => void expect((await svc.http.post(`/queue/${q}/push`).send({ item: { id: 'b9' }, priority: 1 })).status).toBe(200)],
    ];

    it.each(triggers)('simulated clock: %s expires the lock and stores the returned items', async (label, trigger) => {
      const clock = timeTravel(svc);
      const q = uniqueQueueId('exp-trig');
      await pushAll(svc.http, q, [...entries(0, 'a0', 'a1'), ...entries(1, 'b0', 'b1')]);
      const lock = await lockItems<Item>(svc.http, q, { depth: 3, ttl: 10 });
      expect(ids(lock.items)).toEqual(['a0', 'a1', 'b0']);
      clock.advance(10_001);
      expect(await listed(svc.http, q)).toEqual({ queue_id: q, count: 1, locked: false, paused: false });
      await trigger(q, lock.lockId);
      const pushed = label === 'a push' ? 1 : 0;
      expect((await listed(svc.http, q))?.count, `after ${label}`).toBe(4 + pushed);
      const info = await svc.http.get(`/queue/${q}`);
      expect(info.body).toMatchObject({ count: 4 + pushed, lock: null, priorities: { '0': { count: 2 }, '1': { count: 2 + pushed } } });
      expect(ids(await drain<Item>(svc.http, q))).toEqual(['a0', 'a1', 'b0', 'b1', ...(pushed ? ['b9'] : [])]);
    });

    it('simulated clock: a pop with require_ack after expiry gets the returned items first, under a new lock', async () => {
      const clock = timeTravel(svc);
      const q = uniqueQueueId('exp-relock');
      await pushAll(svc.http, q, entries(0, 'a0', 'a1', 'a2', 'a3'));
      const first = await lockItems<Item>(svc.http, q, { depth: 2, ttl: 5 });
      clock.advance(5_001);
      const second = await lockItems<Item>(svc.http, q, { depth: 3, ttl: 5 });
      expect(ids(second.items)).toEqual(['a0', 'a1', 'a2']);
      expect(second.lockId).not.toBe(first.lockId);
    });
  });

  describe('pop?require_ack=true', () => {
    it('answers items, count, locked, a lock_id of >= 11 URL-safe characters, lock_expires_at ~ now + ttl (unix seconds, float) and delivery_counts', async () => {
      const q = uniqueQueueId('lock-shape');
      await pushAll(svc.http, q, [...entries(1, 'b0'), ...entries(0, 'a0', 'a1')]);
      const before = nowSeconds();
      const res = await popAck(svc.http, q, { depth: 2, ttl: 10 });
      const after = nowSeconds();
      expect(res.status).toBe(200);
      expect(Object.keys(res.body).sort()).toEqual(['count', 'delivery_counts', 'items', 'lock_expires_at', 'lock_id', 'locked']);
      expect(res.body).toMatchObject({ items: [{ id: 'a0' }, { id: 'a1' }], count: 2, locked: true, delivery_counts: [1, 1] });
      expect(res.body.lock_id).toMatch(LOCK_ID_PATTERN);
      expect(res.body.lock_expires_at).toBeGreaterThanOrEqual(before + 10 - 0.01);
      expect(res.body.lock_expires_at).toBeLessThanOrEqual(after + 10 + 0.01);
      expect(await acknowledge(svc.http, q, res.body.lock_id)).toMatchObject({ status: 200 });
    });

    it('ttl_seconds defaults to 30; require_ack=1 works too', async () => {
      const q = uniqueQueueId('lock-default');
      await pushAll(svc.http, q, entries(0, 'a0'));
      const before = nowSeconds();
      const res = await svc.http.post(`/queue/${q}/pop?require_ack=1`);
      const after = nowSeconds();
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ items: [{ id: 'a0' }], count: 1, locked: true });
      expect(res.body.lock_expires_at).toBeGreaterThanOrEqual(before + 30 - 0.01);
      expect(res.body.lock_expires_at).toBeLessThanOrEqual(after + 30 + 0.01);
    });

    it('a new lock_id for every lock (25 locks), always >= 11 characters of [A-Za-z0-9_-]; lock_expires_at carries fractions of a second', async () => {
      const q = uniqueQueueId('lock-ids');
      await pushAll(
        svc.http,
        q,
        Array.from({ length: 25 }, (_, i) => ({ item: { id: `a${i}` }, priority: 0 })),
      );
      const lockIds: string[] = [];
      const expiries: number[] = [];
      for (let i = 0; i < 25; i++) {
        const lock = await lockItems<Item>(svc.http, q, { ttl: 60 });
        expect(ids(lock.items)).toEqual([`a${i}`]);
        lockIds.push(lock.lockId);
        expiries.push(lock.expiresAt);
        expect((await acknowledge(svc.http, q, lock.lockId)).status).toBe(200);
      }
      for (const id of lockIds) expect(id).toMatch(LOCK_ID_PATTERN);
      expect(new Set(lockIds).size).toBe(25);
      // Millisecond precision: 25 whole-second values in a row would mean seconds were truncated.
      expect(
        expiries.some((e) => !Number.isInteger(e)),
        `lock_expires_at values ${expiries.join(', ')}`,
      ).toBe(true);
    });

    it('ttl_seconds 0 and 301 answer 400 VALIDATION_FAILED and pop nothing; 1 and 300 are accepted', async () => {
      const q = uniqueQueueId('lock-ttl');
      await pushAll(svc.http, q, entries(0, 'a0', 'a1'));
      expectValidationFailed(await popAck(svc.http, q, { ttl: 0 }), 'ttl 0');
      expectValidationFailed(await popAck(svc.http, q, { ttl: 301 }), 'ttl 301');
      expectValidationFailed(await svc.http.post(`/queue/${q}/pop?require_ack=true&ttl_seconds=1.5`), 'ttl 1.5');
      expect((await svc.http.get(`/queue/${q}`)).body).toMatchObject({ count: 2, lock: null });
      const one = await lockItems<Item>(svc.http, q, { ttl: 1 });
      expect(ids(one.items)).toEqual(['a0']);
      expect((await acknowledge(svc.http, q, one.lockId)).status).toBe(200);
      const max = await lockItems<Item>(svc.http, q, { ttl: 300 });
      expect(max.expiresAt).toBeGreaterThan(nowSeconds() + 299);
      expect(ids(max.items)).toEqual(['a1']);
    });

    it('an empty queue answers {items: [], count: 0, locked: false} and makes no lock (never pushed, and emptied)', async () => {
      const never = uniqueQueueId('lock-never');
      for (let i = 0; i < 2; i++) {
        const res = await popAck(svc.http, never, { depth: 5 });
        expect({ status: res.status, body: res.body }).toEqual({ status: 200, body: { items: [], count: 0, locked: false } });
      }
      expect((await svc.http.get(`/queue/${never}`)).status).toBe(404);

      const q = uniqueQueueId('lock-empty');
      await pushAll(svc.http, q, entries(0, 'a0'));
      expect((await svc.http.post(`/queue/${q}/pop`)).body).toEqual({ items: [{ id: 'a0' }], count: 1 });
      const first = await popAck(svc.http, q, { depth: 3 });
      expect({ status: first.status, body: first.body }).toEqual({ status: 200, body: { items: [], count: 0, locked: false } });
      // No lock was made: the next pops work, the queue shows no lock, nothing can be acknowledged.
      expect((await popAck(svc.http, q)).body).toEqual({ items: [], count: 0, locked: false });
      expect((await svc.http.post(`/queue/${q}/pop`)).status).toBe(200);
      expect((await svc.http.get(`/queue/${q}`)).body.lock).toBeNull();
      expect(await listed(svc.http, q)).toMatchObject({ locked: false });
      expectLockError(await acknowledge(svc.http, q, OTHER_ID), 'LOCK_NOT_FOUND');
      // And a later push can be locked at once.
      await pushAll(svc.http, q, entries(0, 'a1'));
      expect(ids((await lockItems<Item>(svc.http, q)).items)).toEqual(['a1']);
    });

    it('while locked, every pop (plain, require_ack, any depth, long poll) answers 423 QUEUE_LOCKED with lock_expires_at; pushes still work', async () => {
      const q = uniqueQueueId('lock-423');
      await pushAll(svc.http, q, entries(0, 'a0', 'a1', 'a2'));
      const lock = await lockItems<Item>(svc.http, q, { ttl: 60 });
      const pops = [
        `/queue/${q}/pop`,
        `/queue/${q}/pop?depth=100`,
        `/queue/${q}/pop?require_ack=true`,
        `/queue/${q}/pop?require_ack=true&depth=3&ttl_seconds=5`,
        `/queue/${q}/pop?require_ack=false`,
      ];
      for (const path of pops) {
        const expiresAt = expectQueueLocked(await svc.http.post(path), path);
        expect(expiresAt, path).toBeCloseTo(lock.expiresAt, 3);
      }
      const started = Date.now();
      expectQueueLocked(await svc.http.post(`/queue/${q}/pop?wait_seconds=3`), 'long poll');
      expect(Date.now() - started, 'a long poll on a locked queue answers 423 at once').toBeLessThan(2000);
      expect((await svc.http.post(`/queue/${q}/push`).send({ item: { id: 'a3' } })).status).toBe(200);
      expectQueueLocked(await svc.http.post(`/queue/${q}/pop`), 'after a push');
      // The refused pops took nothing.
      expect((await svc.http.get(`/queue/${q}`)).body).toMatchObject({ count: 3, lock: { item_count: 1 } });
    });

    it('pop works again after acknowledge, after release and after expiry', async () => {
      const clock = timeTravel(svc);
      const q = uniqueQueueId('lock-again');
      await pushAll(svc.http, q, entries(0, 'a0', 'a1', 'a2', 'a3', 'a4'));

      const l1 = await lockItems<Item>(svc.http, q, { ttl: 30 });
      expectQueueLocked(await svc.http.post(`/queue/${q}/pop`));
      expect((await acknowledge(svc.http, q, l1.lockId)).status).toBe(200);
      const l2 = await lockItems<Item>(svc.http, q, { ttl: 30 });
      expect(ids(l2.items), 'after acknowledge').toEqual(['a1']);

      expectQueueLocked(await svc.http.post(`/queue/${q}/pop`));
      expect((await release(svc.http, q, l2.lockId)).status).toBe(200);
      const l3 = await lockItems<Item>(svc.http, q, { depth: 2, ttl: 30 });
      expect(ids(l3.items), 'after release').toEqual(['a1', 'a2']);

      expectQueueLocked(await svc.http.post(`/queue/${q}/pop`));
      clock.advance(30_001);
      const plain = await svc.http.post(`/queue/${q}/pop?depth=2`);
      expect(plain.status, 'after expiry').toBe(200);
      expect(ids(plain.body.items)).toEqual(['a1', 'a2']);
      expect(new Set([l1.lockId, l2.lockId, l3.lockId]).size).toBe(3);
    });

    it('GET /queue shows the lock (expires_at, created_at, item_count) but never its id; count leaves locked items out; GET /queues shows locked', async () => {
      const q = uniqueQueueId('lock-inspect');
      await pushAll(svc.http, q, [...entries(0, 'a0', 'a1', 'a2'), ...entries(1, 'b0', 'b1')]);
      const before = nowSeconds();
      const lock = await lockItems<Item>(svc.http, q, { depth: 4, ttl: 60 });
      const after = nowSeconds();
      expect(ids(lock.items)).toEqual(['a0', 'a1', 'a2', 'b0']);

      const info = await svc.http.get(`/queue/${q}`);
      expect(info.status).toBe(200);
      expect(info.body.count).toBe(1);
      expect(info.body.priorities).toEqual({ '1': expect.objectContaining({ count: 1 }) });
      expect(Object.keys(info.body.lock).sort()).toEqual(['created_at', 'expires_at', 'item_count']);
      expect(info.body.lock.item_count).toBe(4);
      expect(info.body.lock.expires_at).toBeCloseTo(lock.expiresAt, 3);
      expect(info.body.lock.created_at).toBeGreaterThanOrEqual(before - 0.01);
      expect(info.body.lock.created_at).toBeLessThanOrEqual(after + 0.01);
      expect(info.body.lock.expires_at - info.body.lock.created_at).toBeCloseTo(60, 2);
      expect(info.text).not.toContain(lock.lockId);
      const metadata = await svc.http.get(`/queue/${q}/state/metadata`);
      expect(metadata.status).toBe(200);
      expect(metadata.text).not.toContain(lock.lockId);
      expect(metadata.body.queues).toEqual({ queue_1: { metadata: expect.objectContaining({ count: 1 }) } });

      expect(await listed(svc.http, q)).toEqual({ queue_id: q, count: 1, locked: true, paused: false });
      const listing = await svc.http.get(`/queues?prefix=${q}`);
      expect(listing.text).not.toContain(lock.lockId);

      expect((await acknowledge(svc.http, q, lock.lockId)).status).toBe(200);
      expect((await svc.http.get(`/queue/${q}`)).body).toMatchObject({ count: 1, lock: null });
      expect(await listed(svc.http, q)).toEqual({ queue_id: q, count: 1, locked: false, paused: false });
    });

    it('DELETE /queue while locked: items_deleted counts the locked items; the lock goes with the queue', async () => {
      const q = uniqueQueueId('lock-delete');
      await pushAll(svc.http, q, [...entries(0, 'a0', 'a1', 'a2'), ...entries(3, 'd0', 'd1')]);
      const lock = await lockItems<Item>(svc.http, q, { depth: 3, ttl: 60 });
      const del = await svc.http.delete(`/queue/${q}`);
      expect({ status: del.status, body: del.body }).toEqual({ status: 200, body: { success: true, items_deleted: 5 } });
      expect((await svc.http.get(`/queue/${q}`)).status).toBe(404);
      expect(await listed(svc.http, q)).toBeUndefined();
      expectLockError(await acknowledge(svc.http, q, lock.lockId), 'LOCK_NOT_FOUND');
      expect((await svc.http.post(`/queue/${q}/pop`)).body).toEqual({ items: [], count: 0 });
      // A new queue under the same id has no lock.
      await pushAll(svc.http, q, entries(0, 'n0'));
      expect((await svc.http.post(`/queue/${q}/pop`)).body).toEqual({ items: [{ id: 'n0' }], count: 1 });
    });

    it('DELETE /queue after an unprocessed expiry counts the returned items once', async () => {
      const clock = timeTravel(svc);
      const q = uniqueQueueId('lock-delete-exp');
      await pushAll(svc.http, q, entries(0, 'a0', 'a1', 'a2'));
      await lockItems<Item>(svc.http, q, { depth: 2, ttl: 5 });
      clock.advance(5_001);
      const del = await svc.http.delete(`/queue/${q}`);
      expect({ status: del.status, body: del.body }).toEqual({ status: 200, body: { success: true, items_deleted: 3 } });
    });
  });

  describe.each(LOCK_ENDPOINTS)('%s: the acknowledge table, in its check order', (endpoint: LockEndpoint) => {
    const call = (q: string, body: Record<string, unknown>) => lockCall(svc.http, endpoint, q, body);

    it('lock_id missing, empty or not a string: 400 LOCK_ID_REQUIRED, before any other check', async () => {
      const clock = timeTravel(svc);
      const never = uniqueQueueId('req-never');
      const noLock = uniqueQueueId('req-nolock');
      const locked = uniqueQueueId('req-locked');
      const expired = uniqueQueueId('req-expired');
      await pushAll(svc.http, noLock, entries(0, 'a0'));
      await pushAll(svc.http, locked, entries(0, 'a0', 'a1'));
      await pushAll(svc.http, expired, entries(0, 'a0'));
      const lock = await lockItems<Item>(svc.http, locked, { ttl: 60 });
      const old = await lockItems<Item>(svc.http, expired, { ttl: 5 });
      clock.advance(5_001);
      for (const q of [never, noLock, locked, expired]) {
        for (const [label, body] of BAD_LOCK_ID_BODIES) expectLockError(await call(q, body), 'LOCK_ID_REQUIRED', `${q}: lock_id ${label}`);
      }
      expect((await svc.http.get(`/queue/${never}`)).status, 'the calls created no queue').toBe(404);
      // The lock is untouched: still 423, still held, and its own id still works.
      expectQueueLocked(await svc.http.post(`/queue/${locked}/pop`));
      expect((await svc.http.get(`/queue/${locked}`)).body).toMatchObject({ count: 1, lock: { item_count: 1 } });
      expect((await call(locked, { lock_id: lock.lockId })).status).toBe(200);
      expectLockError(await call(expired, { lock_id: old.lockId }), 'LOCK_EXPIRED');
    });

    it('no lock on the queue: 404 LOCK_NOT_FOUND (queue never pushed to, queue without a lock, lock already finished)', async () => {
      const never = uniqueQueueId('nf-never');
      expectLockError(await call(never, { lock_id: OTHER_ID }), 'LOCK_NOT_FOUND', 'never pushed');
      expect((await svc.http.get(`/queue/${never}`)).status).toBe(404);

      const q = uniqueQueueId('nf-queue');
      await pushAll(svc.http, q, entries(0, 'a0', 'a1', 'a2'));
      expectLockError(await call(q, { lock_id: OTHER_ID }), 'LOCK_NOT_FOUND', 'no lock yet');

      const acked = await lockItems<Item>(svc.http, q);
      expect((await acknowledge(svc.http, q, acked.lockId)).status).toBe(200);
      expectLockError(await call(q, { lock_id: acked.lockId }), 'LOCK_NOT_FOUND', 'after acknowledge, its own id');
      expectLockError(await call(q, { lock_id: OTHER_ID }), 'LOCK_NOT_FOUND', 'after acknowledge, another id');

      const released = await lockItems<Item>(svc.http, q);
      expect((await release(svc.http, q, released.lockId)).status).toBe(200);
      expectLockError(await call(q, { lock_id: released.lockId }), 'LOCK_NOT_FOUND', 'after release, its own id');
    });

    it('expired: 410 LOCK_EXPIRED, also with a wrong id; after a new lock the old id answers 400 INVALID_LOCK_ID', async () => {
      const clock = timeTravel(svc);
      const q = uniqueQueueId('exp');
      await pushAll(svc.http, q, entries(0, 'a0', 'a1', 'a2'));
      const old = await lockItems<Item>(svc.http, q, { depth: 2, ttl: 5 });
      clock.advance(5_001);
      expectLockError(await call(q, { lock_id: OTHER_ID }), 'LOCK_EXPIRED', 'wrong id on an expired lock');
      expectLockError(await call(q, { lock_id: old.lockId }), 'LOCK_EXPIRED', 'its own id');
      expectLockError(await call(q, { lock_id: old.lockId }), 'LOCK_EXPIRED', 'its own id, again');
      // Expiry returned the items; plain pops do not make a lock, so the old id keeps answering 410.
      expect(ids((await svc.http.post(`/queue/${q}/pop`)).body.items)).toEqual(['a0']);
      expectLockError(await call(q, { lock_id: old.lockId }), 'LOCK_EXPIRED', 'after a plain pop');

      const fresh = await lockItems<Item>(svc.http, q, { ttl: 30 });
      expect(ids(fresh.items)).toEqual(['a1']);
      expectLockError(await call(q, { lock_id: old.lockId }), 'INVALID_LOCK_ID', 'old id once a new lock exists');
      // The new lock stays.
      expectQueueLocked(await svc.http.post(`/queue/${q}/pop`));
      expect((await acknowledge(svc.http, q, fresh.lockId)).status).toBe(200);
      expectLockError(await call(q, { lock_id: old.lockId }), 'LOCK_NOT_FOUND', 'old id once the new lock is acknowledged');
    });

    it('wrong id on an active lock: 400 INVALID_LOCK_ID and the lock stays as it was; the right id then works', async () => {
      const q = uniqueQueueId('wrong');
      await pushAll(svc.http, q, [...entries(0, 'a0', 'a1'), ...entries(1, 'b0')]);
      const lock = await lockItems<Item>(svc.http, q, { depth: 2, ttl: 60 });
      const before = (await svc.http.get(`/queue/${q}`)).body;
      const wrongIds = [
        OTHER_ID,
        lock.lockId.toUpperCase() === lock.lockId ? lock.lockId.toLowerCase() : lock.lockId.toUpperCase(),
        `${lock.lockId}x`,
        lock.lockId.slice(1),
        ' ',
      ];
      for (const wrong of wrongIds) {
        if (wrong === lock.lockId) continue;
        expectLockError(
          await call(q, { lock_id: wrong, ...(endpoint === 'extend-lock' ? { ttl_seconds: 300 } : {}) }),
          'INVALID_LOCK_ID',
          `lock_id ${JSON.stringify(wrong)}`,
        );
      }
      expectQueueLocked(await svc.http.post(`/queue/${q}/pop`));
      expectQueueLocked(await popAck(svc.http, q));
      // Not acknowledged, not released, not extended.
      expect((await svc.http.get(`/queue/${q}`)).body).toEqual(before);
      expect(before).toMatchObject({ count: 1, lock: { item_count: 2 } });
      expect(before.lock.expires_at).toBeCloseTo(lock.expiresAt, 3);
      expect((await call(q, { lock_id: lock.lockId })).status).toBe(200);
    });
  });

  describe('acknowledge', () => {
    it('match: 200 {success, message, items_acknowledged}; the items are gone for good, also after the TTL passes', async () => {
      const clock = timeTravel(svc);
      const q = uniqueQueueId('ack');
      await pushAll(svc.http, q, [...entries(0, 'a0', 'a1', 'a2'), ...entries(1, 'b0', 'b1')]);
      const lock = await lockItems<Item>(svc.http, q, { depth: 4, ttl: 1 });
      expect(ids(lock.items)).toEqual(['a0', 'a1', 'a2', 'b0']);
      const res = await acknowledge(svc.http, q, lock.lockId);
      expect(res.status).toBe(200);
      expect(Object.keys(res.body).sort()).toEqual(['items_acknowledged', 'message', 'success']);
      expect(res.body).toMatchObject({ success: true, items_acknowledged: 4 });
      expect(typeof res.body.message).toBe('string');
      expect(res.body.message.length).toBeGreaterThan(0);
      expect((await svc.http.get(`/queue/${q}`)).body).toMatchObject({ count: 1, lock: null });

      clock.advance(600_000);
      expect((await svc.http.get(`/queue/${q}`)).body).toMatchObject({ count: 1, lock: null });
      expect(await listed(svc.http, q)).toEqual({ queue_id: q, count: 1, locked: false, paused: false });
      expect(ids(await drain<Item>(svc.http, q))).toEqual(['b1']);
      expectLockError(await acknowledge(svc.http, q, lock.lockId), 'LOCK_NOT_FOUND', 'acknowledging again');
    });
  });

  describe('extend-lock', () => {
    it('200 {success, lock_id, lock_expires_at ~ now + ttl}; inspection and 423 show the new expiry; ttl_seconds defaults to 30', async () => {
      const q = uniqueQueueId('ext');
      await pushAll(svc.http, q, entries(0, 'a0', 'a1'));
      const lock = await lockItems<Item>(svc.http, q, { ttl: 5 });
      const before = nowSeconds();
      const res = await extendLock(svc.http, q, lock.lockId, 120);
      const after = nowSeconds();
      expect(res.status).toBe(200);
      expect(Object.keys(res.body).sort()).toEqual(['lock_expires_at', 'lock_id', 'success']);
      expect(res.body).toMatchObject({ success: true, lock_id: lock.lockId });
      expect(res.body.lock_expires_at).toBeGreaterThanOrEqual(before + 120 - 0.01);
      expect(res.body.lock_expires_at).toBeLessThanOrEqual(after + 120 + 0.01);
      expect((await svc.http.get(`/queue/${q}`)).body.lock).toMatchObject({ expires_at: expect.closeTo(res.body.lock_expires_at, 3), item_count: 1 });
      expect(expectQueueLocked(await svc.http.post(`/queue/${q}/pop`))).toBeCloseTo(res.body.lock_expires_at, 3);

      // Without ttl_seconds: now + 30 (also shortens a longer lock: the expiry is set, not added to).
      const b2 = nowSeconds();
      const def = await extendLock(svc.http, q, lock.lockId);
      expect(def.status).toBe(200);
      expect(def.body.lock_expires_at).toBeGreaterThanOrEqual(b2 + 30 - 0.01);
      expect(def.body.lock_expires_at).toBeLessThanOrEqual(nowSeconds() + 30 + 0.01);
      expect((await acknowledge(svc.http, q, lock.lockId)).body).toMatchObject({ success: true, items_acknowledged: 1 });
    });

    it('ttl_seconds 0, 301, 2.5, "10" or null: 400 VALIDATION_FAILED and the lock is unchanged; 1 and 300 are accepted', async () => {
      const q = uniqueQueueId('ext-ttl');
      await pushAll(svc.http, q, entries(0, 'a0'));
      const lock = await lockItems<Item>(svc.http, q, { ttl: 60 });
      for (const ttl of [0, 301, 2.5, '10', -1, null]) {
        expectValidationFailed(await lockCall(svc.http, 'extend-lock', q, { lock_id: lock.lockId, ttl_seconds: ttl }), `ttl_seconds ${JSON.stringify(ttl)}`);
      }
      expect((await svc.http.get(`/queue/${q}`)).body.lock.expires_at).toBeCloseTo(lock.expiresAt, 3);
      const max = await extendLock(svc.http, q, lock.lockId, 300);
      expect(max.status).toBe(200);
      expect(max.body.lock_expires_at).toBeGreaterThan(nowSeconds() + 299);
      const min = await extendLock(svc.http, q, lock.lockId, 1);
      expect(min.status).toBe(200);
      expect(min.body.lock_expires_at).toBeLessThan(nowSeconds() + 1.01);
    });

    it('real time: a lock of 1 s extended to 3 s is still held after its original expiry, and acknowledges', async () => {
      const q = uniqueQueueId('ext-real');
      await pushAll(svc.http, q, entries(0, 'a0', 'a1', 'a2'));
      const lock = await lockItems<Item>(svc.http, q, { depth: 2, ttl: 1 });
      const ext = await extendLock(svc.http, q, lock.lockId, 3);
      expect(ext.status).toBe(200);
      await sleep(Math.max(0, lock.expiresAt * 1000 - Date.now()) + 500);
      expect(Date.now() / 1000, 'past the original expiry').toBeGreaterThan(lock.expiresAt);
      expect(await listed(svc.http, q)).toEqual({ queue_id: q, count: 1, locked: true, paused: false });
      expectQueueLocked(await svc.http.post(`/queue/${q}/pop`));
      expect((await svc.http.get(`/queue/${q}`)).body).toMatchObject({ count: 1, lock: { item_count: 2 } });
      expect((await acknowledge(svc.http, q, lock.lockId)).body).toMatchObject({ success: true, items_acknowledged: 2 });
      expect(ids(await drain<Item>(svc.http, q))).toEqual(['a2']);
    });

    it('simulated clock: an extended lock expires at its new time, not at the old one', async () => {
      const clock = timeTravel(svc);
      const q = uniqueQueueId('ext-clock');
      await pushAll(svc.http, q, [...entries(0, 'a0'), ...entries(1, 'b0')]);
      const lock = await lockItems<Item>(svc.http, q, { ttl: 10 });
      clock.advance(8_000);
      const ext = await extendLock(svc.http, q, lock.lockId, 10);
      expect(ext.status).toBe(200);
      expect(ext.body.lock_expires_at).toBeCloseTo(clock.nowSeconds() + 10, 0);
      clock.advance(8_000); // 16 s after the pop: past the original expiry, 2 s before the new one
      expectQueueLocked(await svc.http.post(`/queue/${q}/pop`));
      expect((await extendLock(svc.http, q, lock.lockId, 5)).status).toBe(200);
      clock.advance(5_001);
      expectLockError(await extendLock(svc.http, q, lock.lockId, 5), 'LOCK_EXPIRED');
      expect(ids(await drain<Item>(svc.http, q))).toEqual(['a0', 'b0']);
    });
  });

  describe('release', () => {
    it('200 {success: true, items_returned}; the items are back at the front of their original priorities, in order, ahead of pushes made meanwhile', async () => {
      const q = uniqueQueueId('rel');
      await pushAll(svc.http, q, [...entries(0, 'a0', 'a1'), ...entries(1, 'b0', 'b1', 'b2'), ...entries(3, 'd0')]);
      const lock = await lockItems<Item>(svc.http, q, { depth: 4, ttl: 60 });
      expect(ids(lock.items)).toEqual(['a0', 'a1', 'b0', 'b1']);
      await pushAll(svc.http, q, [...entries(1, 'b3'), ...entries(0, 'a2'), ...entries(2, 'c0')]);
      const res = await release(svc.http, q, lock.lockId);
      expect({ status: res.status, body: res.body }).toEqual({ status: 200, body: { success: true, items_returned: 4, items_delayed: 0 } });
      expect((await svc.http.get(`/queue/${q}`)).body).toMatchObject({
        count: 9,
        lock: null,
        priorities: { '0': { count: 3 }, '1': { count: 4 }, '2': { count: 1 }, '3': { count: 1 } },
      });
      expect(await listed(svc.http, q)).toEqual({ queue_id: q, count: 9, locked: false, paused: false });
      expectLockError(await release(svc.http, q, lock.lockId), 'LOCK_NOT_FOUND', 'releasing again');
      expect(ids(await drain<Item>(svc.http, q))).toEqual(['a0', 'a1', 'a2', 'b0', 'b1', 'b2', 'b3', 'c0', 'd0']);
    });
  });
});

describe(`lock expiry by the background sweep; returned batches larger than a segment (${databaseKind})`, () => {
  /** Sweeps every 200 ms; segments of 5 items. */
  let svc: TestService;
  beforeAll(async () => {
    svc = await startService({ env: { LOCK_SWEEP_INTERVAL_MS: '200', SEGMENT_SIZE: '5' } });
  });
  afterAll(async () => {
    if (svc) await closeWithin(() => svc.close());
    if (svc) removeDataDir(svc.dataDir);
  });

  /** Polls the listing (which runs no turn on the queue) until its count is `count`; returns when, or undefined. */
  async function waitForListedCount(q: string, count: number, deadline: number): Promise<number | undefined> {
    for (;;) {
      const row = await listed(svc.http, q);
      if (row?.count === count) return Date.now();
      if (Date.now() > deadline) return undefined;
      await sleep(50);
    }
  }

  it('nobody calls the queue: within ~1.5 s of expiry the sweep has put the items back (seen only through GET /queues), at their original priorities, in order', async () => {
    const q = uniqueQueueId('sweep');
    const acked = uniqueQueueId('sweep-acked');
    await pushAll(svc.http, q, [...entries(0, 'a0', 'a1', 'a2'), ...entries(2, 'c0', 'c1', 'c2')]);
    await pushAll(svc.http, acked, entries(0, 'x0', 'x1'));
    const lock = await lockItems<Item>(svc.http, q, { depth: 5, ttl: 1 });
    const ackedLock = await lockItems<Item>(svc.http, acked, { ttl: 1 });
    expect((await acknowledge(svc.http, acked, ackedLock.lockId)).status).toBe(200);
    expect(ids(lock.items)).toEqual(['a0', 'a1', 'a2', 'c0', 'c1']);
    for (const [p, id] of [
      [0, 'a3'],
      [1, 'b0'],
      [2, 'c3'],
      [1, 'b1'],
    ] as const) {
      expect((await svc.http.post(`/queue/${q}/push`).send({ item: { id }, priority: p })).status).toBe(200);
    }
    expect(await listed(svc.http, q)).toEqual({ queue_id: q, count: 5, locked: true, paused: false });

    const expiresAtMs = lock.expiresAt * 1000;
    const back = await waitForListedCount(q, 10, expiresAtMs + 1500);
    expect(back, `the sweep did not return the items within 1.5 s of expiry (listing: ${JSON.stringify(await listed(svc.http, q))})`).toBeDefined();
    expect(back!, 'items came back before the lock expired').toBeGreaterThanOrEqual(expiresAtMs - 20);
    expect(await listed(svc.http, q)).toEqual({ queue_id: q, count: 10, locked: false, paused: false });

    expect(ids(await drain<Item>(svc.http, q))).toEqual(['a0', 'a1', 'a2', 'a3', 'b0', 'b1', 'c0', 'c1', 'c2', 'c3']);
    expectLockError(await acknowledge(svc.http, q, lock.lockId), 'LOCK_EXPIRED');
    // The acknowledged lock's items never came back.
    expect(await listed(svc.http, acked)).toEqual({ queue_id: acked, count: 1, locked: false, paused: false });
    expect(ids(await drain<Item>(svc.http, acked))).toEqual(['x1']);
  });

  it('SEGMENT_SIZE 5: locks of 8 items go back in order, on expiry and on release, into a live head segment and into an emptied priority', async () => {
    const spill = uniqueQueueId('seg-spill'); // head segment still has items
    const whole = uniqueQueueId('seg-whole'); // the lock took every item of its priority
    const rel = uniqueQueueId('seg-release');
    const n = (prefix: string, from: number, to: number): string[] => Array.from({ length: to - from }, (_, i) => `${prefix}${from + i}`);

    await pushAll(svc.http, spill, entries(0, ...n('a', 0, 13)));
    await pushAll(svc.http, whole, entries(1, ...n('b', 0, 8)));
    await pushAll(svc.http, rel, entries(0, ...n('a', 0, 12)));
    const spillLock = await lockItems<Item>(svc.http, spill, { depth: 8, ttl: 1 });
    const wholeLock = await lockItems<Item>(svc.http, whole, { depth: 8, ttl: 1 });
    const relLock = await lockItems<Item>(svc.http, rel, { depth: 8, ttl: 60 });
    for (const lock of [spillLock, wholeLock, relLock]) expect(ids(lock.items)).toEqual(n(lock === wholeLock ? 'b' : 'a', 0, 8));
    expect((await svc.http.get(`/queue/${whole}`)).body).toMatchObject({ count: 0, priorities: {}, lock: { item_count: 8 } });
    await pushAll(svc.http, spill, entries(0, ...n('a', 13, 17)));
    await pushAll(svc.http, rel, entries(0, ...n('a', 12, 14)));

    const released = await release(svc.http, rel, relLock.lockId);
    expect(released.body).toEqual({ success: true, items_returned: 8, items_delayed: 0 });

    const deadline = Math.max(spillLock.expiresAt, wholeLock.expiresAt) * 1000 + 1500;
    expect(await waitForListedCount(spill, 17, deadline), 'spill: items back').toBeDefined();
    expect(await waitForListedCount(whole, 8, deadline), 'whole: items back').toBeDefined();
    expect((await svc.http.get(`/queue/${spill}`)).body).toMatchObject({ count: 17, lock: null, priorities: { '0': { count: 17 } } });
    expect((await svc.http.get(`/queue/${whole}`)).body).toMatchObject({ count: 8, lock: null, priorities: { '1': { count: 8 } } });
    await pushAll(svc.http, whole, entries(1, ...n('b', 8, 11)));

    // Popped a few at a time, so the reads cross every segment boundary.
    const popAll = async (q: string): Promise<string[]> => {
      const out: string[] = [];
      for (let i = 0; i < 50; i++) {
        const res = await svc.http.post(`/queue/${q}/pop?depth=3`);
        expect(res.status).toBe(200);
        if (res.body.count === 0) return out;
        out.push(...ids(res.body.items));
      }
      throw new Error(`${q} not empty after 50 pops`);
    };
    expect(await popAll(spill)).toEqual(n('a', 0, 17));
    expect(await popAll(whole)).toEqual(n('b', 0, 11));
    expect(await popAll(rel)).toEqual(n('a', 0, 14));
  });
});

describe(`a crash (SIGKILL of the built service, node main.js) keeps locks and their items (${databaseKind})`, () => {
  let build: ServiceBuild;
  let dataDir: string;
  let child: ChildService | undefined;
  beforeAll(async () => {
    // A private build of src/ (see child-service.ts), ~15 s.
    build = await buildService();
    dataDir = makeDataDir();
  }, 300_000);
  afterAll(async () => {
    await child?.kill('SIGKILL');
    if (dataDir) removeDataDir(dataDir);
    build?.remove();
  });

  it("after a restart on the same database the lock is still there with its id, and an expired lock's items come back by the sweep, in order", async () => {
    const env = { LOCK_SWEEP_INTERVAL_MS: '200' };
    child = await startChildService({ build, dataDir, env });
    const held = uniqueQueueId('crash-held');
    const lapsed = uniqueQueueId('crash-lapsed');
    await pushAll(child.http, held, [...entries(0, 'a0', 'a1', 'a2', 'a3'), ...entries(1, 'b0')]);
    const heldLock = await lockItems<Item>(child.http, held, { depth: 3, ttl: 300 });
    expect(ids(heldLock.items)).toEqual(['a0', 'a1', 'a2']);
    await pushAll(child.http, lapsed, [...entries(0, 's0', 's1', 's2', 's3', 's4'), ...entries(2, 'u0', 'u1')]);
    const lapsedLock = await lockItems<Item>(child.http, lapsed, { depth: 6, ttl: 2 });
    expect(ids(lapsedLock.items)).toEqual(['s0', 's1', 's2', 's3', 's4', 'u0']);
    await pushAll(child.http, lapsed, [...entries(0, 's5'), ...entries(2, 'u2')]);

    const killed = await child.kill('SIGKILL');
    expect(killed.signal).toBe('SIGKILL');
    child = await startChildService({ build, dataDir, env });

    const info = await child.http.get(`/queue/${held}`);
    expect(info.status, child.output()).toBe(200);
    expect(info.body).toMatchObject({ count: 2, lock: { item_count: 3 } });
    expect(info.body.lock.expires_at).toBeCloseTo(heldLock.expiresAt, 3);
    expect(info.text).not.toContain(heldLock.lockId);
    expectQueueLocked(await child.http.post(`/queue/${held}/pop`));

    // Nobody calls `lapsed`: the sweep of the new process must return its items.
    const deadline = Math.max(lapsedLock.expiresAt * 1000, Date.now()) + 2000;
    let row = await listed(child.http, lapsed);
    while (row?.count !== 9 && Date.now() < deadline) {
      await sleep(50);
      row = await listed(child.http, lapsed);
    }
    expect(row, `items of the expired lock not back by the sweep: ${child.output()}`).toEqual({ queue_id: lapsed, count: 9, locked: false, paused: false });
    expect(ids(await drain<Item>(child.http, lapsed))).toEqual(['s0', 's1', 's2', 's3', 's4', 's5', 'u0', 'u1', 'u2']);
    expectLockError(await acknowledge(child.http, lapsed, lapsedLock.lockId), 'LOCK_EXPIRED');

    // The surviving lock's id still works.
    expect((await acknowledge(child.http, held, heldLock.lockId)).body).toMatchObject({ success: true, items_acknowledged: 3 });
    expect(ids(await drain<Item>(child.http, held))).toEqual(['a3', 'b0']);
  }, 120_000);
});
