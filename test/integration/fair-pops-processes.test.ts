import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueueEvents } from '../../src/queue/runtime/queue-events.js';
import { seededRandom, testSeed, until } from '../support/queue-helpers.js';
import { databaseKind, type TestService, uniqueQueueId } from '../support/service.js';
import { closeServicePair, startServicePair } from '../support/service-pair.js';

/**
 * Fair pops with two processes on one database (CONTRACT.md, fourth additions, "Fair pops across
 * many queues"): each keeps its own place in the round of a prefix, so a queue waits at most 2K
 * pops across them; a long poll in one wakes on a push through the other to a queue created meanwhile.
 */
interface FairAnswer {
  items: { q: string; n: number }[];
  count: number;
  queue_id?: string;
}

async function popFair(svc: TestService, prefix: string, waitSeconds = 0): Promise<FairAnswer & { at: number }> {
  const res = await fetch(`${svc.url}/queues/pop?prefix=${prefix}&wait_seconds=${waitSeconds}`, { method: 'POST', signal: AbortSignal.timeout(30_000) });
  expect(res.status).toBe(200);
  return { ...((await res.json()) as FairAnswer), at: performance.now() };
}

async function pushBatch(svc: TestService, q: string, n: number): Promise<number> {
  const res = await fetch(`${svc.url}/queue/${q}/push/batch`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ items: Array.from({ length: n }, (_, i) => ({ item: { q, n: i } })) }),
  });
  expect(res.status).toBe(200);
  await res.arrayBuffer();
  return performance.now();
}

const percentile = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];

describe(`fair pops across processes (${databaseKind})`, () => {
  let A: TestService;
  let B: TestService;

  beforeAll(async () => ({ A, B } = await startServicePair()));
  afterAll(() => closeServicePair({ A, B }));

  it('pops interleaved at random over two processes: no queue waits more than 2K pops, and K pops of one process serve K queues', async () => {
    const K = 7;
    const prefix = `${uniqueQueueId('fair-2k')}-`;
    const queues = Array.from({ length: K }, (_, i) => `${prefix}${i}`);
    const perQueue = 30;
    for (const q of queues) await pushBatch(A, q, perQueue);
    const random = seededRandom(testSeed());
    const served: { by: 'A' | 'B'; queue: string }[] = [];
    // Every queue keeps items throughout: K * perQueue pops would empty them all, stop well before.
    for (let i = 0; i < K * (perQueue - 5); i++) {
      const by = random.next() < 0.5 ? 'A' : 'B';
      const answer = await popFair(by === 'A' ? A : B, prefix);
      expect(answer.count, `pop ${i} (seed ${random.seed})`).toBe(1);
      expect(answer.items[0].q).toBe(answer.queue_id);
      served.push({ by, queue: answer.queue_id! });
    }
    // The longest run of pops during which a queue was not served, over all pops.
    let longest = 0;
    for (const q of queues) {
      let last = -1;
      served.forEach((s, i) => {
        if (s.queue !== q) return;
        longest = Math.max(longest, i - last);
        last = i;
      });
      longest = Math.max(longest, served.length - last);
    }
    expect(longest, `seed ${random.seed}`).toBeLessThanOrEqual(2 * K);
    for (const by of ['A', 'B'] as const) {
      const own = served.filter((s) => s.by === by).map((s) => s.queue);
      for (let i = 0; i + K <= own.length; i++) expect(new Set(own.slice(i, i + K)).size, `${by} pops ${i}..${i + K - 1} (seed ${random.seed})`).toBe(K);
    }
    // Items of each queue still leave in order.
    for (const q of queues) {
      const rest = await popFair(A, q);
      expect(rest.items[0].n).toBe(served.filter((s) => s.queue === q).length);
    }
  });

  it('a long poll on one process answers as soon as the other pushes to a queue created meanwhile under the prefix', async () => {
    const latencies: number[] = [];
    for (let round = 0; round < 10; round++) {
      const [polls, pushes] = round % 2 === 0 ? [A, B] : [B, A];
      const prefix = `${uniqueQueueId('fair-xp')}-`;
      const events = polls.app.get(QueueEvents);
      const waiting = events.waiting;
      const poll = popFair(polls, prefix, 10);
      expect(await until(() => events.waiting > waiting, 10_000)).toBe(true);
      const q = `${prefix}${round}`;
      const pushed = await pushBatch(pushes, q, 1);
      const answer = await poll;
      expect(answer).toMatchObject({ items: [{ q, n: 0 }], count: 1, queue_id: q });
      latencies.push(Math.max(0, answer.at - pushed));
    }
    latencies.sort((a, b) => a - b);
    console.info(`fair-pop cross-process wake-up (${databaseKind}): p50 ${percentile(latencies, 50).toFixed(1)} ms, max ${latencies.at(-1)!.toFixed(1)} ms`);
    // 200 ms is the contract's bound: the median of the ten holds it; each one gets slack for a
    // loaded machine, but the fallback re-check (5 s) would pass neither.
    expect(percentile(latencies, 50)).toBeLessThan(200);
    expect(latencies.at(-1)).toBeLessThan(1000);
  });
});
