import type { Response } from 'supertest';
import type TestAgent from 'supertest/lib/agent.js';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { Clock } from '../../src/common/clock.js';
import { AppConfig } from '../../src/config/app-config.js';
import { LockRepository } from '../../src/storage/lock.repository.js';
import { LockSweeper } from '../../src/lock/lock-sweeper.js';
import { SweepClock } from '../../src/sweeps/sweep-clock.js';
import { TurnRunner } from '../../src/queue/runtime/turn-runner.js';
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
  lockCall,
  lockItems,
  popAck,
  pushAll,
  release,
  timeTravel,
} from '../support/lock-helpers.js';
import { DEFAULT_CONTROLS, withoutDefaultControls } from '../support/controls.js';
import { drain, range, seededRandom, testSeed } from '../support/queue-helpers.js';
import { databaseKind, makeDataDir, pollsWaitingOn, removeDataDir, startService, type TestService, uniqueQueueId } from '../support/service.js';

/**
 * Queue settings, shared lock mode, delivery counts and dead letters over HTTP (CONTRACT.md,
 * "Queue settings", "Shared lock mode (competing consumers)", "Deliveries and dead letters").
 *
 * Items are `{ id }` with ids like `a0` (priority 0), `b0` (priority 1), `c0` (priority 2).
 * Lock expiry runs on a simulated clock ({@link timeTravel}) in a service whose background
 * sweeps are stopped, so that only the requests of a test (or its explicit sweep) expire locks.
 */
type Item = IdItem;

type Settings = {
  segment_size: number;
  buffer_segments: number;
  lock_mode: 'exclusive' | 'shared';
  max_deliveries: number | null;
  dead_letter_queue: string | null;
};

const putSettings = (http: TestAgent, q: string, body: unknown): Promise<Response> => http.put(`/queue/${q}/settings`).send(body as object);
const getSettings = (http: TestAgent, q: string): Promise<Response> => http.get(`/queue/${q}/settings`);

/** PUT settings that must succeed; returns the full settings answered. */
async function settle(http: TestAgent, q: string, body: Partial<Settings>): Promise<Settings> {
  const res = await putSettings(http, q, body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  // The controls are the subject of queue-controls.test.ts: here they stay at their defaults.
  return withoutDefaultControls(res.body as Settings);
}

/** The `locks` of `GET /queue/{id}` on a shared queue. */
async function locksOf(http: TestAgent, q: string): Promise<{ count: number; item_count: number; next_expires_at: number | null }> {
  const res = await http.get(`/queue/${q}`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.lock, 'a shared queue shows locks, not lock').toBeUndefined();
  return res.body.locks;
}

function expectError(res: Response, status: number, code: string, label = ''): void {
  expect({ status: res.status, statusCode: res.body?.statusCode, error_code: res.body?.error_code }, `${label} ${JSON.stringify(res.body)}`).toEqual({
    status,
    statusCode: status,
    error_code: code,
  });
  expect(typeof res.body.message).toBe('string');
}

/** The service's Clock stands at a fixed time that only `advance` moves (undone by `vi.restoreAllMocks()`). */
function frozenClock(app: { get(token: typeof Clock): Clock }): { advance(ms: number): void; nowSeconds(): number } {
  let now = Math.floor(Date.now() / 1000) * 1000;
  vi.spyOn(app.get(Clock), 'now').mockImplementation(() => now);
  return {
    advance: (ms) => {
      now += ms;
    },
    nowSeconds: () => now / 1000,
  };
}

/**
 * One sweep of the lock sweeper, as its loop would run it (the service's own loop is stopped,
 * so a sweeper of its own runs it, with the service's clock, database and turn runner).
 */
async function sweepOnce(svc: TestService): Promise<number> {
  const get = <T>(token: abstract new (...args: never[]) => T): T => svc.app.get(token as never);
  return new LockSweeper(get(AppConfig), get(SweepClock), get(LockRepository), get(TurnRunner), get(Clock)).sweep();
}

/** The value of one sample of the Prometheus exposition; 0 when absent. */
function sample(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1).split(' ')[0]);
}

