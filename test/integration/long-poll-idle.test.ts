import { afterAll, afterEach, beforeAll, describe, expect, it, vi, type MockInstance } from 'vitest';
import { ItemNotifications } from '../../src/database/item-notifications.js';
import { UnitOfWork } from '../../src/database/unit-of-work.js';
import { DedupSweeper } from '../../src/dedup/dedup-sweeper.js';
import { DelaySweeper } from '../../src/delay/delay-sweeper.js';
import { LockSweeper } from '../../src/lock/lock-sweeper.js';
import { QueueEvents } from '../../src/queue/runtime/queue-events.js';
import { QueueService, type PopOptions } from '../../src/queue/queue.service.js';
import { ActorRegistry } from '../../src/queue/runtime/actor-registry.js';
import { QueueWakeUps } from '../../src/queue/runtime/queue-wake-ups.js';
import { timeTravel } from '../support/lock-helpers.js';
import { range, sleep, until } from '../support/queue-helpers.js';
import { ScheduleSweeper } from '../../src/schedules/schedule-sweeper.js';
import { EnqueueCarrier } from '../../src/enqueue/enqueue-carrier.js';
import { databaseKind, removeDataDir, startService, type TestService, uniqueQueueId } from '../support/service.js';

/**
 * Idle consumers cost nothing: long polls waiting on empty queues send no statement of their
 * own while nothing arrives; a re-check is one statement for all of them; at most
 * MAX_WAITING_POLLS wait, the next answers at once; at shutdown all answer at once.
 */
const POLLS = 200;
const waitFor = (seconds: number): PopOptions => ({ depth: 1, requireAck: false, ttlSeconds: 30, waitSeconds: seconds });

