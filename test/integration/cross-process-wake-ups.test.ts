import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ItemNotifications } from '../../src/database/item-notifications.js';
import { EmbeddedPostgres } from '../../src/database/embedded-postgres.js';
import { UnitOfWork } from '../../src/database/unit-of-work.js';
import { QueueEvents } from '../../src/queue/runtime/queue-events.js';
import { QueueLoads } from '../../src/queue/runtime/queue-loads.js';
import { decodeQueueState } from '../../src/queue/runtime/queue-state-payload.js';
import { sleep, until } from '../support/queue-helpers.js';
import { databaseKind, makeDataDir, pollsWaitingOn, removeDataDir, sharedDatabase, startService, type TestService, uniqueQueueId } from '../support/service.js';
import { closeServicePair, startServicePair } from '../support/service-pair.js';

/**
 * Long polls woken across processes: two services on one database, a long poll waiting on one,
 * a push through the other. The contract's bound is 200 ms; the assertions here are generous
 * (timed tests on a shared machine), the measured latencies are printed, and the benchmark
 * (`BENCH_SCENARIOS=longpoll`) checks the target.
 */
interface Polled {
  status: number;
  body: { items: unknown[]; count: number };
  at: number;
}

async function longPoll(svc: TestService, queueId: string, waitSeconds: number): Promise<Polled> {
  const res = await fetch(`${svc.url}/queue/${queueId}/pop?wait_seconds=${waitSeconds}`, { method: 'POST', signal: AbortSignal.timeout(30_000) });
  const body = (await res.json()) as Polled['body'];
  return { status: res.status, body, at: performance.now() };
}

async function push(svc: TestService, queueId: string, item: Record<string, unknown>): Promise<number> {
  const res = await fetch(`${svc.url}/queue/${queueId}/push`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ item }),
  });
  expect(res.status).toBe(200);
  await res.arrayBuffer();
  return performance.now();
}

const percentile = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
const ms = (n: number): string => `${n.toFixed(1)} ms`;

/** Rounds of: a long poll waiting on `polls`, one push through `pushes`; the latencies (poll answered − push answered). */
async function measure(polls: TestService, pushes: TestService, rounds: number): Promise<number[]> {
  const latencies: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const q = uniqueQueueId('xp');
    const poll = longPoll(polls, q, 10);
    await pollsWaitingOn(polls, q);
    const pushed = await push(pushes, q, { round: i });
    const answer = await poll;
    expect(answer.status).toBe(200);
    expect(answer.body.items).toEqual([{ round: i }]);
    latencies.push(Math.max(0, answer.at - pushed));
  }
  return latencies.sort((a, b) => a - b);
}

