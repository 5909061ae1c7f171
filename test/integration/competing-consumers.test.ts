import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { replicasOnOneDatabase } from '../support/child-service.js';
import { range, seededRandom, sleep, testSeed } from '../support/queue-helpers.js';
import { databaseKind, uniqueQueueId } from '../support/service.js';

/**
 * Shared lock mode under real concurrency: two service processes on one database, many
 * consumers popping with ack on the same queues (CONTRACT.md, "Shared lock mode", "Deliveries
 * and dead letters").
 *
 * 1. Competing consumers on one queue with `max_deliveries` and a dead-letter queue: consumers
 *    acknowledge, release, or walk away and let the lock expire. Every item ends acknowledged
 *    exactly once or in the dead-letter queue exactly once, after exactly `max_deliveries`
 *    deliveries; the delivery counts each item was handed out with are 1, 2, … without a gap
 *    or a repeat; both queues end empty with no live lock.
 * 2. Two queues, each the other's dead-letter queue, with `max_deliveries` 1: every release or
 *    expiry moves items across, A→B and B→A at the same time from both processes. The turn
 *    statement locks both queue rows in `queue_id` order, so no two such turns deadlock
 *    (PostgreSQL would abort one with 40P01, answered as a 5xx): no 5xx, nothing in the logs,
 *    and every item acknowledged exactly once.
 */

const seed = testSeed();
const where = `(seed ${seed}, ${databaseKind})`;

interface Outcome {
  status: number | 'no answer';
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body?: any;
}

/** One request with a deadline; a dropped connection is 'no answer', never an exception. */
async function call(url: string, method: string, path: string, body?: unknown): Promise<Outcome> {
  try {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(20_000),
    });
    return { status: res.status, body: await res.json() };
  } catch {
    return { status: 'no answer' };
  }
}

type Item = { n: number };

