import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { Clock } from '../../src/common/clock.js';
import { ActorRegistry } from '../../src/queue/runtime/actor-registry.js';
import { answer, drain } from '../support/queue-helpers.js';
import { databaseKind, removeDataDir, startService, TestService, uniqueQueueId } from '../support/service.js';

/**
 * Long delays over HTTP (CONTRACT.md, "Long delays" and "Details of the third additions"):
 * `delay_seconds` up to one year, or `deliver_at` (unix seconds, at most a year ahead) instead,
 * on push and batch entries. Far-future items wait in the delayed items (shown in `delayed`),
 * survive a restart, and come out when due. The service's Clock is moved forward to reach the
 * due times; the sweep runs every 100 ms.
 */

const YEAR = 31_536_000;
type Item = { id: string };
const ids = (items: Item[]): string[] => items.map((i) => i.id);

describe(`long delays (${databaseKind})`, () => {
  let svc: TestService;
  let offset = 0;

  const start = async (dataDir?: string): Promise<TestService> => {
    const s = await startService({ dataDir, env: { LOCK_SWEEP_INTERVAL_MS: '100' } });
    vi.spyOn(s.app.get(Clock), 'now').mockImplementation(() => Date.now() + offset);
    return s;
  };

  beforeAll(async () => {
    svc = await start();
  });
  afterEach(() => {
    offset = 0;
  });
  afterAll(async () => {
    vi.restoreAllMocks();
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
  const nowSeconds = () => (Date.now() + offset) / 1000;

  it('delay_seconds takes up to one year; deliver_at up to a year ahead; both at once (even delay_seconds 0) is 400', async () => {
    const q = uniqueQueueId('long-valid');
    expect(await push(q, { item: { id: 'year' }, delay_seconds: YEAR })).toMatchObject({
      status: 200,
      body: { message: `Item pushed to queue ${q} at priority 0, visible in ${YEAR} s` },
    });
    expect((await push(q, { item: { id: 'at' }, deliver_at: nowSeconds() + YEAR - 60 })).status).toBe(200);
    const refused = [
      { item: { id: 'x' }, delay_seconds: YEAR + 1 },
      { item: { id: 'x' }, deliver_at: nowSeconds() + YEAR + 60 },
      { item: { id: 'x' }, deliver_at: nowSeconds() + 10, delay_seconds: 0 },
      { item: { id: 'x' }, deliver_at: nowSeconds() + 10, delay_seconds: 5 },
      { item: { id: 'x' }, deliver_at: 'tomorrow' },
      { item: { id: 'x' }, deliver_at: null },
      { item: { id: 'x' }, deliver_at: -1 },
    ];
    for (const body of refused) {
      const res = await push(q, body);
      expect({ status: res.status, code: res.body.error_code }, JSON.stringify(body)).toEqual({ status: 400, code: 'VALIDATION_FAILED' });
      const inBatch = await batch(q, [{ item: { id: 'ok' } }, body]);
      expect({ status: inBatch.status, code: inBatch.body.error_code }, `batch ${JSON.stringify(body)}`).toEqual({ status: 400, code: 'VALIDATION_FAILED' });
      expect(inBatch.body.message).toContain('items.1.');
    }
    expect(await info(q), 'a refused push or batch enqueues nothing').toMatchObject({ count: 0, delayed: 2 });
  });

  it('a deliver_at in the past delivers at once; a fractional one counts its fraction', async () => {
    const q = uniqueQueueId('long-past');
    expect(
      (
        await batch(q, [
          { item: { id: 'past' }, deliver_at: nowSeconds() - 3600 },
          { item: { id: 'epoch' }, deliver_at: 0 },
        ])
      ).status,
    ).toBe(200);
    expect((await push(q, { item: { id: 'soon' }, deliver_at: nowSeconds() + 30.5 })).status).toBe(200);
    expect(await info(q)).toMatchObject({ count: 2, delayed: 1 });
    offset += 30_000;
    expect(await info(q), 'not due half a second early').toMatchObject({ count: 2, delayed: 1 });
    offset += 1_000;
    expect(ids(await drain<Item>(svc.http, q))).toEqual(['past', 'epoch', 'soon']);
  });

  it('items due in months wait in delayed, survive a restart, and come out in due order when due (no request needed)', async () => {
    const q = uniqueQueueId('long-restart');
    const day = 86_400;
    expect(
      (
        await batch(q, [
          { item: { id: 'in-300-days' }, delay_seconds: 300 * day },
          { item: { id: 'in-a-year' }, deliver_at: nowSeconds() + YEAR - 1 },
          { item: { id: 'in-100-days' }, deliver_at: nowSeconds() + 100 * day },
          { item: { id: 'now' } },
        ])
      ).status,
    ).toBe(200);
    expect(await info(q)).toMatchObject({ count: 1, delayed: 3 });
    expect(ids(await drain<Item>(svc.http, q))).toEqual(['now']);

    const dataDir = svc.dataDir;
    vi.restoreAllMocks();
    await svc.close();
    svc = await start(dataDir);
    expect(await info(q), 'after a restart').toMatchObject({ count: 0, delayed: 3 });

    offset += 100 * day * 1000 + 1000;
    // No request on the queue: the sweep makes it visible.
    await expect.poll(async () => (await info(q)).count, { timeout: 5000, interval: 100 }).toBe(1);
    offset += 200 * day * 1000;
    svc.app.get(ActorRegistry).deactivateIdle(Date.now() + offset + 1);
    expect(await info(q)).toMatchObject({ count: 2, delayed: 1 });
    offset += (YEAR - 300 * day) * 1000;
    expect(ids(await drain<Item>(svc.http, q))).toEqual(['in-100-days', 'in-300-days', 'in-a-year']);
    expect(await info(q)).toMatchObject({ count: 0, delayed: 0 });
  });
});