describe(`long polls that wait without polling the database (${databaseKind})`, () => {
  let svc: TestService;
  let queues: QueueService;
  let events: QueueEvents;
  let statements: MockInstance<(text: string, values?: readonly unknown[], name?: string) => Promise<unknown[]>>;
  let transactions: MockInstance<UnitOfWork['transaction']> | undefined;
  let closed = false;

  beforeAll(async () => {
    svc = await startService({ env: { MAX_WAITING_POLLS: String(POLLS) } });
    // Their statements would be counted below; nothing here needs lock expiry, delayed items, dedup ids or schedules.
    for (const sweeper of [LockSweeper, DelaySweeper, DedupSweeper, ScheduleSweeper, EnqueueCarrier])
      await svc.app.get<{ onModuleDestroy(): Promise<void> }>(sweeper).onModuleDestroy();
    queues = svc.app.get(QueueService);
    events = svc.app.get(QueueEvents);
    expect(await until(() => svc.app.get(ItemNotifications).listening, 10_000)).toBe(true);
  });
  afterAll(async () => {
    if (!closed) await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  /** Counts every statement the service sends outside a transaction, and the transactions (none expected). */
  const countStatements = (): void => {
    const uow = svc.app.get(UnitOfWork);
    statements = vi.spyOn(uow.autocommit, 'query');
    transactions = vi.spyOn(uow, 'transaction');
  };
  afterEach(() => {
    const locked = transactions?.mock.calls.length ?? 0;
    transactions = undefined;
    vi.restoreAllMocks();
    expect(locked, 'turns under the row lock').toBe(0);
  });

  /** Starts `n` long polls on fresh queues and resolves once all of them wait (their first look done). */
  async function startPolls(n: number, seconds: number): Promise<{ ids: string[]; answers: Promise<{ items: unknown[] }>[] }> {
    const ids = range(n).map(() => uniqueQueueId('idle'));
    const answers = ids.map((id) => queues.pop(id, waitFor(seconds)));
    expect(await until(() => events.waitingQueues().length === n, 20_000), `${n} polls waiting`).toBe(true);
    return { ids, answers };
  }

  it(`${POLLS} polls waiting on empty queues: no statement of their own, one re-check for all, one turn for the one woken, none when their wait ends`, async () => {
    const { ids, answers } = await startPolls(POLLS, 4);
    countStatements();
    // Nothing may be sent meanwhile: watched for 1.5 s. Listening for notifications, the safety re-check comes every 5 s at most.
    await sleep(1500);
    expect(statements.mock.calls.length, `statements while ${POLLS} polls waited 1.5 s`).toBeLessThanOrEqual(1);
    statements.mockClear();

    await svc.app.get(QueueWakeUps).recheck();
    expect(statements, 'one re-check statement for all the waiting polls').toHaveBeenCalledTimes(1);
    expect(statements.mock.calls[0][1]).toEqual([expect.arrayContaining(ids)]);
    statements.mockClear();

    await queues.push(ids[7], { n: 7 }, 0);
    expect(await answers[7]).toEqual({ items: [{ n: 7 }], count: 1 });
    expect(statements.mock.calls.length, 'the push, then the woken poll in one ordinary turn').toBeLessThanOrEqual(3);
    expect(events.waiting).toBe(POLLS - 1);
    statements.mockClear();

    const rest = await Promise.all(answers.filter((_, i) => i !== 7));
    expect(rest.every((a) => a.items.length === 0)).toBe(true);
    expect(statements.mock.calls.filter(([text]) => !String(text).includes('item_count > 0')).length, 'no turn when a wait ends with nothing').toBe(0);
    expect(events.waiting).toBe(0);
  });

  it(`opening ${POLLS} long polls on empty queues: their first looks share a few statements, no turn each`, async () => {
    countStatements();
    const { answers } = await startPolls(POLLS, 2);
    const names = statements.mock.calls.map(([, , name]) => name);
    const looks = names.filter((name) => name === 'pushpop_queues_to_pop_from').length;
    expect(looks, 'first-look statements').toBeGreaterThanOrEqual(1);
    expect(looks).toBeLessThanOrEqual(5);
    expect(
      names.filter((name) => name !== 'pushpop_queues_to_pop_from' && name !== 'pushpop_queues_with_items'),
      'no turn',
    ).toEqual([]);
    expect((await Promise.all(answers)).every((a) => a.items.length === 0)).toBe(true);
  });

  it(`${POLLS} consumers polling again after waiting in vain: no first look, no statement; a queue pushed to meanwhile is looked at and answers at once`, async () => {
    const ids = range(POLLS).map(() => uniqueQueueId('again'));
    expect((await Promise.all(ids.map((id) => queues.pop(id, waitFor(1))))).every((a) => a.items.length === 0)).toBe(true);
    countStatements();
    const again = ids.map((id) => queues.pop(id, waitFor(1)));
    expect(await until(() => events.waiting === POLLS, 5_000), 'all waiting again').toBe(true);
    expect(
      statements.mock.calls.filter(([, , name]) => name !== 'pushpop_queues_with_items'),
      'no first look: nothing woke these queues since their polls waited in vain',
    ).toEqual([]);
    expect((await Promise.all(again)).every((a) => a.items.length === 0)).toBe(true);
    // A push (here, through this process; from another, its notification) wakes the queue: the next poll looks and takes it.
    await queues.push(ids[3], { n: 3 }, 0);
    const started = Date.now();
    expect(await queues.pop(ids[3], waitFor(5))).toEqual({ items: [{ n: 3 }], count: 1 });
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('a long poll takes at once what its queue holds, also with no actor in memory: items, due delayed items', async () => {
    const registry = svc.app.get(ActorRegistry);
    const held = uniqueQueueId('held');
    await queues.push(held, { n: 1 }, 0);
    const delayed = uniqueQueueId('due');
    await queues.push(delayed, { n: 2 }, 0, { delaySeconds: 1 });
    registry.deactivate(held);
    registry.deactivate(delayed);
    const started = Date.now();
    expect(await queues.pop(held, waitFor(5))).toEqual({ items: [{ n: 1 }], count: 1 });
    // The delay ends (on the service's clock).
    timeTravel(svc.app).advance(1100);
    registry.deactivate(delayed);
    // The delay sweep is stopped in this file: only the poll's own turn moves the due item.
    expect(await queues.pop(delayed, waitFor(5))).toEqual({ items: [{ n: 2 }], count: 1 });
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it('without notifications, one re-check every 500 ms at most, for all the waiting polls together', async () => {
    const notifications = svc.app.get(ItemNotifications);
    const { answers } = await startPolls(POLLS, 3);
    await notifications.stop();
    countStatements();
    await sleep(2000);
    const calls = statements.mock.calls.length;
    expect(calls, `statements in 2 s`).toBeGreaterThanOrEqual(2);
    expect(calls).toBeLessThanOrEqual(5);
    expect(statements.mock.calls.every(([text]) => String(text).includes('item_count > 0'))).toBe(true);
    await Promise.all(answers);
    // back to listening for the tests below
    notifications.start();
    expect(await until(() => notifications.listening, 10_000)).toBe(true);
  });

  it('a long poll on a queue locked pending acknowledgement answers 423 at once, as any pop; once acknowledged it waits again', async () => {
    const q = uniqueQueueId('locked');
    await svc.http.post(`/queue/${q}/push`).send({ item: { n: 1 } });
    const lock = await svc.http.post(`/queue/${q}/pop?require_ack=true&ttl_seconds=30`);
    expect(lock.body.locked).toBe(true);
    const started = Date.now();
    const locked = await svc.http.post(`/queue/${q}/pop?wait_seconds=10`);
    expect(locked.status).toBe(423);
    expect(locked.body.error_code).toBe('QUEUE_LOCKED');
    expect(Date.now() - started).toBeLessThan(2000);
    expect(events.registeredPolls).toBe(0);
    await svc.http.post(`/queue/${q}/acknowledge`).send({ lock_id: lock.body.lock_id as string });
    const poll = svc.http.post(`/queue/${q}/pop?wait_seconds=10&require_ack=true`).then((res) => res.body as { items: unknown[]; locked: boolean });
    expect(await until(() => events.waitingQueues().includes(q), 5000)).toBe(true);
    await svc.http.post(`/queue/${q}/push`).send({ item: { n: 2 } });
    expect(await poll).toMatchObject({ items: [{ n: 2 }], locked: true });
  });

  it('a long poll whose client went away stops waiting, and takes nothing pushed afterwards', async () => {
    const q = uniqueQueueId('gone');
    const client = new AbortController();
    const poll = fetch(`${svc.url}/queue/${q}/pop?wait_seconds=10`, { method: 'POST', signal: client.signal }).catch(() => 'aborted');
    expect(await until(() => events.waitingQueues().includes(q), 5000)).toBe(true);
    client.abort();
    expect(await poll).toBe('aborted');
    expect(await until(() => events.waiting === 0 && events.registeredPolls === 0, 5000), 'the poll is gone').toBe(true);
    await queues.push(q, { n: 1 }, 0);
    expect(await queues.pop(q, waitFor(0))).toEqual({ items: [{ n: 1 }], count: 1 });
  });

  it('a long poll whose client has gone takes no item and makes no lock, also when it left during the turn that took them', async () => {
    const q = uniqueQueueId('gone-ack');
    await queues.push(q, { n: 1 }, 0);
    const gone = new AbortController();
    gone.abort();
    const polled = { ...waitFor(10), requireAck: true };
    expect(await queues.pop(q, polled, gone.signal)).toMatchObject({ items: [], locked: false });
    // Gone while its turn took the item (the signal reads "not aborted" once: where the turn
    // takes items): the lock made then is released at once, and the item is back at the front.
    let reads = 0;
    const leavesDuringTurn = {
      get aborted() {
        return reads++ > 0;
      },
      addEventListener() {},
      removeEventListener() {},
    } as unknown as AbortSignal;
    expect(await queues.pop(q, polled, leavesDuringTurn)).toMatchObject({ items: [], locked: false });
    expect(reads).toBeGreaterThan(1);
    const info = await queues.getQueue(q);
    expect({ count: info.count, lock: info.lock, delayed: info.delayed }).toEqual({ count: 1, lock: null, delayed: 0 });
    expect(await queues.pop(q, waitFor(0))).toEqual({ items: [{ n: 1 }], count: 1 });
  });

  it(`past MAX_WAITING_POLLS (${POLLS}) a long poll answers at once, counted; once one answered, polls wait again`, async () => {
    const { ids, answers } = await startPolls(POLLS, 10);
    const started = Date.now();
    const refused = await svc.http.post(`/queue/${uniqueQueueId('refused')}/pop?wait_seconds=10`);
    expect(refused.body).toEqual({ items: [], count: 0 });
    expect(Date.now() - started).toBeLessThan(2000);
    const metrics = (await svc.http.get('/metrics')).text;
    expect(metrics).toMatch(/^pushpop_long_polls_refused_total 1$/m);
    expect(metrics).toMatch(new RegExp(`^pushpop_long_polls_waiting ${POLLS}$`, 'm'));
    expect(metrics).toMatch(/^pushpop_notifications_listening 1$/m);

    // A push that is waited on frees a place.
    await svc.http.post(`/queue/${ids[0]}/push`).send({ item: { n: 0 } });
    expect(await answers[0]).toEqual({ items: [{ n: 0 }], count: 1 });
    const q = uniqueQueueId('admitted');
    const admitted = svc.http.post(`/queue/${q}/pop?wait_seconds=10`).then((res) => res.body as unknown);
    expect(await until(() => events.waitingQueues().includes(q), 5000)).toBe(true);
    await svc.http.post(`/queue/${q}/push`).send({ item: { n: 1 } });
    expect(await admitted).toEqual({ items: [{ n: 1 }], count: 1 });
    expect((await svc.http.get('/metrics')).text).toMatch(/^pushpop_long_poll_wake_ups_total\{cause="local"\} [1-9]\d*$/m);

    // Shutdown answers every waiting poll at once, without a turn each.
    countStatements();
    const closing = Date.now();
    const closedService = svc.close();
    closed = true;
    const rest = await Promise.all(answers.slice(1));
    expect(Date.now() - closing, 'answered at shutdown').toBeLessThan(2000);
    expect(rest.every((a) => a.items.length === 0)).toBe(true);
    expect(statements).not.toHaveBeenCalled();
    await closedService;
  });
});
