import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { Clock } from '../../src/common/clock.js';
import { UnitOfWork } from '../../src/database/unit-of-work.js';
import { DedupSweeper } from '../../src/dedup/dedup-sweeper.js';
import { ActorRegistry } from '../../src/queue/runtime/actor-registry.js';
import { answer, drain, range, sleep } from '../support/queue-helpers.js';
import { databaseKind, removeDataDir, startService, TestService, uniqueQueueId } from '../support/service.js';

/**
 * Deduplication over HTTP (CONTRACT.md, "Deduplication"): `dedup_id` on push and batch entries;
 * a push whose id was accepted on the same queue within DEDUP_WINDOW_SECONDS (2 s here) answers
 * `duplicate: true` and enqueues nothing; a batch answers `count` and `duplicates`, repeats
 * inside it included. Across restarts and processes: test/integration/dedup-processes.test.ts.
 */

type Item = { id: string };
const ids = (items: Item[]): string[] => items.map((i) => i.id);
const WINDOW_MS = 2000;
/** With the clock mocked, real time still passes between requests: a margin that keeps "inside the window" honest. */
const MARGIN_MS = 500;

function timeTravel(svc: TestService): { advance(ms: number): void } {
  let offset = 0;
  vi.spyOn(svc.app.get(Clock), 'now').mockImplementation(() => Date.now() + offset);
  return { advance: (ms) => void (offset += ms) };
}