describe(`competing consumers on shared locks, two processes on one database (${databaseKind})`, () => {
  // Process 0 owns the database (its embedded server, or its schema on TEST_DATABASE_URL); 1 uses it too.
  const { replicas: processes, shared } = replicasOnOneDatabase(2, { LOCK_SWEEP_INTERVAL_MS: '200' });

  /** PostgreSQL's count of deadlocks in the test database (a diagnostic for failure messages). */
  async function deadlocks(): Promise<number> {
    const client = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL ?? shared().DATABASE_URL });
    await client.connect();
    try {
      const { rows } = await client.query<{ deadlocks: string }>(`SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`);
      return Number(rows[0].deadlocks);
    } finally {
      await client.end();
    }
  }

  /** Whatever a process logged about a failed turn or a deadlock (with the first lines of a stack trace). */
  const troubleInLogs = (): string[] =>
    processes.flatMap((p, i) => {
      const lines = p.output().split('\n');
      return lines.flatMap((line, k) => (/deadlock|40P01|failed|error/i.test(line) ? [`process ${i}: ${lines.slice(k, k + 6).join(' | ')}`] : []));
    });

  const put = async (q: string, body: Record<string, unknown>): Promise<void> => {
    const res = await call(processes[0].url, 'PUT', `/queue/${q}/settings`, body);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  };

  const pushAll = async (q: string, items: Item[]): Promise<void> => {
    for (let i = 0; i < items.length; i += 100) {
      const batch = items.slice(i, i + 100).map((item) => ({ item, priority: item.n % 3 }));
      const res = await call(processes[i % 2].url, 'POST', `/queue/${q}/push/batch`, { items: batch });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    }
  };

  /** Pops a queue empty (plain pops); its items. */
  const drain = async (q: string): Promise<Item[]> => {
    const out: Item[] = [];
    for (let i = 0; i < 100; i++) {
      const res = await call(processes[0].url, 'POST', `/queue/${q}/pop?depth=100`);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      if (res.body.count === 0) return out;
      out.push(...(res.body.items as Item[]));
    }
    throw new Error(`${q} not empty after 100 pops`);
  };

  const inspect = async (q: string): Promise<Outcome> => call(processes[1].url, 'GET', `/queue/${q}`);

  /** Whether a shared queue has nothing left: no item waiting or delayed, no live lock. */
  const settled = async (q: string): Promise<boolean> => {
    const res = await inspect(q);
    return res.status === 200 && res.body.count === 0 && res.body.delayed === 0 && res.body.locks.count === 0;
  };

  it(
    '16 consumers, 8 per process, acknowledging, releasing or letting locks expire: each item acknowledged once or dead-lettered after exactly max_deliveries deliveries',
    { timeout: 180_000 },
    async () => {
      const rnd = seededRandom(seed);
      const q = uniqueQueueId('consumers');
      const dlq = `${q}-dead`;
      const TOTAL = 240;
      const MAX_DELIVERIES = 3;
      await put(q, { lock_mode: 'shared', max_deliveries: MAX_DELIVERIES, dead_letter_queue: dlq });
      await pushAll(
        q,
        range(TOTAL).map((n) => ({ n })),
      );

      /** Per item, the delivery counts it was handed out with, in the order the pops answered. */
      const deliveries = new Map<number, number[]>();
      const acked = new Map<number, number>();
      const problems: string[] = [];
      const fates = { ack: 0, release: 0, expire: 0, ackTooLate: 0 };
      const deadline = Date.now() + 120_000;

      const consumer = async (c: number): Promise<void> => {
        const { url } = processes[c % 2];
        while (Date.now() < deadline && problems.length === 0) {
          const res = await call(url, 'POST', `/queue/${q}/pop?require_ack=true&depth=${rnd.int(1, 3)}&ttl_seconds=1`);
          if (res.status !== 200) {
            problems.push(`consumer ${c}: pop answered ${res.status} ${JSON.stringify(res.body)}`);
            return;
          }
          if (res.body.locked === false) {
            // Empty for now: locks still live may give items back; done once nothing is left.
            if (await settled(q)) return;
            await sleep(rnd.int(20, 60));
            continue;
          }
          const items = res.body.items as Item[];
          const counts = res.body.delivery_counts as number[];
          if (!Array.isArray(counts) || counts.length !== items.length) problems.push(`consumer ${c}: delivery_counts ${JSON.stringify(res.body)}`);
          items.forEach((item, i) => deliveries.set(item.n, [...(deliveries.get(item.n) ?? []), counts[i]]));
          const lockId = res.body.lock_id as string;
          const r = rnd.next();
          if (r < 0.45) {
            fates.ack += 1;
            const a = await call(url, 'POST', `/queue/${q}/acknowledge`, { lock_id: lockId });
            if (a.status === 200 && a.body.items_acknowledged === items.length) for (const item of items) acked.set(item.n, (acked.get(item.n) ?? 0) + 1);
            // Held past its second (a slow machine): given back or dead-lettered by then.
            else if (a.status === 410) fates.ackTooLate += 1;
            else problems.push(`consumer ${c}: acknowledge answered ${a.status} ${JSON.stringify(a.body)}`);
          } else if (r < 0.8) {
            fates.release += 1;
            const a = await call(url, 'POST', `/queue/${q}/release`, { lock_id: lockId });
            const moved = a.status === 200 ? (a.body.items_returned as number) + ((a.body.items_dead_lettered as number | undefined) ?? 0) : -1;
            if (a.status !== 410 && moved !== items.length) problems.push(`consumer ${c}: release answered ${a.status} ${JSON.stringify(a.body)}`);
          } else {
            // Walks away: the lock expires after its second and gives the items back (or dead-letters them).
            fates.expire += 1;
          }
        }
      };
      await Promise.all(range(16).map(consumer));
      const label = `${where}: fates ${JSON.stringify(fates)}, problems ${JSON.stringify(problems.slice(0, 5))}, logs ${JSON.stringify(troubleInLogs().slice(0, 5))}`;
      expect(problems, label).toEqual([]);
      expect(await settled(q), `${label}: the queue ends empty with no live lock`).toBe(true);

      const dead = await drain(dlq);
      const deadCount = new Map<number, number>();
      for (const item of dead) deadCount.set(item.n, (deadCount.get(item.n) ?? 0) + 1);
      const wrong: string[] = [];
      for (const n of range(TOTAL)) {
        const seen = deliveries.get(n) ?? [];
        const a = acked.get(n) ?? 0;
        const d = deadCount.get(n) ?? 0;
        // Handed out with 1, 2, 3, … in this order: every delivery counted once (pops of one item never overlap).
        if (
          seen.join() !==
          range(seen.length)
            .map((i) => i + 1)
            .join()
        )
          wrong.push(`item ${n}: delivery counts ${seen.join()}`);
        if (a + d !== 1) wrong.push(`item ${n}: acknowledged ${a} time(s), dead-lettered ${d} time(s)`);
        if (d === 1 && seen.length !== MAX_DELIVERIES) wrong.push(`item ${n}: dead-lettered after ${seen.length} deliveries`);
        if (seen.length > MAX_DELIVERIES) wrong.push(`item ${n}: delivered ${seen.length} times`);
      }
      expect(wrong.slice(0, 20), label).toEqual([]);
      expect(
        dead.every((item) => Number.isInteger(item.n) && item.n >= 0 && item.n < TOTAL),
        label,
      ).toBe(true);
      // Each fate happened, and some items went all the way to the dead-letter queue.
      expect(fates.ack > 0 && fates.release > 0 && fates.expire > 0 && dead.length > 0, label).toBe(true);
      const dlqInfo = await inspect(dlq);
      expect(dlqInfo.body, label).toMatchObject({ count: 0, delayed: 0, lock: null });
    },
  );

  it(
    'two queues dead-lettering into each other from both processes at once: no deadlock, no 5xx, every item acknowledged once',
    { timeout: 180_000 },
    async () => {
      const rnd = seededRandom(seed + 1);
      const a = uniqueQueueId('mutual-a');
      const b = uniqueQueueId('mutual-b');
      const TOTAL = 200;
      await put(a, { lock_mode: 'shared', max_deliveries: 1, dead_letter_queue: b });
      await put(b, { lock_mode: 'shared', max_deliveries: 1, dead_letter_queue: a });
      await pushAll(
        a,
        range(TOTAL / 2).map((n) => ({ n })),
      );
      await pushAll(
        b,
        range(TOTAL / 2).map((n) => ({ n: n + TOTAL / 2 })),
      );
      const before = await deadlocks();

      const acked = new Map<number, number>();
      const statuses = new Map<string, number>();
      const problems: string[] = [];
      let moves = 0;
      const deadline = Date.now() + 120_000;
      const count = (what: string): void => void statuses.set(what, (statuses.get(what) ?? 0) + 1);

      // Every consumer works both queues; most locks end by release (dead letters across) so that turns on A and B move items at the same time.
      const consumer = async (c: number): Promise<void> => {
        const { url } = processes[c % 2];
        let idle = 0;
        while (Date.now() < deadline && problems.length === 0) {
          const q = (c + idle) % 2 === 0 ? a : b;
          const res = await call(url, 'POST', `/queue/${q}/pop?require_ack=true&depth=${rnd.int(1, 4)}&ttl_seconds=1`);
          count(`pop ${res.status}`);
          if (res.status !== 200) {
            problems.push(`consumer ${c}: pop ${q} answered ${res.status} ${JSON.stringify(res.body)}`);
            return;
          }
          if (res.body.locked === false) {
            idle += 1;
            // Done once both are settled at once: `a` looked at again after `b`, for an expired lock of
            // `b` given back (into `a`, its dead-letter queue) between the two looks.
            if ((await settled(a)) && (await settled(b)) && (await settled(a))) return;
            await sleep(rnd.int(10, 40));
            continue;
          }
          const items = res.body.items as Item[];
          const r = rnd.next();
          if (r < 0.15) {
            const ack = await call(url, 'POST', `/queue/${q}/acknowledge`, { lock_id: res.body.lock_id });
            count(`acknowledge ${ack.status}`);
            if (ack.status === 200) for (const item of items) acked.set(item.n, (acked.get(item.n) ?? 0) + 1);
            else if (ack.status !== 410) problems.push(`consumer ${c}: acknowledge answered ${ack.status} ${JSON.stringify(ack.body)}`);
          } else if (r < 0.9) {
            const rel = await call(url, 'POST', `/queue/${q}/release`, { lock_id: res.body.lock_id });
            count(`release ${rel.status}`);
            if (rel.status === 200) moves += (rel.body.items_dead_lettered as number | undefined) ?? 0;
            else if (rel.status !== 410) problems.push(`consumer ${c}: release answered ${rel.status} ${JSON.stringify(rel.body)}`);
          }
          // else: the lock expires after its second, and the sweep of either process moves its items across.
        }
      };
      await Promise.all(range(16).map(consumer));
      const after = await deadlocks();
      const logs = troubleInLogs();
      const label = `${where}: answers ${JSON.stringify(Object.fromEntries(statuses))}, ${moves} items moved by releases, deadlocks in the database ${before} → ${after}, problems ${JSON.stringify(problems.slice(0, 5))}, logs ${JSON.stringify(logs.slice(0, 5))}`;
      expect(problems, label).toEqual([]);
      expect(logs, label).toEqual([]);
      expect(
        [...statuses.keys()].filter((k) => /\s5\d\d$|no answer/.test(k)),
        label,
      ).toEqual([]);
      expect((await settled(a)) && (await settled(b)), `${label}: both queues end empty with no live lock`).toBe(true);
      const wrong = range(TOTAL).filter((n) => acked.get(n) !== 1);
      expect(
        wrong.slice(0, 20).map((n) => `item ${n} acknowledged ${acked.get(n) ?? 0} time(s)`),
        label,
      ).toEqual([]);
      // Items really went back and forth many times (else the test proves nothing about the lock order).
      expect(moves, label).toBeGreaterThan(TOTAL);
    },
  );
});