describe(`cross-process wake-ups (${databaseKind})`, () => {
  let A: TestService;
  let B: TestService;
  let other: TestService | undefined;

  beforeAll(async () => ({ A, B } = await startServicePair()));

  afterAll(async () => {
    // A last: on the embedded database it owns the server the others use.
    await other?.close();
    if (other) removeDataDir(other.dataDir);
    await closeServicePair({ A, B });
  });

  it('a long poll on one process answers as soon as another process pushes (both ways)', async () => {
    const aToB = await measure(B, A, 15);
    const bToA = await measure(A, B, 15);
    const all = [...aToB, ...bToA].sort((a, b) => a - b);
    console.info(
      `cross-process wake-up latency (${databaseKind}, poll answered − push answered, ${all.length} rounds): p50 ${ms(percentile(all, 50))}, p90 ${ms(percentile(all, 90))}, max ${ms(all.at(-1)!)}`,
    );
    // 200 ms is the target (checked by the benchmark); a loaded machine gets slack here, but a
    // fallback re-check (500 ms, or 5 s while listening) would not pass this.
    expect(percentile(all, 50)).toBeLessThan(400);
    expect(all.at(-1)).toBeLessThan(1000);
    expect(A.app.get(QueueEvents).wakeUps.notification).toBeGreaterThanOrEqual(15);
    expect(B.app.get(QueueEvents).wakeUps.notification).toBeGreaterThanOrEqual(15);
  });

  it('one push wakes one of several polls waiting in the other process; the rest keep waiting', async () => {
    const q = uniqueQueueId('several');
    const events = A.app.get(QueueEvents);
    const polls = [0, 1, 2].map(() => longPoll(A, q, 8));
    await pollsWaitingOn(A, q, 3);
    const woken = { ...events.wakeUps };
    await push(B, q, { n: 1 });
    const first = await Promise.race(polls);
    expect(first.body.items).toEqual([{ n: 1 }]);
    // A wake-up ends its polls' waits at once, so one that woke more than one poll shows here already.
    expect([events.wakeUps.notification - woken.notification, events.wakeUps.local - woken.local], 'one poll woken').toEqual([1, 0]);
    expect(events.waiting, 'two polls still waiting').toBe(2);
    await push(B, q, { n: 2 });
    await push(B, q, { n: 3 });
    const answers = await Promise.all(polls);
    expect(
      answers
        .map((a) => a.body.items)
        .flat()
        .sort((x, y) => (x as { n: number }).n - (y as { n: number }).n),
    ).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    expect(answers.every((a) => a.body.count === 1)).toBe(true);
  });

  it('a batch push wakes as many polls as items arrived', async () => {
    const q = uniqueQueueId('batch');
    const polls = [0, 1, 2, 3].map(() => longPoll(A, q, 8));
    await pollsWaitingOn(A, q, 4);
    const res = await fetch(`${B.url}/queue/${q}/push/batch`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ items: [{ item: { n: 1 } }, { item: { n: 2 } }, { item: { n: 3 } }] }),
    });
    expect(res.status).toBe(200);
    const started = performance.now();
    const answered: Polled[] = [];
    for (const p of polls) void p.then((a) => answered.push(a));
    expect(await until(() => answered.length >= 3, 5000), 'three polls answered long before their wait ends').toBe(true);
    expect(performance.now() - started).toBeLessThan(3000);
    expect(answered.map((a) => a.body.items).flat()).toHaveLength(3);
    // The fourth is back in its wait (a poll answered early, with nothing, would leave n: 4 unpopped below).
    await expect.poll(() => A.app.get(QueueEvents).waiting, { timeout: 5000, interval: 10 }).toBe(1);
    expect(answered, 'the fourth keeps waiting').toHaveLength(3);
    await push(B, q, { n: 4 });
    expect((await Promise.all(polls)).reduce((n, a) => n + a.body.count, 0)).toBe(4);
  });

  it("a poll woken by another process's push starts from the state that push sent: its turn reads nothing and writes once", async () => {
    const q = uniqueQueueId('state');
    const loads = A.app.get(QueueLoads);
    const taken = loads.statesTaken;
    const poll = longPoll(A, q, 10);
    await pollsWaitingOn(A, q);
    const statements = vi.spyOn(A.app.get(UnitOfWork).autocommit, 'query');
    try {
      await push(B, q, { n: 1, text: 'é'.repeat(50) });
      expect((await poll).body.items).toEqual([{ n: 1, text: 'é'.repeat(50) }]);
      expect(loads.statesTaken).toBe(taken + 1);
      // Every statement about this queue carries its id (named or not); the background sweeps,
      // which may run at any moment, name no queue.
      const names = statements.mock.calls
        .filter((c) => (c[1] as unknown[] | undefined)?.some((v) => v === q || (Array.isArray(v) && v.includes(q))))
        .map((c) => c[2]);
      expect(names, 'no load, no re-check: the write alone').toEqual(['pushpop_write_turn_basic']);
    } finally {
      statements.mockRestore();
    }
    const empty = await fetch(`${B.url}/queue/${q}/pop`, { method: 'POST' });
    expect(((await empty.json()) as Polled['body']).count, 'taken once').toBe(0);
  });

  it('a state outdated by the time it is used costs another attempt, never a wrong answer', async () => {
    const q = uniqueQueueId('stale');
    const states: string[] = [];
    A.app.get(ItemNotifications).onState((payload) => states.push(payload));
    await push(B, q, { n: 1 });
    expect(await until(() => states.some((p) => decodeQueueState(p)?.queueId === q), 5000), 'the push sent its state').toBe(true);
    const sent = decodeQueueState(states.find((p) => decodeQueueState(p)?.queueId === q)!)!;
    expect(sent.state.front?.entries.map((e) => JSON.parse(e.json) as unknown)).toEqual([{ n: 1 }]);
    // B takes that item and pushes another: the state above is outdated.
    const popped = await fetch(`${B.url}/queue/${q}/pop`, { method: 'POST' });
    expect(((await popped.json()) as Polled['body']).items).toEqual([{ n: 1 }]);
    await push(B, q, { n: 2 });
    const loads = A.app.get(QueueLoads);
    loads.offer(q, sent.state, Date.now());
    const taken = loads.statesTaken;
    const res = await fetch(`${A.url}/queue/${q}/pop?depth=5`, { method: 'POST' });
    expect(((await res.json()) as Polled['body']).items, 'the current item, once').toEqual([{ n: 2 }]);
    expect(loads.statesTaken, 'the outdated state was tried').toBe(taken + 1);

    // Outdated by a lock taken elsewhere: the pop is refused, as it would be from the row.
    await push(B, q, { n: 3 });
    const q3 = states.map((p) => decodeQueueState(p)).findLast((d) => d?.queueId === q);
    const locked = await fetch(`${B.url}/queue/${q}/pop?require_ack=true`, { method: 'POST' });
    expect(locked.status).toBe(200);
    await until(() => states.filter((p) => decodeQueueState(p)?.queueId === q).length >= 3, 5000);
    loads.offer(q, (q3 ?? sent).state, Date.now());
    const refused = await fetch(`${A.url}/queue/${q}/pop`, { method: 'POST' });
    expect(refused.status, 'the lock B holds').toBe(423);
    const stillLocked = await fetch(`${B.url}/queue/${q}`);
    expect(((await stillLocked.json()) as { count: number }).count).toBe(0);
  });

  it('only a write that makes a queue go from no items to some notifies the other processes', async () => {
    const q = uniqueQueueId('transition');
    const notifications = B.app.get(ItemNotifications);
    const received: string[] = [];
    A.app.get(ItemNotifications).onItems((id) => received.push(id));
    const before = notifications.sent;
    for (const n of [1, 2, 3]) await push(B, q, { n });
    // Another queue's transition after them: B sends its notifications in order, so once A has
    // this one, any that the three pushes above sent have arrived too.
    const marker = uniqueQueueId('transition-marker');
    await push(B, marker, { n: 0 });
    expect(await until(() => received.includes(marker), 5000)).toBe(true);
    expect(
      received.filter((id) => id === q),
      'three pushes, one transition',
    ).toEqual([q]);
    expect(await until(() => notifications.sent - before === 2, 5000), 'the queue and the marker').toBe(true);
    const drained = await fetch(`${B.url}/queue/${q}/pop?depth=10`, { method: 'POST' });
    expect(((await drained.json()) as Polled['body']).count).toBe(3);
    await push(B, q, { n: 4 });
    expect(await until(() => notifications.sent - before === 3, 5000), 'empty again, then pushed').toBe(true);
  });

  it('without notifications the re-check finds the item (the fallback)', async () => {
    const notifications = A.app.get(ItemNotifications);
    await notifications.stop();
    expect(notifications.listening).toBe(false);
    const events = A.app.get(QueueEvents);
    const before = events.wakeUps.recheck;
    const q = uniqueQueueId('fallback');
    const poll = longPoll(A, q, 10);
    await pollsWaitingOn(A, q);
    const pushed = await push(B, q, { n: 1 });
    const answer = await poll;
    expect(answer.body.items).toEqual([{ n: 1 }]);
    console.info(`re-check fallback (${databaseKind}): answered ${ms(answer.at - pushed)} after the push`);
    expect(answer.at - pushed).toBeLessThan(3000);
    expect(events.wakeUps.recheck).toBe(before + 1);
  });

  it('services in different schemas of one database do not wake each other', async () => {
    const schema = `wakeups_other_${randomBytes(4).toString('hex')}`;
    other = await startService({ env: { ...sharedDatabase(B), DATABASE_SCHEMA: schema } });
    expect(await until(() => other!.app.get(ItemNotifications).listening, 10_000)).toBe(true);
    const q = uniqueQueueId('schemas');
    const poll = longPoll(other, q, 2);
    await pollsWaitingOn(other, q);
    await push(B, q, { n: 1 });
    const answer = await poll;
    expect(answer.body).toEqual({ items: [], count: 0 });
    const events = other.app.get(QueueEvents);
    expect(events.wakeUps).toEqual({ local: 0, notification: 0, recheck: 0 });
    // and B's item is still there for B
    const res = await fetch(`${B.url}/queue/${q}/pop`, { method: 'POST' });
    expect(((await res.json()) as Polled['body']).items).toEqual([{ n: 1 }]);
  });
});

