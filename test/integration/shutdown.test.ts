import { describe, expect, it } from 'vitest';
import { replicasOnOneDatabase } from '../support/child-service.js';
import { callService, expectPoppedExactlyOnce, range, type CallOutcome } from '../support/queue-helpers.js';
import { databaseKind } from '../support/service.js';

/**
 * Graceful shutdown, and a rolling restart of one of three replicas under load: SIGTERM answers
 * the long polls waiting on that replica at once, lets its requests in flight finish, closes the
 * pool and exits 0; meanwhile clients keep going through the other replicas. Nothing is lost,
 * and nothing is answered with a 5xx.
 */
type Outcome = CallOutcome<{ items?: { c: number; s: number }[]; count?: number }>;

/** One request; a refused or dropped connection is 'no answer', never an exception. */
const call = (url: string, method: string, path: string, body?: unknown): Promise<Outcome> => callService(url, method, path, body, 30_000);

/** Long polls waiting on the service at `url`, as its /metrics tells. */
async function longPollsWaiting(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(/^pushpop_long_polls_waiting (\S+)$/m.exec(text)?.[1] ?? NaN);
}

describe(`graceful shutdown and a rolling restart (${databaseKind})`, () => {
  // Replica 0 owns the database (its embedded server, or its schema on TEST_DATABASE_URL); 1 and 2 use it too.
  const { replicas, start } = replicasOnOneDatabase(3, { LOG_LEVEL: 'log' });

  it('restarting one replica under load: no 5xx, nothing lost, its long polls answered at once, exit 0', async () => {
    const q = `rolling-${Date.now()}`;
    const acked = new Set<string>();
    const maybe = new Set<string>();
    const popped: string[] = [];
    const bad: string[] = [];
    /** Answers 200 per replica url (a restarted replica has a new one). */
    const served = new Map<string, { pushes: number; pops: number }>();
    const serve = (url: string, what: 'pushes' | 'pops'): void => {
      const counts = served.get(url) ?? { pushes: 0, pops: 0 };
      counts[what] += 1;
      served.set(url, counts);
    };
    let stop = false;
    const target = (i: number): string => replicas[i % 3].url;

    // 4 producers and 2 consumers, each going round the replicas.
    const producers = range(4).map(async (c) => {
      for (let s = 0; !stop; s++) {
        const key = `${c}:${s}`;
        const url = target(c + s);
        const res = await call(url, 'POST', `/queue/${q}/push`, { item: { c, s } });
        if (res.status === 200) {
          acked.add(key);
          serve(url, 'pushes');
        } else if (res.status === 'no answer') maybe.add(key);
        else bad.push(`push ${key}: ${res.status} ${JSON.stringify(res.body)}`);
      }
    });
    const consumers = range(2).map(async (c) => {
      for (let n = 0; !stop; n++) {
        const url = target(c + n);
        const res = await call(url, 'POST', `/queue/${q}/pop?depth=3`);
        if (res.status === 200) {
          popped.push(...(res.body?.items ?? []).map((i) => `${i.c}:${i.s}`));
          if (res.body?.count) serve(url, 'pops');
        } else if (res.status !== 'no answer') bad.push(`pop: ${res.status} ${JSON.stringify(res.body)}`);
      }
    });

    // The load runs through every replica: each has taken pushes and handed out items.
    const throughAll = (): boolean => replicas.every((r) => (served.get(r.url)?.pushes ?? 0) >= 20 && (served.get(r.url)?.pops ?? 0) >= 1);
    await expect.poll(throughAll, { timeout: 60_000, interval: 20 }).toBe(true);
    // Long polls waiting on an empty queue of the replica that goes away.
    const waiting = range(3).map(() => call(replicas[1].url, 'POST', `/queue/${q}-empty/pop?wait_seconds=20`));
    await expect.poll(() => longPollsWaiting(replicas[1].url), { timeout: 10_000, interval: 20 }).toBe(3);
    const signalled = Date.now();
    replicas[1].child.kill('SIGTERM');
    const polls = await Promise.all(waiting);
    const pollsAnsweredMs = Date.now() - signalled;
    const exit = await replicas[1].exited;
    const exitedMs = Date.now() - signalled;
    const output = replicas[1].output();

    // Back in service, as a rolling restart does; the load goes on through all three.
    await start(1);
    await expect.poll(throughAll, { timeout: 60_000, interval: 20 }).toBe(true);
    stop = true;
    await Promise.all([...producers, ...consumers]);

    const rest: string[] = [];
    for (;;) {
      const res = await call(replicas[0].url, 'POST', `/queue/${q}/pop?depth=100`);
      expect(res.status).toBe(200);
      if (!res.body?.count) break;
      rest.push(...res.body.items!.map((i) => `${i.c}:${i.s}`));
    }

    expect(exit, output).toEqual({ code: 0, signal: null });
    expect(exitedMs, `exited ${exitedMs} ms after SIGTERM`).toBeLessThan(15_000);
    expect(output).toContain('SIGTERM: shutting down');
    expect(
      polls.map((p) => p.status),
      'the waiting long polls were answered',
    ).toEqual([200, 200, 200]);
    expect(pollsAnsweredMs, 'long polls answered at once, not at the end of their 20 s').toBeLessThan(5000);
    expect(bad, 'no answer other than 200 (a replica going away may leave a request unanswered)').toEqual([]);

    expectPoppedExactlyOnce([...popped, ...rest], acked, maybe);
    expect(acked.size, 'the load really ran').toBeGreaterThan(100);
  });
});