describe(`queue settings, shared locks and dead letters (${databaseKind})`, () => {
  /** Sweeps stopped (expiry only by requests and explicit sweeps); env defaults SEGMENT_SIZE 5, BUFFER_SEGMENTS 2. */
  let svc: TestService;

  beforeAll(async () => {
    svc = await startService({ env: { LOCK_SWEEP_INTERVAL_MS: '60000', SEGMENT_SIZE: '5', BUFFER_SEGMENTS: '2' } });
    await svc.app.get(LockSweeper).onModuleDestroy();
  });
  afterAll(async () => {
    if (svc) await closeWithin(() => svc.close());
    if (svc) removeDataDir(svc.dataDir);
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });

  const shared = async (q: string, extra: Partial<Settings> = {}): Promise<Settings> => settle(svc.http, q, { lock_mode: 'shared', ...extra });

  describe('settings', () => {
    it('GET answers 404 QUEUE_NOT_FOUND for a queue that does not exist; PUT creates it and answers all five fields, the layout from the env', async () => {
      const q = uniqueQueueId('set-new');
      expectError(await getSettings(svc.http, q), 404, 'QUEUE_NOT_FOUND');
      expectError(await svc.http.get(`/queue/${q}`), 404, 'QUEUE_NOT_FOUND');
      const put = await putSettings(svc.http, q, { lock_mode: 'shared' });
      expect(put.status).toBe(200);
      expect(put.body).toEqual({
        segment_size: 5,
        buffer_segments: 2,
        lock_mode: 'shared',
        max_deliveries: null,
        dead_letter_queue: null,
        ...DEFAULT_CONTROLS,
      });
      expect((await getSettings(svc.http, q)).body).toEqual(put.body);
      const info = await svc.http.get(`/queue/${q}`);
      expect(info.status).toBe(200);
      expect(info.body).toMatchObject({ queue_id: q, count: 0, config: put.body, locks: { count: 0, item_count: 0, next_expires_at: null } });
      expect(await listed(svc.http, q)).toEqual({ queue_id: q, count: 0, locked: false, paused: false });

      // An empty PUT creates the queue with every default.
      const plain = uniqueQueueId('set-empty');
      expect((await putSettings(svc.http, plain, {})).body).toEqual({
        segment_size: 5,
        buffer_segments: 2,
        lock_mode: 'exclusive',
        max_deliveries: null,
        dead_letter_queue: null,
        ...DEFAULT_CONTROLS,
      });
      // A queue made by a push has the defaults too, and shows an exclusive `lock`.
      const pushed = uniqueQueueId('set-push');
      await pushAll(svc.http, pushed, entries(0, 'a0'));
      expect((await getSettings(svc.http, pushed)).body).toEqual({
        segment_size: 5,
        buffer_segments: 2,
        lock_mode: 'exclusive',
        max_deliveries: null,
        dead_letter_queue: null,
        ...DEFAULT_CONTROLS,
      });
      const exclusive = await svc.http.get(`/queue/${pushed}`);
      expect(exclusive.body).toMatchObject({ lock: null, config: { lock_mode: 'exclusive' } });
      expect(exclusive.body.locks).toBeUndefined();
    });

    it('fields left out keep their value; every field can be set, and null clears the delivery limit and the dead-letter queue', async () => {
      const q = uniqueQueueId('set-all');
      const dlq = uniqueQueueId('set-all-dlq');
      const all: Settings = { segment_size: 10000, buffer_segments: 1000, lock_mode: 'shared', max_deliveries: 1000, dead_letter_queue: dlq };
      expect(await settle(svc.http, q, all)).toEqual(all);
      expect(await settle(svc.http, q, { segment_size: 1 })).toEqual({ ...all, segment_size: 1 });
      expect(await settle(svc.http, q, { buffer_segments: 1, max_deliveries: 1 })).toEqual({ ...all, segment_size: 1, buffer_segments: 1, max_deliveries: 1 });
      expect(await settle(svc.http, q, { max_deliveries: null, dead_letter_queue: null, lock_mode: 'exclusive' })).toEqual({
        segment_size: 1,
        buffer_segments: 1,
        lock_mode: 'exclusive',
        max_deliveries: null,
        dead_letter_queue: null,
      });
      // A dead-letter queue without a delivery limit is allowed (nothing goes there yet).
      expect(await settle(svc.http, q, { dead_letter_queue: dlq })).toMatchObject({ max_deliveries: null, dead_letter_queue: dlq });
      expect((await svc.http.get(`/queue/${q}`)).body.config).toEqual({
        segment_size: 1,
        buffer_segments: 1,
        lock_mode: 'exclusive',
        max_deliveries: null,
        dead_letter_queue: dlq,
        ...DEFAULT_CONTROLS,
      });
      // The dead-letter queue itself is not created by naming it.
      expectError(await getSettings(svc.http, dlq), 404, 'QUEUE_NOT_FOUND');
    });

    const invalid = (self: string): [string, unknown][] => [
      ['segment_size 0', { segment_size: 0 }],
      ['segment_size 10001', { segment_size: 10001 }],
      ['segment_size "5"', { segment_size: '5' }],
      ['segment_size null', { segment_size: null }],
      ['segment_size 2.5', { segment_size: 2.5 }],
      ['buffer_segments 0', { buffer_segments: 0 }],
      ['buffer_segments 1001', { buffer_segments: 1001 }],
      ['buffer_segments "1"', { buffer_segments: '1' }],
      ['buffer_segments null', { buffer_segments: null }],
      ['lock_mode "other"', { lock_mode: 'other' }],
      ['lock_mode "Shared"', { lock_mode: 'Shared' }],
      ['lock_mode null', { lock_mode: null }],
      ['lock_mode 1', { lock_mode: 1 }],
      ['max_deliveries 0', { max_deliveries: 0, dead_letter_queue: 'dlq-x' }],
      ['max_deliveries 1001', { max_deliveries: 1001, dead_letter_queue: 'dlq-x' }],
      ['max_deliveries 2.5', { max_deliveries: 2.5, dead_letter_queue: 'dlq-x' }],
      ['max_deliveries "3"', { max_deliveries: '3', dead_letter_queue: 'dlq-x' }],
      ['max_deliveries without dead_letter_queue', { max_deliveries: 3 }],
      ['max_deliveries with dead_letter_queue null', { max_deliveries: 3, dead_letter_queue: null }],
      ['dead_letter_queue with a space', { dead_letter_queue: 'bad id' }],
      ['dead_letter_queue empty', { dead_letter_queue: '' }],
      ['dead_letter_queue 201 characters', { dead_letter_queue: 'd'.repeat(201) }],
      ['dead_letter_queue ".."', { dead_letter_queue: '..' }],
      ['dead_letter_queue a number', { dead_letter_queue: 42 }],
      ['dead_letter_queue the queue itself', { max_deliveries: 2, dead_letter_queue: self }],
      ['an unknown field', { lock_mode: 'shared', visibility_timeout: 30 }],
    ];

    it('each field out of its range or of the wrong type is 400 VALIDATION_FAILED, and creates no queue', async () => {
      for (const [label, body] of invalid('set-bad-self')) {
        const q = label.includes('itself') ? 'set-bad-self' : uniqueQueueId('set-bad');
        expectValidationFailed(await putSettings(svc.http, q, body), label);
        expectError(await getSettings(svc.http, q), 404, 'QUEUE_NOT_FOUND', `${label}: no queue made`);
      }
      // 201 characters of queue id are still refused on the path, as ever.
      expectError(await putSettings(svc.http, 'q'.repeat(201), {}), 400, 'INVALID_QUEUE_ID');
      // A body that is not an object.
      expect(
        (
          await svc.http
            .put(`/queue/${uniqueQueueId('set-bad')}/settings`)
            .set('content-type', 'application/json')
            .send('[1]')
        ).status,
      ).toBe(400);
    });

    it("a refused PUT leaves an existing queue's settings as they were", async () => {
      const q = uniqueQueueId('set-keep');
      const before = await shared(q, { segment_size: 7, max_deliveries: 4, dead_letter_queue: uniqueQueueId('set-keep-dlq') });
      // Here a dead-letter queue is set: max_deliveries alone is fine.
      for (const [label, body] of invalid(q).filter(([l]) => l !== 'max_deliveries without dead_letter_queue')) {
        expectValidationFailed(await putSettings(svc.http, q, body), label);
        expect(withoutDefaultControls((await getSettings(svc.http, q)).body), label).toEqual(before);
      }
    });

    it('max_deliveries needs a dead-letter queue also when a later PUT removes it while max_deliveries stays', async () => {
      const q = uniqueQueueId('set-dlq-rm');
      const dlq = uniqueQueueId('set-dlq-rm-dead');
      const before = await settle(svc.http, q, { max_deliveries: 3, dead_letter_queue: dlq });
      expectValidationFailed(await putSettings(svc.http, q, { dead_letter_queue: null }), 'dead_letter_queue null under max_deliveries 3');
      expect(withoutDefaultControls((await getSettings(svc.http, q)).body)).toEqual(before);
      // Another queue id is fine; so is removing both at once.
      const other = uniqueQueueId('set-dlq-rm-other');
      expect(await settle(svc.http, q, { dead_letter_queue: other })).toMatchObject({ max_deliveries: 3, dead_letter_queue: other });
      expect(await settle(svc.http, q, { max_deliveries: null, dead_letter_queue: null })).toMatchObject({ max_deliveries: null, dead_letter_queue: null });
      // max_deliveries alone is refused again, and accepted with a queue named in the same PUT.
      expectValidationFailed(await putSettings(svc.http, q, { max_deliveries: 2 }));
      expect(await settle(svc.http, q, { max_deliveries: 2, dead_letter_queue: dlq })).toMatchObject({ max_deliveries: 2, dead_letter_queue: dlq });
    });

    it('segment_size and buffer_segments change only while the queue holds no items, delayed items or lock (409 QUEUE_NOT_EMPTY; the same value is fine)', async () => {
      const q = uniqueQueueId('set-layout');
      await settle(svc.http, q, { segment_size: 4, buffer_segments: 1 });
      const refused = async (state: string): Promise<void> => {
        for (const body of [{ segment_size: 6 }, { buffer_segments: 3 }, { segment_size: 6, lock_mode: 'shared' }]) {
          expectError(await putSettings(svc.http, q, body), 409, 'QUEUE_NOT_EMPTY', `${state}: ${JSON.stringify(body)}`);
        }
        // Nothing of a refused PUT was applied, and unchanged values or other settings go through.
        expect(await settle(svc.http, q, { segment_size: 4, buffer_segments: 1 })).toMatchObject({
          segment_size: 4,
          buffer_segments: 1,
          lock_mode: 'exclusive',
        });
      };

      await pushAll(svc.http, q, entries(3, 'd0'));
      await refused('one item');
      expect(await settle(svc.http, q, { max_deliveries: 5, dead_letter_queue: uniqueQueueId('x') })).toMatchObject({ max_deliveries: 5 });
      expect(await settle(svc.http, q, { max_deliveries: null, dead_letter_queue: null })).toMatchObject({ max_deliveries: null });

      // Only a lock holds the item (exclusive).
      const lock = await lockItems<Item>(svc.http, q, { ttl: 60 });
      expect(ids(lock.items)).toEqual(['d0']);
      await refused('an exclusive lock');
      expect((await acknowledge(svc.http, q, lock.lockId)).status).toBe(200);

      // Only a delayed item.
      expect((await svc.http.post(`/queue/${q}/push`).send({ item: { id: 'late' }, delay_seconds: 600 })).status).toBe(200);
      expect((await svc.http.get(`/queue/${q}`)).body).toMatchObject({ count: 0, delayed: 1 });
      await refused('a delayed item');
      expect((await svc.http.delete(`/queue/${q}`)).body).toEqual({ success: true, items_deleted: 1 });

      // Only a shared lock.
      await settle(svc.http, q, { segment_size: 4, buffer_segments: 1, lock_mode: 'shared' });
      await pushAll(svc.http, q, entries(0, 'a0'));
      const sharedLock = await lockItems<Item>(svc.http, q, { ttl: 60 });
      for (const body of [{ segment_size: 6 }, { buffer_segments: 3 }])
        expectError(await putSettings(svc.http, q, body), 409, 'QUEUE_NOT_EMPTY', `a shared lock: ${JSON.stringify(body)}`);
      expect((await acknowledge(svc.http, q, sharedLock.lockId)).status).toBe(200);

      // Empty again: both change.
      expect(await settle(svc.http, q, { segment_size: 6, buffer_segments: 3 })).toMatchObject({ segment_size: 6, buffer_segments: 3, lock_mode: 'shared' });
    });

    it('lock_mode changes only while no lock lives (409 QUEUE_LOCKED with lock_expires_at); the same mode is fine; after acknowledge it changes', async () => {
      const q = uniqueQueueId('set-mode');
      await pushAll(svc.http, q, entries(0, 'a0', 'a1', 'a2'));
      const exclusive = await lockItems<Item>(svc.http, q, { depth: 1, ttl: 60 });
      const refused = await putSettings(svc.http, q, { lock_mode: 'shared' });
      expectError(refused, 409, 'QUEUE_LOCKED');
      expect(refused.body.lock_expires_at).toBe(exclusive.expiresAt);
      expect(await settle(svc.http, q, { lock_mode: 'exclusive' })).toMatchObject({ lock_mode: 'exclusive' });
      expect((await acknowledge(svc.http, q, exclusive.lockId)).status).toBe(200);
      expect(await shared(q)).toMatchObject({ lock_mode: 'shared' });

      const first = await lockItems<Item>(svc.http, q, { depth: 1, ttl: 30 });
      const second = await lockItems<Item>(svc.http, q, { depth: 1, ttl: 60 });
      const refusedShared = await putSettings(svc.http, q, { lock_mode: 'exclusive' });
      expectError(refusedShared, 409, 'QUEUE_LOCKED');
      expect(refusedShared.body.lock_expires_at).toBe(first.expiresAt);
      expect((await acknowledge(svc.http, q, first.lockId)).status).toBe(200);
      expectError(await putSettings(svc.http, q, { lock_mode: 'exclusive' }), 409, 'QUEUE_LOCKED', 'one shared lock still lives');
      expect(await settle(svc.http, q, { lock_mode: 'shared' })).toMatchObject({ lock_mode: 'shared' });
      expect((await release(svc.http, q, second.lockId)).body).toMatchObject({ items_returned: 1 });
      expect(await settle(svc.http, q, { lock_mode: 'exclusive' })).toMatchObject({ lock_mode: 'exclusive' });
      // Back in exclusive mode: a lock makes every pop 423 again.
      const again = await lockItems<Item>(svc.http, q, { depth: 1, ttl: 30 });
      expect(ids(again.items)).toEqual(['a2']);
      expectQueueLocked(await svc.http.post(`/queue/${q}/pop`));
    });

    it('simulated clock: a lock that has expired no longer holds the lock mode, and its items are back', async () => {
      const clock = timeTravel(svc.app);
      const q = uniqueQueueId('set-mode-exp');
      await pushAll(svc.http, q, entries(0, 'a0', 'a1'));
      const lock = await lockItems<Item>(svc.http, q, { depth: 2, ttl: 5 });
      expectError(await putSettings(svc.http, q, { lock_mode: 'shared' }), 409, 'QUEUE_LOCKED');
      clock.advance(5_001);
      expect(await shared(q)).toMatchObject({ lock_mode: 'shared' });
      // The old exclusive lock expired: its id answers 410 in shared mode too, before and after new locks.
      expectLockError(await acknowledge(svc.http, q, lock.lockId), 'LOCK_EXPIRED');
      const back = await popAck(svc.http, q, { depth: 5 });
      expect(ids(back.body.items)).toEqual(['a0', 'a1']);
      expect(back.body.delivery_counts).toEqual([2, 2]);
      for (const call of [acknowledge, release]) expectLockError(await call(svc.http, q, lock.lockId), 'LOCK_EXPIRED');
      expectLockError(await extendLock(svc.http, q, lock.lockId, 10), 'LOCK_EXPIRED');
      expectLockError(await acknowledge(svc.http, q, 'AAAAAAAAAAA'), 'LOCK_NOT_FOUND');
    });

    it('a new segment_size takes effect: seed 003 state keys hold segments of that size', async () => {
      const q = uniqueQueueId('set-seg');
      await settle(svc.http, q, { segment_size: 3, buffer_segments: 1 });
      await pushAll(svc.http, q, entries(0, ...range(7).map((i) => `a${i}`)));
      const meta = await svc.http.get(`/queue/${q}/state/metadata`);
      expect(meta.status).toBe(200);
      expect(meta.body.config).toEqual({ segment_size: 3, buffer_segments: 1 });
      const m = meta.body.queues.queue_0.metadata;
      expect(m).toMatchObject({ count: 7 });
      expect(m.tail_segment - m.head_segment).toBe(2);
      const segments = [];
      for (let s = m.head_segment; s <= m.tail_segment; s++) {
        const res = await svc.http.get(`/queue/${q}/state/queue_0_seg_${s}`);
        expect(res.status, `segment ${s}`).toBe(200);
        segments.push(ids(res.body as Item[]));
      }
      expect(segments).toEqual([['a0', 'a1', 'a2'], ['a3', 'a4', 'a5'], ['a6']]);
      // The queue's own layout stays when the env default differs: a queue pushed to without settings has 5.
      const other = uniqueQueueId('set-seg-default');
      await pushAll(svc.http, other, entries(0, ...range(7).map((i) => `a${i}`)));
      const otherMeta = (await svc.http.get(`/queue/${other}/state/metadata`)).body;
      expect(otherMeta.config).toEqual({ segment_size: 5, buffer_segments: 2 });
      expect((await svc.http.get(`/queue/${other}/state/queue_0_seg_${otherMeta.queues.queue_0.metadata.head_segment}`)).body).toHaveLength(5);
    });
  });

  describe('shared lock mode', () => {
    it('competing consumers each take the next items under a lock of their own; given-back items return in push order', async () => {
      const q = uniqueQueueId('shared');
      expect(await shared(q)).toMatchObject({ lock_mode: 'shared', max_deliveries: null, dead_letter_queue: null });
      await pushAll(svc.http, q, entries(0, 'a0', 'a1', 'a2', 'a3', 'a4', 'a5'));
      const first = await popAck(svc.http, q, { depth: 2, ttl: 30 });
      const second = await popAck(svc.http, q, { depth: 2, ttl: 30 });
      expect(first.status).toBe(200);
      expect(second.status).toBe(200);
      expect(ids(first.body.items)).toEqual(['a0', 'a1']);
      expect(ids(second.body.items)).toEqual(['a2', 'a3']);
      expect(first.body.delivery_counts).toEqual([1, 1]);
      const info = await svc.http.get(`/queue/${q}`);
      expect(info.body).toMatchObject({ count: 2, locks: { count: 2, item_count: 4 } });
      expect(info.body.lock).toBeUndefined();
      // The second lock ends first: its items go back behind the first lock's, ahead of a4.
      expect((await release(svc.http, q, second.body.lock_id)).body).toEqual({ success: true, items_returned: 2, items_delayed: 0 });
      expect((await release(svc.http, q, first.body.lock_id)).body).toEqual({ success: true, items_returned: 2, items_delayed: 0 });
      const again = await popAck(svc.http, q, { depth: 5, ttl: 30 });
      expect(ids(again.body.items)).toEqual(['a0', 'a1', 'a2', 'a3', 'a4']);
      expect(again.body.delivery_counts).toEqual([2, 2, 2, 2, 1]);
      expect((await acknowledge(svc.http, q, again.body.lock_id)).body).toMatchObject({ items_acknowledged: 5 });
      expect((await acknowledge(svc.http, q, again.body.lock_id)).status).toBe(404);
    });

    it('many concurrent pops with ack: never 423, each item under exactly one lock, then all acknowledged', async () => {
      const q = uniqueQueueId('shared-many');
      await shared(q);
      const names = range(40).map((i) => `a${i}`);
      await pushAll(svc.http, q, entries(0, ...names));
      const answers = await Promise.all(range(50).map(() => popAck(svc.http, q, { depth: 1, ttl: 60 })));
      expect(answers.map((a) => a.status).filter((s) => s !== 200)).toEqual([]);
      const withItems = answers.filter((a) => a.body.count > 0);
      expect(withItems).toHaveLength(40);
      expect(answers.filter((a) => a.body.count === 0).every((a) => a.body.locked === false)).toBe(true);
      expect(ids(withItems.flatMap((a) => a.body.items)).sort()).toEqual([...names].sort());
      expect(new Set(withItems.map((a) => a.body.lock_id)).size).toBe(40);
      expect(withItems.every((a) => a.body.delivery_counts[0] === 1)).toBe(true);
      expect(await locksOf(svc.http, q)).toMatchObject({ count: 40, item_count: 40 });
      expect(await listed(svc.http, q)).toEqual({ queue_id: q, count: 0, locked: true, paused: false });
      const acks = await Promise.all(withItems.map((a) => acknowledge(svc.http, q, a.body.lock_id)));
      expect(acks.map((a) => a.body.items_acknowledged)).toEqual(range(40).map(() => 1));
      expect(await locksOf(svc.http, q)).toEqual({ count: 0, item_count: 0, next_expires_at: null });
      expect(await listed(svc.http, q)).toEqual({ queue_id: q, count: 0, locked: false, paused: false });
    });

    it('plain pops take the next available items while locks live; a push while locked is popped after the held items come back', async () => {
      const q = uniqueQueueId('shared-plain');
      await shared(q);
      await pushAll(svc.http, q, [...entries(0, 'a0', 'a1', 'a2'), ...entries(1, 'b0', 'b1')]);
      const lock = await lockItems<Item>(svc.http, q, { depth: 2, ttl: 60 });
      const plain = await svc.http.post(`/queue/${q}/pop?depth=2`);
      expect(plain.status).toBe(200);
      expect(ids(plain.body.items)).toEqual(['a2', 'b0']);
      expect(plain.body.delivery_counts).toBeUndefined();
      await pushAll(svc.http, q, entries(0, 'a3'));
      expect((await release(svc.http, q, lock.lockId)).body.items_returned).toBe(2);
      expect(ids(await drain<Item>(svc.http, q))).toEqual(['a0', 'a1', 'a3', 'b1']);
    });

    it('simulated clock: locks ended in any order (release, expiry, acknowledge) give their items back to exactly their push-order place, over several priorities', async () => {
      const clock = timeTravel(svc.app);
      const q = uniqueQueueId('shared-order');
      await shared(q);
      await pushAll(svc.http, q, [...entries(0, 'a0', 'a1', 'a2', 'a3', 'a4', 'a5'), ...entries(1, 'b0', 'b1', 'b2', 'b3'), ...entries(2, 'c0')]);
      const l1 = await lockItems<Item>(svc.http, q, { depth: 2, ttl: 10 });
      const l2 = await lockItems<Item>(svc.http, q, { depth: 3, ttl: 20 });
      const l3 = await lockItems<Item>(svc.http, q, { depth: 3, ttl: 10 });
      const l4 = await lockItems<Item>(svc.http, q, { depth: 1, ttl: 10 });
      const l5 = await lockItems<Item>(svc.http, q, { depth: 2, ttl: 40 });
      expect([l1, l2, l3, l4, l5].map((l) => ids(l.items))).toEqual([['a0', 'a1'], ['a2', 'a3', 'a4'], ['a5', 'b0', 'b1'], ['b2'], ['b3', 'c0']]);
      await pushAll(svc.http, q, [...entries(2, 'c1'), ...entries(0, 'a6'), ...entries(1, 'b4')]);
      expect(await locksOf(svc.http, q)).toEqual({ count: 5, item_count: 11, next_expires_at: l1.expiresAt });

      expect((await release(svc.http, q, l3.lockId)).body).toEqual({ success: true, items_returned: 3, items_delayed: 0 });
      expect((await acknowledge(svc.http, q, l4.lockId)).body).toMatchObject({ items_acknowledged: 1 });
      clock.advance(10_001);
      // l1 expires with no request: the sweep gives it back.
      await sweepOnce(svc);
      expect(await listed(svc.http, q)).toEqual({ queue_id: q, count: 8, locked: true, paused: false });
      expectLockError(await extendLock(svc.http, q, l1.lockId, 30), 'LOCK_EXPIRED');
      expect(await locksOf(svc.http, q)).toEqual({ count: 2, item_count: 5, next_expires_at: l2.expiresAt });
      // What is available now: a0 a1 (expired) a5 (released) a6 (new); b0 b1 (released) b4; c1. a2-a4 still held.
      const peek = await lockItems<Item>(svc.http, q, { depth: 4, ttl: 5 });
      expect(ids(peek.items)).toEqual(['a0', 'a1', 'a5', 'a6']);
      clock.advance(20_000);
      // l2 (a2-a4) and peek (a0 a1 a5 a6) expire in the same turn; l5 (b3 c0) lives.
      const next = await popAck(svc.http, q, { depth: 8, ttl: 60 });
      expect(ids(next.body.items)).toEqual(['a0', 'a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'b0']);
      expect(next.body.delivery_counts).toEqual([3, 3, 2, 2, 2, 3, 2, 2]);
      expect((await release(svc.http, q, next.body.lock_id)).body.items_returned).toBe(8);
      expect((await release(svc.http, q, l5.lockId)).body.items_returned).toBe(2);
      expect(ids(await drain<Item>(svc.http, q))).toEqual(['a0', 'a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'b0', 'b1', 'b3', 'b4', 'c0', 'c1']);
    });

    it('each lock is acknowledged, extended, released or expires on its own; ended ids answer 410 (expired) or 404, never INVALID_LOCK_ID', async () => {
      const clock = timeTravel(svc.app);
      const q = uniqueQueueId('shared-own');
      await shared(q);
      await pushAll(svc.http, q, entries(0, 'a0', 'a1', 'a2', 'a3', 'a4'));
      const [ack, ext, rel, exp] = [
        await lockItems<Item>(svc.http, q, { ttl: 10 }),
        await lockItems<Item>(svc.http, q, { ttl: 10 }),
        await lockItems<Item>(svc.http, q, { ttl: 10 }),
        await lockItems<Item>(svc.http, q, { ttl: 10 }),
      ];
      const extended = await extendLock(svc.http, q, ext.lockId, 100);
      expect(extended.status).toBe(200);
      expect(extended.body).toMatchObject({ success: true, lock_id: ext.lockId });
      expect(extended.body.lock_expires_at).toBeGreaterThan(ext.expiresAt + 80);
      expect((await acknowledge(svc.http, q, ack.lockId)).body).toMatchObject({ success: true, items_acknowledged: 1 });
      expect((await release(svc.http, q, rel.lockId)).body).toEqual({ success: true, items_returned: 1, items_delayed: 0 });
      clock.advance(10_001);
      // `exp` expired, `ext` lives on.
      expect(await locksOf(svc.http, q)).toEqual({ count: 1, item_count: 1, next_expires_at: extended.body.lock_expires_at });
      for (const endpoint of LOCK_ENDPOINTS) {
        expectLockError(
          await lockCall(svc.http, endpoint, q, { lock_id: exp.lockId, ...(endpoint === 'extend-lock' ? { ttl_seconds: 30 } : {}) }),
          'LOCK_EXPIRED',
          `${endpoint} expired`,
        );
        for (const gone of [ack.lockId, rel.lockId, 'AAAAAAAAAAA', 'x'])
          expectLockError(await lockCall(svc.http, endpoint, q, { lock_id: gone }), 'LOCK_NOT_FOUND', `${endpoint} ${gone}`);
        expectLockError(await lockCall(svc.http, endpoint, q, {}), 'LOCK_ID_REQUIRED', `${endpoint} no id`);
      }
      // An unknown lock id on a queue that does not exist is 404 as well.
      expectLockError(await acknowledge(svc.http, uniqueQueueId('nothing'), 'AAAAAAAAAAA'), 'LOCK_NOT_FOUND');
      const rest = await popAck(svc.http, q, { depth: 5 });
      expect(ids(rest.body.items)).toEqual(['a2', 'a3', 'a4']);
      expect(rest.body.delivery_counts).toEqual([2, 2, 1]);
      expect((await acknowledge(svc.http, q, ext.lockId)).body).toMatchObject({ items_acknowledged: 1 });
    });

    it('simulated clock: extending the earliest lock moves next_expires_at to the next one; extend-lock works per lock', async () => {
      const clock = timeTravel(svc.app);
      const q = uniqueQueueId('shared-next');
      await shared(q);
      await pushAll(svc.http, q, entries(0, 'a0', 'a1', 'a2'));
      const l10 = await lockItems<Item>(svc.http, q, { ttl: 10 });
      const l20 = await lockItems<Item>(svc.http, q, { ttl: 20 });
      const l30 = await lockItems<Item>(svc.http, q, { ttl: 30 });
      expect(await locksOf(svc.http, q)).toEqual({ count: 3, item_count: 3, next_expires_at: l10.expiresAt });
      const e = await extendLock(svc.http, q, l10.lockId, 60);
      expect(e.status).toBe(200);
      expect(await locksOf(svc.http, q)).toEqual({ count: 3, item_count: 3, next_expires_at: l20.expiresAt });
      clock.advance(20_001);
      // l20 expired; l10 (extended) and l30 live.
      expect(await locksOf(svc.http, q)).toEqual({ count: 2, item_count: 2, next_expires_at: l30.expiresAt });
      expect((await acknowledge(svc.http, q, l10.lockId)).body).toMatchObject({ items_acknowledged: 1 });
      expect(await locksOf(svc.http, q)).toEqual({ count: 1, item_count: 1, next_expires_at: l30.expiresAt });
      expectLockError(await acknowledge(svc.http, q, l20.lockId), 'LOCK_EXPIRED');
      const back = await svc.http.post(`/queue/${q}/pop?depth=5`);
      expect(ids(back.body.items)).toEqual(['a1']);
    });

    it('simulated clock: extend-lock with a ttl shorter than what is left makes the lock expire sooner, also for the sweep', async () => {
      const clock = timeTravel(svc.app);
      const q = uniqueQueueId('shared-shorten');
      await shared(q);
      await pushAll(svc.http, q, entries(0, 'a0', 'a1'));
      const long = await lockItems<Item>(svc.http, q, { ttl: 60 });
      const other = await lockItems<Item>(svc.http, q, { ttl: 120 });
      const shortened = await extendLock(svc.http, q, long.lockId, 5);
      expect(shortened.body.lock_expires_at).toBeLessThan(long.expiresAt - 50);
      // (Inspecting the queue here would read the exact earliest expiry and hide a stale bound.)
      clock.advance(5_100);
      // No request on the queue: the sweep finds the lock due and gives its item back.
      expect(await sweepOnce(svc)).toBeGreaterThanOrEqual(1);
      expect(await listed(svc.http, q)).toEqual({ queue_id: q, count: 1, locked: true, paused: false });
      expectLockError(await acknowledge(svc.http, q, long.lockId), 'LOCK_EXPIRED');
      expect(await locksOf(svc.http, q)).toEqual({ count: 1, item_count: 1, next_expires_at: other.expiresAt });
      expect(ids((await svc.http.post(`/queue/${q}/pop`)).body.items)).toEqual(['a0']);
    });

    it('DELETE counts the items held by shared locks; their ids are gone afterwards', async () => {
      const q = uniqueQueueId('shared-del');
      await shared(q);
      await pushAll(svc.http, q, [...entries(0, 'a0', 'a1', 'a2'), ...entries(4, 'e0')]);
      const l1 = await lockItems<Item>(svc.http, q, { depth: 2, ttl: 60 });
      await lockItems<Item>(svc.http, q, { depth: 1, ttl: 60 });
      expect((await svc.http.post(`/queue/${q}/push`).send({ item: { id: 'late' }, delay_seconds: 600 })).status).toBe(200);
      expect((await svc.http.delete(`/queue/${q}`)).body).toEqual({ success: true, items_deleted: 5 });
      expectLockError(await acknowledge(svc.http, q, l1.lockId), 'LOCK_NOT_FOUND');
      expectError(await getSettings(svc.http, q), 404, 'QUEUE_NOT_FOUND');
      expect(await listed(svc.http, q)).toBeUndefined();
      // A queue of the same id starts afresh (exclusive, empty).
      await pushAll(svc.http, q, entries(0, 'n0'));
      expect((await svc.http.get(`/queue/${q}`)).body).toMatchObject({ count: 1, lock: null, config: { lock_mode: 'exclusive' } });
    });

    it('simulated clock, seeded: random pops, acknowledgements, extensions, releases and expiries agree with a model where every priority stays in push order', async () => {
      // A fixed seed unless TEST_SEED is set (the run depends on the seed only).
      const seed = process.env.TEST_SEED ? testSeed() : 12;
      const rnd = seededRandom(seed);
      const where = `(seed ${seed})`;
      // A clock that stands still between the test's moves: the run depends on the seed only.
      const clock = frozenClock(svc.app);
      const q = uniqueQueueId('shared-model');
      const dlq = uniqueQueueId('shared-model-dead');
      const maxDeliveries = 3;
      await shared(q, { max_deliveries: maxDeliveries, dead_letter_queue: dlq });

      type MItem = { id: string; priority: number; seq: number; deliveries: number };
      const available: MItem[] = [];
      const dead: MItem[] = [];
      /** The dead-lettering (release or expiry turn) that sent each item to the DLQ, in order. */
      const deadEvent = new Map<string, number>();
      let events = 0;
      const locks = new Map<string, { items: MItem[]; expiresAt: number }>();
      let seq = 0;
      const order = (a: MItem, b: MItem): number => a.priority - b.priority || a.seq - b.seq;
      const giveBack = (items: MItem[]): { returned: number; dead: number } => {
        let returned = 0;
        events++;
        for (const item of items) {
          if (item.deliveries >= maxDeliveries) {
            dead.push(item);
            deadEvent.set(item.id, events);
          } else {
            available.push(item);
            returned++;
          }
        }
        available.sort(order);
        return { returned, dead: items.length - returned };
      };
      /** Expires (in the model) what is due now; no lock's expiry is ever exactly now (the clock stands still between requests). */
      const settleClock = (): void => {
        while ([...locks.values()].some((l) => l.expiresAt === clock.nowSeconds())) clock.advance(1);
        // Locks due together expire in one turn: one dead-lettering.
        const due = [...locks].filter(([, lock]) => lock.expiresAt <= clock.nowSeconds());
        if (due.length > 0) giveBack(due.flatMap(([, lock]) => lock.items));
        for (const [id] of due) locks.delete(id);
      };
      const pushSome = async (): Promise<void> => {
        const batch = range(rnd.int(1, 4)).map(() => {
          const priority = rnd.int(0, 2);
          const item: MItem = { id: `p${priority}-${seq}`, priority, seq: seq++, deliveries: 0 };
          return item;
        });
        await pushAll(
          svc.http,
          q,
          batch.map((i) => ({ item: { id: i.id }, priority: i.priority })),
        );
        available.push(...batch);
        available.sort(order);
      };

      await pushSome();
      await pushSome();
      for (let step = 0; step < 160; step++) {
        settleClock();
        const live = [...locks.keys()];
        const pickLock = (): string => live[rnd.int(0, live.length - 1)];
        const action = rnd.int(0, 9);
        const label = `${where} step ${step} action ${action}`;
        if (action <= 1) {
          await pushSome();
        } else if (action <= 4) {
          const depth = rnd.int(1, 3);
          const res = await popAck(svc.http, q, { depth, ttl: rnd.int(2, 8) });
          const taken = available.splice(0, depth);
          taken.forEach((i) => i.deliveries++);
          expect(res.status, label).toBe(200);
          expect(ids(res.body.items), label).toEqual(taken.map((i) => i.id));
          if (taken.length > 0) {
            expect(res.body.delivery_counts, label).toEqual(taken.map((i) => i.deliveries));
            locks.set(res.body.lock_id, { items: taken, expiresAt: res.body.lock_expires_at });
          } else expect(res.body.locked, label).toBe(false);
        } else if (action === 5) {
          const res = await svc.http.post(`/queue/${q}/pop?depth=1`);
          expect(ids(res.body.items), label).toEqual(available.splice(0, 1).map((i) => i.id));
        } else if (action === 6 && live.length > 0) {
          const id = pickLock();
          const res = await acknowledge(svc.http, q, id);
          expect(res.body, label).toMatchObject({ success: true, items_acknowledged: locks.get(id)!.items.length });
          locks.delete(id);
        } else if (action === 7 && live.length > 0) {
          const id = pickLock();
          const res = await release(svc.http, q, id);
          const outcome = giveBack(locks.get(id)!.items);
          expect(res.body, label).toEqual({
            success: true,
            items_returned: outcome.returned,
            ...(outcome.dead > 0 ? { items_dead_lettered: outcome.dead } : {}),
            items_delayed: 0,
          });
          locks.delete(id);
        } else if (action === 8 && live.length > 0) {
          const id = pickLock();
          const res = await extendLock(svc.http, q, id, rnd.int(2, 8));
          expect(res.status, label).toBe(200);
          locks.get(id)!.expiresAt = res.body.lock_expires_at;
        } else {
          clock.advance(rnd.int(500, 6_000));
          settleClock();
          if (rnd.next() < 0.5) await sweepOnce(svc);
        }
        if (step % 10 === 0) {
          const info = await svc.http.get(`/queue/${q}`);
          const held = [...locks.values()];
          expect(info.body.count, label).toBe(available.length);
          expect(info.body.locks, label).toEqual({
            count: held.length,
            item_count: held.reduce((n, l) => n + l.items.length, 0),
            next_expires_at: held.length === 0 ? null : Math.min(...held.map((l) => l.expiresAt)),
          });
        }
      }
      for (const id of locks.keys()) expect((await release(svc.http, q, id)).status, where).toBe(200);
      giveBack([...locks.values()].flatMap((l) => l.items));
      expect(ids(await drain<Item>(svc.http, q)), where).toEqual(available.map((i) => i.id));
      const deadLetters = await drain<Item>(svc.http, dlq);
      expect(ids(deadLetters).sort(), where).toEqual(dead.map((i) => i.id).sort());
      // Within each priority of the dead-letter queue, items of an earlier dead-lettering come first.
      for (const priority of [0, 1, 2]) {
        const eventsInOrder = ids(deadLetters)
          .filter((id) => id.startsWith(`p${priority}-`))
          .map((id) => deadEvent.get(id)!);
        expect(eventsInOrder, `${where} priority ${priority}`).toEqual([...eventsInOrder].sort((a, b) => a - b));
      }
    });
  });

  describe('deliveries and dead letters', () => {
    it('exclusive mode: ack pops count deliveries across release and expiry', async () => {
      const clock = timeTravel(svc.app);
      const q = uniqueQueueId('dc-excl');
      await pushAll(svc.http, q, entries(0, 'a0', 'a1', 'a2'));
      const first = await popAck(svc.http, q, { depth: 2, ttl: 10 });
      expect(first.body.delivery_counts).toEqual([1, 1]);
      expect((await release(svc.http, q, first.body.lock_id)).body).toEqual({ success: true, items_returned: 2, items_delayed: 0 });
      const second = await popAck(svc.http, q, { depth: 1, ttl: 10 });
      expect(second.body.delivery_counts).toEqual([2]);
      clock.advance(10_001);
      const third = await popAck(svc.http, q, { depth: 3, ttl: 10 });
      expect(ids(third.body.items)).toEqual(['a0', 'a1', 'a2']);
      expect(third.body.delivery_counts).toEqual([3, 2, 1]);
      // Plain pops carry no counts.
      expect((await release(svc.http, q, third.body.lock_id)).status).toBe(200);
      const plain = await svc.http.post(`/queue/${q}/pop?depth=3`);
      expect(plain.body).toEqual({ items: [{ id: 'a0' }, { id: 'a1' }, { id: 'a2' }], count: 3 });
    });

    const modes = ['exclusive', 'shared'] as const;
    const endings = ['release', 'expiry'] as const;
    for (const mode of modes) {
      for (const ending of endings) {
        it(`${mode} mode, ${ending}: an item goes to the dead-letter queue exactly when it reaches max_deliveries, keeping its priority, after what the DLQ holds`, async () => {
          const clock = timeTravel(svc.app);
          const q = uniqueQueueId(`dl-${mode}-${ending}`);
          const dlq = uniqueQueueId(`dl-${mode}-${ending}-dead`);
          await settle(svc.http, q, { lock_mode: mode, max_deliveries: 3, dead_letter_queue: dlq });
          await pushAll(svc.http, dlq, [...entries(2, 'old-c'), ...entries(5, 'old-f')]);
          await pushAll(svc.http, q, [...entries(2, 'c0'), ...entries(5, 'f0')]);
          const end = async (lockId: string, expectBody: Record<string, unknown>): Promise<void> => {
            if (ending === 'release') expect((await release(svc.http, q, lockId)).body).toEqual({ success: true, ...expectBody, items_delayed: 0 });
            else {
              clock.advance(10_001);
              // The sweep gives the expired lock's items back (or to the dead-letter queue) with no request on the queue.
              await sweepOnce(svc);
              expectLockError(await acknowledge(svc.http, q, lockId), 'LOCK_EXPIRED');
            }
          };
          for (const round of [1, 2]) {
            const lock = await popAck(svc.http, q, { depth: 1, ttl: 10 });
            expect(ids(lock.body.items)).toEqual(['c0']);
            expect(lock.body.delivery_counts).toEqual([round]);
            await end(lock.body.lock_id, { items_returned: 1 });
            expect((await svc.http.get(`/queue/${q}`)).body.count, `round ${round}: c0 is back`).toBe(2);
          }
          // Third delivery of c0, first of f0: only c0 reaches the limit.
          const last = await popAck(svc.http, q, { depth: 2, ttl: 10 });
          expect(ids(last.body.items)).toEqual(['c0', 'f0']);
          expect(last.body.delivery_counts).toEqual([3, 1]);
          await end(last.body.lock_id, { items_returned: 1, items_dead_lettered: 1 });
          expect((await svc.http.get(`/queue/${q}`)).body).toMatchObject({ count: 1, priorities: { '5': { count: 1 } } });
          expect((await svc.http.get(`/queue/${q}`)).body.priorities['2']).toBeUndefined();
          // The DLQ is an ordinary queue: inspect it, pop it.
          const info = await svc.http.get(`/queue/${dlq}`);
          expect(info.body).toMatchObject({
            count: 3,
            priorities: { '2': { count: 2 }, '5': { count: 1 } },
            config: { lock_mode: 'exclusive', max_deliveries: null },
          });
          const deadLetters = await svc.http.post(`/queue/${dlq}/pop?depth=10`);
          expect(ids(deadLetters.body.items)).toEqual(['old-c', 'c0', 'old-f']);
          const remaining = await popAck(svc.http, q, { depth: 5 });
          expect(ids(remaining.body.items)).toEqual(['f0']);
          expect(remaining.body.delivery_counts).toEqual([2]);
        });
      }
    }

    it('max_deliveries 1: the first release dead-letters; several items of several priorities go to the tail of their priorities in the DLQ in order', async () => {
      const q = uniqueQueueId('dl-one');
      const dlq = uniqueQueueId('dl-one-dead');
      await shared(q, { max_deliveries: 1, dead_letter_queue: dlq });
      await pushAll(svc.http, dlq, [...entries(0, 'old-a'), ...entries(1, 'old-b')]);
      await pushAll(svc.http, q, [...entries(0, 'a0', 'a1'), ...entries(1, 'b0', 'b1')]);
      const l1 = await lockItems<Item>(svc.http, q, { depth: 2, ttl: 60 });
      const l2 = await lockItems<Item>(svc.http, q, { depth: 2, ttl: 60 });
      expect((await release(svc.http, q, l2.lockId)).body).toEqual({ success: true, items_returned: 0, items_dead_lettered: 2, items_delayed: 0 });
      expect((await release(svc.http, q, l1.lockId)).body).toEqual({ success: true, items_returned: 0, items_dead_lettered: 2, items_delayed: 0 });
      expect(await listed(svc.http, q)).toEqual({ queue_id: q, count: 0, locked: false, paused: false });
      expect(ids(await drain<Item>(svc.http, dlq))).toEqual(['old-a', 'a0', 'a1', 'old-b', 'b0', 'b1']);
      // The DLQ can be deleted like any queue.
      await pushAll(svc.http, dlq, entries(0, 'x'));
      expect((await svc.http.delete(`/queue/${dlq}`)).body).toEqual({ success: true, items_deleted: 1 });
    });

    it('a long poll waiting on the dead-letter queue gets the dead-lettered item (no sweep runs here)', async () => {
      const q = uniqueQueueId('dl-poll');
      const dlq = uniqueQueueId('dl-poll-dead');
      await shared(q, { max_deliveries: 1, dead_letter_queue: dlq });
      await pushAll(svc.http, q, entries(7, 'g0'));
      const lock = await lockItems<Item>(svc.http, q, { ttl: 60 });
      const started = Date.now();
      const poll = svc.http.post(`/queue/${dlq}/pop?wait_seconds=15`).then((r) => r);
      // The poll waits before the release (an empty DLQ answers nothing until then).
      await pollsWaitingOn(svc, dlq);
      expect((await release(svc.http, q, lock.lockId)).body).toMatchObject({ items_dead_lettered: 1 });
      const res = await poll;
      expect(res.status).toBe(200);
      expect(res.body.items).toEqual([{ id: 'g0' }]);
      expect(Date.now() - started, 'answered on the dead-lettering, not at the end of the wait').toBeLessThan(10_000);
    });

    it('a dead-letter queue in shared mode with its own limit passes items on again', async () => {
      const q = uniqueQueueId('dl-chain');
      const dlq = uniqueQueueId('dl-chain-1');
      const last = uniqueQueueId('dl-chain-2');
      await shared(q, { max_deliveries: 1, dead_letter_queue: dlq });
      await shared(dlq, { max_deliveries: 1, dead_letter_queue: last });
      await pushAll(svc.http, q, entries(1, 'b0'));
      expect((await release(svc.http, q, (await lockItems(svc.http, q)).lockId)).body).toMatchObject({ items_dead_lettered: 1 });
      const inDlq = await popAck(svc.http, dlq);
      expect(ids(inDlq.body.items)).toEqual(['b0']);
      expect(inDlq.body.delivery_counts).toEqual([1]);
      expect((await release(svc.http, dlq, inDlq.body.lock_id)).body).toMatchObject({ items_dead_lettered: 1 });
      expect((await svc.http.post(`/queue/${last}/pop`)).body.items).toEqual([{ id: 'b0' }]);
    });
  });
});

describe(`shared locks: limits, sweeps, restarts and metrics (${databaseKind})`, () => {
  let svc: TestService;
  let dataDir: string;
  beforeAll(async () => {
    dataDir = makeDataDir();
    svc = await startService({ dataDir, env: { MAX_LOCKS_PER_QUEUE: '3', LOCK_SWEEP_INTERVAL_MS: '100' } });
  });
  afterAll(async () => {
    if (svc) await closeWithin(() => svc.close());
    removeDataDir(dataDir);
  });

  it('MAX_LOCKS_PER_QUEUE live locks: the next pop with ack is 429 QUEUE_BUSY with Retry-After; plain pops go on; one lock ended makes room', async () => {
    const q = uniqueQueueId('max-locks');
    await settle(svc.http, q, { lock_mode: 'shared' });
    await pushAll(svc.http, q, entries(0, 'a0', 'a1', 'a2', 'a3', 'a4', 'a5'));
    const locks = [
      await lockItems<Item>(svc.http, q, { ttl: 60 }),
      await lockItems<Item>(svc.http, q, { ttl: 60 }),
      await lockItems<Item>(svc.http, q, { ttl: 60 }),
    ];
    const busy = await popAck(svc.http, q, { ttl: 60 });
    expectError(busy, 429, 'QUEUE_BUSY');
    expect(Number(busy.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(await locksOf(svc.http, q)).toMatchObject({ count: 3, item_count: 3 });
    expect(ids((await svc.http.post(`/queue/${q}/pop`)).body.items)).toEqual(['a3']);
    expect((await acknowledge(svc.http, q, locks[1].lockId)).status).toBe(200);
    const fifth = await lockItems<Item>(svc.http, q, { ttl: 60 });
    expect(ids(fifth.items)).toEqual(['a4']);
    expectError(await popAck(svc.http, q, { ttl: 60 }), 429, 'QUEUE_BUSY');
    // Another queue has locks of its own to count.
    const other = uniqueQueueId('max-locks-other');
    await settle(svc.http, other, { lock_mode: 'shared' });
    await pushAll(svc.http, other, entries(0, 'o0'));
    const otherLock = await lockItems<Item>(svc.http, other);
    expect(otherLock.items).toEqual([{ id: 'o0' }]);
    for (const lock of [locks[0], locks[2], fifth]) expect((await acknowledge(svc.http, q, lock.lockId)).status).toBe(200);
    expect((await acknowledge(svc.http, other, otherLock.lockId)).status).toBe(200);
  });

  it('the background sweep gives back expired shared locks with no traffic on the queue (real time)', async () => {
    const q = uniqueQueueId('sweep');
    await settle(svc.http, q, { lock_mode: 'shared' });
    await pushAll(svc.http, q, [...entries(0, 'a0', 'a1'), ...entries(1, 'b0')]);
    const short1 = await lockItems<Item>(svc.http, q, { depth: 1, ttl: 1 });
    const short2 = await lockItems<Item>(svc.http, q, { depth: 1, ttl: 1 });
    const long = await lockItems<Item>(svc.http, q, { depth: 1, ttl: 60 });
    expect(await listed(svc.http, q)).toEqual({ queue_id: q, count: 0, locked: true, paused: false });
    // A listing runs no turn on the queue: only the sweep can bring the items back.
    let row = await listed(svc.http, q);
    const back = async (): Promise<boolean> => {
      row = await listed(svc.http, q);
      return row?.count === 2;
    };
    const deadline = Date.now() + 10_000;
    while (!(await back()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(row).toEqual({ queue_id: q, count: 2, locked: true, paused: false });
    expect(Date.now()).toBeGreaterThanOrEqual(short2.expiresAt * 1000);
    expectLockError(await release(svc.http, q, short1.lockId), 'LOCK_EXPIRED');
    expect((await acknowledge(svc.http, q, long.lockId)).status).toBe(200);
    expect(await listed(svc.http, q)).toEqual({ queue_id: q, count: 2, locked: false, paused: false });
    expect(ids(await drain<Item>(svc.http, q))).toEqual(['a0', 'a1']);
  });

  it('settings, locks and delivery counts survive a restart of the service', async () => {
    const q = uniqueQueueId('restart');
    const qx = uniqueQueueId('restart-excl');
    const dlq = uniqueQueueId('restart-dead');
    const settings = await settle(svc.http, q, { lock_mode: 'shared', segment_size: 3, buffer_segments: 4, max_deliveries: 3, dead_letter_queue: dlq });
    await pushAll(svc.http, q, entries(0, 'a0', 'a1', 'a2', 'a3'));
    await pushAll(svc.http, qx, entries(0, 'x0'));
    const first = await lockItems<Item>(svc.http, q, { depth: 2, ttl: 60 });
    expect((await release(svc.http, q, first.lockId)).status).toBe(200);
    const held = await lockItems<Item>(svc.http, q, { depth: 1, ttl: 120 });
    const second = await lockItems<Item>(svc.http, q, { depth: 1, ttl: 120 });
    expect(ids([...held.items, ...second.items])).toEqual(['a0', 'a1']);
    expect((await release(svc.http, qx, (await lockItems(svc.http, qx)).lockId)).status).toBe(200);

    await closeWithin(() => svc.close());
    svc = await startService({ dataDir, env: { MAX_LOCKS_PER_QUEUE: '3', LOCK_SWEEP_INTERVAL_MS: '100' } });

    expect(withoutDefaultControls((await getSettings(svc.http, q)).body)).toEqual(settings);
    expect((await svc.http.get(`/queue/${q}`)).body).toMatchObject({
      count: 2,
      config: settings,
      locks: { count: 2, item_count: 2, next_expires_at: held.expiresAt },
    });
    expect(await listed(svc.http, q)).toEqual({ queue_id: q, count: 2, locked: true, paused: false });
    expect((await release(svc.http, q, second.lockId)).body).toEqual({ success: true, items_returned: 1, items_delayed: 0 });
    const next = await popAck(svc.http, q, { depth: 3 });
    expect(ids(next.body.items)).toEqual(['a1', 'a2', 'a3']);
    expect(next.body.delivery_counts).toEqual([3, 1, 1]);
    // a1's third delivery ends: it goes to the dead-letter queue.
    expect((await release(svc.http, q, next.body.lock_id)).body).toEqual({ success: true, items_returned: 2, items_dead_lettered: 1, items_delayed: 0 });
    expect((await acknowledge(svc.http, q, held.lockId)).body).toMatchObject({ items_acknowledged: 1 });
    expect((await svc.http.post(`/queue/${dlq}/pop`)).body.items).toEqual([{ id: 'a1' }]);
    // The exclusive queue's item was given back to its segment before the restart, and read back from it.
    const xl = await popAck(svc.http, qx);
    expect(xl.body.delivery_counts).toEqual([2]);
    expect((await acknowledge(svc.http, qx, xl.body.lock_id)).status).toBe(200);
  });

  it('/metrics: pushpop_items_dead_lettered_total counts dead letters; pushpop_live_locks counts exclusive and shared locks', async () => {
    const text = async (): Promise<string> => {
      const res = await svc.http.get('/metrics');
      expect(res.status).toBe(200);
      return res.text;
    };
    // Live locks: 2 shared + 1 exclusive (the earlier tests of this service left none). The gauge
    // is read from the database at the first scrape, then at most every 10 s: this is this process's first.
    const q = uniqueQueueId('metrics');
    const dlq = uniqueQueueId('metrics-dead');
    await settle(svc.http, q, { lock_mode: 'shared', max_deliveries: 1, dead_letter_queue: dlq });
    await pushAll(svc.http, q, entries(0, 'a0', 'a1', 'a2', 'a3'));
    const doomed = await lockItems<Item>(svc.http, q, { depth: 2, ttl: 60 });
    const s1 = await lockItems<Item>(svc.http, q, { depth: 1, ttl: 60 });
    const x = uniqueQueueId('metrics-excl');
    await pushAll(svc.http, x, entries(0, 'x0'));
    const xl = await lockItems<Item>(svc.http, x, { ttl: 60 });
    const first = await text();
    expect(sample(first, 'pushpop_live_locks')).toBe(3);

    const deadBefore = sample(first, 'pushpop_items_dead_lettered_total');
    expect((await release(svc.http, q, doomed.lockId)).body).toMatchObject({ items_dead_lettered: 2 });
    expect(sample(await text(), 'pushpop_items_dead_lettered_total') - deadBefore).toBe(2);
    expect(ids(await drain<Item>(svc.http, dlq))).toEqual(['a0', 'a1']);

    for (const [queue, lock] of [
      [q, s1],
      [x, xl],
    ] as const)
      expect((await acknowledge(svc.http, queue, lock.lockId)).status).toBe(200);
    let gauge = -1;
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline) {
      gauge = sample(await text(), 'pushpop_live_locks');
      if (gauge === 0) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(gauge).toBe(0);
  });
});