describe('cross-process wake-ups after the database restarted', () => {
  const serverDir = makeDataDir();
  const database = EmbeddedPostgres.prepare(serverDir);
  let A: TestService;
  let B: TestService;

  beforeAll(async () => {
    await database.start();
    ({ A, B } = await startServicePair({ ownerEnv: { DATABASE_URL: database.url } }));
  }, 120_000);

  afterAll(async () => {
    await closeServicePair({ A, B });
    await database.stop();
    removeDataDir(serverDir);
  });

  it('the listening connection comes back by itself, and wakes long polls within the bound again', async () => {
    const listening = (): boolean => A.app.get(ItemNotifications).listening && B.app.get(ItemNotifications).listening;
    expect(await until(listening, 10_000)).toBe(true);
    expect((await measure(A, B, 3)).at(-1)).toBeLessThan(1000);

    await database.stop();
    await until(() => !A.app.get(ItemNotifications).listening, 5000);
    expect(A.app.get(ItemNotifications).listening).toBe(false);
    // Away for a while (the stimulus): the listening connection retries with its backoff meanwhile.
    await sleep(1500);
    await database.start();
    const back = performance.now();
    expect(await until(listening, 15_000), 'both listening again').toBe(true);
    console.info(`listening again ${ms(performance.now() - back)} after the database was back`);
    // A pool may find out about the restart on its first statement; wait until both answer again.
    for (const svc of [A, B]) {
      for (let i = 0; i < 50; i++) {
        const res = await fetch(`${svc.url}/queue/${uniqueQueueId('probe')}/pop`, { method: 'POST' });
        if (res.status === 200) break;
        await sleep(200);
      }
    }
    const latencies = await measure(A, B, 10);
    console.info(`cross-process wake-up latency after the restart: p50 ${ms(percentile(latencies, 50))}, max ${ms(latencies.at(-1)!)}`);
    expect(latencies.at(-1)).toBeLessThan(1000);
  });
});