describe(`deduplication (${databaseKind})`, () => {
  let svc: TestService;

  beforeAll(async () => {
    svc = await startService({ env: { DEDUP_WINDOW_SECONDS: String(WINDOW_MS / 1000) } });
  });
  afterEach(() => vi.restoreAllMocks());
  afterAll(async () => {
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  const push = (q: string, body: Record<string, unknown>) => answer(svc.http.post(`/queue/${q}/push`).send(body));
  const batch = (q: string, items: Record<string, unknown>[]) => answer(svc.http.post(`/queue/${q}/push/batch`).send({ items }));
  const count = async (q: string): Promise<number> => (await answer(svc.http.get(`/queue/${q}`))).body.count as number;
  const accepted = { status: 200, body: { success: true, duplicate: false } };
  const duplicate = (q: string) => ({
    status: 200,
    body: { success: true, duplicate: true, message: `Duplicate of an item accepted on queue ${q} within the deduplication window; nothing pushed` },
  });

  it('dedup_id: 1-128 characters of A-Z a-z 0-9 . _ : @ -; anything else is 400 VALIDATION_FAILED', async () => {
    const q = uniqueQueueId('dedup-valid');
    for (const bad of ['', 'a'.repeat(129), 'a b', 'a/b', 'ü', 'a\u0000', 5, null, ['a']]) {
      const res = await push(q, { item: { id: 'x' }, dedup_id: bad });
      expect({ status: res.status, code: res.body.error_code }, `dedup_id ${JSON.stringify(bad)}`).toEqual({ status: 400, code: 'VALIDATION_FAILED' });
      const inBatch = await batch(q, [{ item: { id: 'x' }, dedup_id: bad }]);
      expect({ status: inBatch.status, code: inBatch.body.error_code }, `batch dedup_id ${JSON.stringify(bad)}`).toEqual({
        status: 400,
        code: 'VALIDATION_FAILED',
      });
    }
    expect(await push(q, { item: { id: 'long' }, dedup_id: 'a'.repeat(128) })).toMatchObject(accepted);
    expect(await push(q, { item: { id: 'chars' }, dedup_id: 'Az09._:@-' })).toMatchObject(accepted);
    expect(await push(q, { item: { id: 'plain' } }), 'without a dedup_id the answer is as before').toMatchObject({
      status: 200,
      body: { success: true, message: `Item pushed to queue ${q} at priority 0` },
    });
    expect((await push(q, { item: { id: 'plain' } })).body).not.toHaveProperty('duplicate');
  });

  it("a repeat within the window enqueues nothing and answers duplicate: true, whatever its item or priority; from the window's end it is accepted again", async () => {
    const clock = timeTravel(svc);
    const q = uniqueQueueId('dedup-window');
    expect(await push(q, { item: { id: 'first' }, dedup_id: 'order-1' })).toMatchObject({
      ...accepted,
      body: { ...accepted.body, message: `Item pushed to queue ${q} at priority 0` },
    });
    expect(await push(q, { item: { id: 'again' }, dedup_id: 'order-1' })).toMatchObject(duplicate(q));
    expect(await push(q, { item: { id: 'other' }, dedup_id: 'order-1', priority: 7, delay_seconds: 5 })).toMatchObject(duplicate(q));
    svc.app.get(ActorRegistry).deactivateIdle(Date.now() + 1);
    clock.advance(WINDOW_MS - MARGIN_MS);
    expect(await push(q, { item: { id: 'late' }, dedup_id: 'order-1' }), 'still inside the window, read back from the database').toMatchObject(duplicate(q));
    expect(await count(q)).toBe(1);
    clock.advance(MARGIN_MS);
    expect(await push(q, { item: { id: 'next' }, dedup_id: 'order-1' })).toMatchObject(accepted);
    expect(await push(q, { item: { id: 'next2' }, dedup_id: 'order-1' }), 'the window starts again from the push accepted last').toMatchObject(duplicate(q));
    expect(ids(await drain<Item>(svc.http, q))).toEqual(['first', 'next']);
  });

  it('the window on the real clock (DEDUP_WINDOW_SECONDS=2)', async () => {
    const q = uniqueQueueId('dedup-real');
    expect(await push(q, { item: { id: 'a' }, dedup_id: 'x' })).toMatchObject(accepted);
    // Real time passes on purpose here (the other tests move the service's clock).
    await sleep(1000);
    expect(await push(q, { item: { id: 'b' }, dedup_id: 'x' })).toMatchObject(duplicate(q));
    await sleep(1100);
    expect(await push(q, { item: { id: 'c' }, dedup_id: 'x' })).toMatchObject(accepted);
    expect(ids(await drain<Item>(svc.http, q))).toEqual(['a', 'c']);
  });

  it('a batch answers count (enqueued) and duplicates (skipped), also for repeats inside the batch itself', async () => {
    const q = uniqueQueueId('dedup-batch');
    const first = await batch(q, [
      { item: { id: 'a' }, dedup_id: 'a' },
      { item: { id: 'b' }, dedup_id: 'b', priority: 1 },
      { item: { id: 'a2' }, dedup_id: 'a' },
      { item: { id: 'plain' } },
      { item: { id: 'c' }, dedup_id: 'c', delay_seconds: 1 },
      { item: { id: 'b2' }, dedup_id: 'b' },
    ]);
    expect(first).toMatchObject({
      status: 200,
      body: { success: true, count: 4, duplicates: 2, message: `4 item(s) pushed to queue ${q}; 2 duplicate(s) skipped` },
    });
    const second = await batch(q, [
      { item: { id: 'c2' }, dedup_id: 'c' },
      { item: { id: 'd' }, dedup_id: 'd' },
    ]);
    expect(second.body).toEqual({ success: true, count: 1, duplicates: 1, message: `1 item(s) pushed to queue ${q}; 1 duplicate(s) skipped` });
    const none = await batch(q, [{ item: { id: 'a3' }, dedup_id: 'a' }]);
    expect(none.body).toEqual({ success: true, count: 0, duplicates: 1, message: `0 item(s) pushed to queue ${q}; 1 duplicate(s) skipped` });
    expect((await batch(q, [{ item: { id: 'e' } }])).body).toEqual({ success: true, count: 1, duplicates: 0, message: `1 item(s) pushed to queue ${q}` });
    // c's delay ends.
    timeTravel(svc).advance(1100);
    expect(ids(await drain<Item>(svc.http, q))).toEqual(['a', 'plain', 'd', 'e', 'c', 'b']);
  });

  it('ids are per queue', async () => {
    const [q1, q2] = [uniqueQueueId('dedup-q1'), uniqueQueueId('dedup-q2')];
    expect(await push(q1, { item: { id: '1' }, dedup_id: 'same' })).toMatchObject(accepted);
    expect(await push(q2, { item: { id: '2' }, dedup_id: 'same' })).toMatchObject(accepted);
    expect([await count(q1), await count(q2)]).toEqual([1, 1]);
  });

  it('concurrent pushes of one id to one queue (sharing turns): exactly one is enqueued', async () => {
    const q = uniqueQueueId('dedup-concurrent');
    const answers = await Promise.all(
      range(30).map((n) => (n % 3 === 0 ? batch(q, [{ item: { id: `b${n}` }, dedup_id: 'once' }]) : push(q, { item: { id: `p${n}` }, dedup_id: 'once' }))),
    );
    expect(answers.every((a) => a.status === 200)).toBe(true);
    const enqueued = answers.filter((a) => a.body.duplicate === false || a.body.count === 1).length;
    expect(enqueued).toBe(1);
    expect(await count(q)).toBe(1);
  });

  it('deleting a queue forgets its ids', async () => {
    const q = uniqueQueueId('dedup-delete');
    expect(await push(q, { item: { id: 'a' }, dedup_id: 'x' })).toMatchObject(accepted);
    expect((await answer(svc.http.delete(`/queue/${q}`))).body).toEqual({ success: true, items_deleted: 1 });
    expect(await push(q, { item: { id: 'b' }, dedup_id: 'x' })).toMatchObject(accepted);
  });

  it('expired ids are deleted by the sweep, in bounded batches; the metrics count duplicates skipped', async () => {
    const clock = timeTravel(svc);
    const q = uniqueQueueId('dedup-sweep');
    const stored = async (queueId: string | null = q): Promise<number> => {
      const rows = await svc.app
        .get(UnitOfWork)
        .autocommit.query<{ n: string }>(`SELECT count(*) AS n FROM dedup_ids WHERE $1::varchar IS NULL OR queue_id = $1`, [queueId]);
      return Number(rows[0].n);
    };
    expect(
      (
        await batch(
          q,
          range(1000).map((n) => ({ item: { n }, dedup_id: `id-${n}` })),
        )
      ).body,
    ).toMatchObject({ count: 1000, duplicates: 0 });
    expect(
      (
        await batch(
          q,
          range(500).map((n) => ({ item: { n }, dedup_id: `id-${1000 + n}` })),
        )
      ).body,
    ).toMatchObject({ count: 500, duplicates: 0 });
    expect(await stored()).toBe(1500);
    // Swept by hand from here on: the background schedule would race the counts below.
    const sweeper = svc.app.get(DedupSweeper);
    await sweeper.onModuleDestroy();
    expect(await sweeper.sweep(), 'nothing expired yet').toBe(false);
    expect(await stored()).toBe(1500);
    clock.advance(WINDOW_MS);
    // Other tests' ids have expired as well: the sweep takes the oldest first, 1000 at most.
    const before = await stored(null);
    expect(await sweeper.sweep(), 'a full batch: sweep again at once').toBe(true);
    expect(await stored(null)).toBe(before - 1000);
    for (let i = 0; i < 10 && (await sweeper.sweep()); i++);
    expect(await stored()).toBe(0);
    expect((await push(q, { item: { n: 0 }, dedup_id: 'id-0' })).body).toMatchObject({ duplicate: false });
    expect((await push(q, { item: { n: 0 }, dedup_id: 'id-0' })).body).toMatchObject({ duplicate: true });
    const text = (await svc.http.get('/metrics')).text;
    expect(Number(/^pushpop_duplicates_skipped_total (\d+)$/m.exec(text)?.[1])).toBeGreaterThanOrEqual(1);
  });
});
