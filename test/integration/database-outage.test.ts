import { beforeAll, describe, expect, it } from 'vitest';
import { callService, expectPoppedExactlyOnce, range, sleep, type CallOutcome } from '../support/queue-helpers.js';
import { serviceOnPrivateDatabase, type TestService } from '../support/service.js';

/**
 * The database goes away under load and comes back: a fast restart, then an outage until every
 * kind of request has been refused several times. The service runs on a private PostgreSQL server that this test starts and stops itself (never
 * the machine's shared one), through DATABASE_URL as any external server. While the database
 * is away every operation answers 503 STORE_UNAVAILABLE with Retry-After, never a 500; within
 * 5 s of its return they succeed again, without a restart of the service; nothing acknowledged
 * is lost.
 */
type Outcome = CallOutcome<{ error_code?: string; items?: { c: number; s: number }[]; count?: number }>;

/** One request; a refused or dropped connection is 'no answer', never an exception. */
const call = (url: string, method: string, path: string, body?: unknown): Promise<Outcome> => callService(url, method, path, body, 20_000);

describe('the database restarting and going away under load', () => {
  const privateDatabase = serviceOnPrivateDatabase();
  const database = privateDatabase.database;
  let svc: TestService;
  beforeAll(() => {
    svc = privateDatabase.service();
  });

  it('answers 503 STORE_UNAVAILABLE with Retry-After while it is away, never 500, recovers within 5 s of its return, loses nothing', async () => {
    const q = `outage-${Date.now()}`;
    const acked = new Set<string>();
    const maybe = new Set<string>();
    const popped: string[] = [];
    const statuses = new Map<string, number>();
    const bad: string[] = [];
    let lastFailure = 0;
    let firstSuccessAfter = 0;
    let back = Number.POSITIVE_INFINITY;
    let stop = false;
    const count = (what: string): void => void statuses.set(what, (statuses.get(what) ?? 0) + 1);
    /** Per kind of request (push, pop, inspect), when each answer came and its status. */
    const answered = new Map<string, { at: number; status: number | 'no answer' }[]>();
    const seen = (kind: string, status: number, since: number): number => (answered.get(kind) ?? []).filter((a) => a.at >= since && a.status === status).length;
    /** Whether every kind of request got `n` answers with `status` since `since`. */
    const everyKind = (status: number, since: number, n: number) => (): boolean => ['push', 'pop', 'inspect'].every((k) => seen(k, status, since) >= n);
    const check = (what: string, res: Outcome): boolean => {
      count(`${what} ${res.status}`);
      const list = answered.get(what) ?? [];
      list.push({ at: Date.now(), status: res.status });
      answered.set(what, list);
      if (res.status === 200) {
        if (Date.now() > back && firstSuccessAfter === 0) firstSuccessAfter = Date.now();
        return true;
      }
      lastFailure = Date.now();
      if (res.status !== 503 || res.body?.error_code !== 'STORE_UNAVAILABLE' || !res.retryAfter)
        bad.push(`${what}: ${res.status} ${JSON.stringify(res.body)} Retry-After ${res.retryAfter}`);
      return false;
    };

    const producers = range(4).map(async (c) => {
      for (let s = 0; !stop; s++) {
        const key = `${c}:${s}`;
        const res = await call(svc.url, 'POST', `/queue/${q}/push`, { item: { c, s } });
        if (check('push', res)) acked.add(key);
        else {
          // A push whose answer was lost may have committed.
          maybe.add(key);
          await sleep(20);
        }
      }
    });
    const consumers = range(2).map(async () => {
      while (!stop) {
        const res = await call(svc.url, 'POST', `/queue/${q}/pop?depth=5`);
        if (check('pop', res)) popped.push(...(res.body?.items ?? []).map((i) => `${i.c}:${i.s}`));
        else await sleep(20);
      }
    });
    const readers = (async () => {
      while (!stop) {
        const res = await call(svc.url, 'GET', `/queue/${q}`);
        if (res.status !== 404) check('inspect', res);
        await sleep(10);
      }
    })();

    await expect.poll(everyKind(200, 0, 20), { timeout: 30_000, interval: 20 }).toBe(true);
    // A fast restart (what a minor-version upgrade or a failover looks like); the load goes on once every kind of request succeeds again.
    await database.stop();
    await database.start();
    const restarted = Date.now();
    await expect.poll(everyKind(200, restarted, 20), { timeout: 30_000, interval: 20 }).toBe(true);
    // Then an outage, until every kind of request has been refused (503) several times.
    await database.stop();
    const outage = Date.now();
    await expect.poll(everyKind(503, outage, 5), { timeout: 30_000, interval: 20 }).toBe(true);
    const unavailableDuringOutage = await call(svc.url, 'POST', `/queue/${q}/push`, { item: { c: -1, s: -1 } });
    await database.start();
    back = Date.now();
    // Back: every kind of request succeeds again, then keeps succeeding (20 more of each; any failure is counted below).
    await expect.poll(everyKind(200, back, 1), { timeout: 15_000, interval: 20 }).toBe(true);
    const recovered = Date.now();
    await expect.poll(everyKind(200, recovered, 20), { timeout: 30_000, interval: 20 }).toBe(true);
    stop = true;
    await Promise.all([...producers, ...consumers, readers]);

    const rest: string[] = [];
    for (;;) {
      const res = await call(svc.url, 'POST', `/queue/${q}/pop?depth=100`);
      expect(res.status).toBe(200);
      if (!res.body?.count) break;
      rest.push(...res.body.items!.map((i) => `${i.c}:${i.s}`));
    }
    const summary = JSON.stringify(Object.fromEntries(statuses));

    expect(unavailableDuringOutage.status, `while the database was away ${outage}`).toBe(503);
    expect(unavailableDuringOutage.body?.error_code).toBe('STORE_UNAVAILABLE');
    expect(bad, `every failure is 503 STORE_UNAVAILABLE with Retry-After (${summary})`).toEqual([]);
    expect(firstSuccessAfter - back, `first success ${firstSuccessAfter - back} ms after the database was back (${summary})`).toBeLessThan(5000);
    expect(lastFailure - back, `last failure ${lastFailure - back} ms after the database was back (${summary})`).toBeLessThan(5000);
    expect(lastFailure, `no failure once every kind of request had succeeded again (${summary})`).toBeLessThan(recovered);
    expect((await call(svc.url, 'GET', '/health/ready')).status).toBe(200);

    expectPoppedExactlyOnce([...popped, ...rest], acked, maybe);
    expect(acked.size, `the load really ran (${summary})`).toBeGreaterThan(100);
  });
});
