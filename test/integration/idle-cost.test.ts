import { describe, expect, it } from 'vitest';
import { DataSource } from 'typeorm';
import { CONNECTION_NAMES } from '../../src/database/database.options.js';
import { ItemNotifications } from '../../src/database/item-notifications.js';
import { QueueService } from '../../src/queue/queue.service.js';
import { QueueEvents } from '../../src/queue/runtime/queue-events.js';
import { SweepProbeRepository } from '../../src/storage/sweep-probe.repository.js';
import { range, sleep, until } from '../support/queue-helpers.js';
import { serviceOnPrivateDatabase, uniqueQueueId } from '../support/service.js';

/**
 * Idle costs (next to) nothing: with POLLS consumers long-polling empty queues (each polling
 * again as soon as its poll ends, every WAIT_SECONDS, as a real consumer does), no schedules and
 * no other traffic, the service's database commits at most IDLE_TRANSACTIONS_PER_S transactions
 * per second (`xact_commit + xact_rollback` of pg_stat_database over WINDOW_MS, on a PostgreSQL
 * server of the test's own so that nobody else's transactions count; the test's two readings
 * included), and the sweeps, finding nothing to do, send one statement between them per
 * SCHEDULE_SWEEP_INTERVAL_MS (the shortest interval).
 */
const POLLS = 5000;
const WINDOW_MS = 8000;
/** Shorter than the window: every consumer polls again two or three times in it. */
const WAIT_SECONDS = 3;
const IDLE_TRANSACTIONS_PER_S = 5;

describe(`${POLLS} idle long polls (a private PostgreSQL)`, () => {
  const { service } = serviceOnPrivateDatabase();

  it(`cost at most ${IDLE_TRANSACTIONS_PER_S} database transactions/s, the sweeps one statement per interval between them`, async () => {
    const svc = service();
    const db = svc.app.get(DataSource);
    const events = svc.app.get(QueueEvents);
    const notifications = svc.app.get(ItemNotifications);
    const probe = svc.app.get(SweepProbeRepository);
    const queues = svc.app.get(QueueService);

    let stopping = false;
    let polled = 0;
    const consumer = async (queueId: string): Promise<void> => {
      while (!stopping) {
        const answer = await queues.pop(queueId, { depth: 1, requireAck: false, ttlSeconds: 30, waitSeconds: WAIT_SECONDS });
        expect(answer.items).toEqual([]);
        polled += 1;
      }
    };
    const consumers = range(POLLS).map(() => consumer(uniqueQueueId('idle')));
    // Every consumer's poll registered, nearly all waiting (the first ones may be polling again already).
    expect(await until(() => events.registeredPolls === POLLS && events.waiting >= POLLS * 0.9, 15_000), `${POLLS} polls waiting (${events.waiting})`).toBe(
      true,
    );

    // PostgreSQL reports a backend's transactions up to 10 s late after a busy moment; a backend
    // reports everything when it ends. So the pool's idle connections are closed first (it opens
    // new ones), and what the opening cost is reported before the window. The listening
    // connection is left alone: it sends nothing meanwhile, and a reconnection would make the
    // service forget which queues are known to be empty.
    const closeIdle = `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'idle' AND application_name = '${CONNECTION_NAMES.pool}'`;
    await db.query(closeIdle);
    // Every consumer has polled again once at least: from here on its polls find their queue known empty.
    await sleep(WAIT_SECONDS * 1000 + 500);
    expect(notifications.listening, 'listening all along').toBe(true);

    const transactions = async (): Promise<number> => {
      const [row] = await db.query<{ n: string }[]>(
        `SELECT pg_stat_clear_snapshot(), xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = current_database()`,
      );
      return Number(row.n);
    };
    const probes0 = probe.probes;
    const polled0 = polled;
    const before = await transactions();
    const started = Date.now();
    await sleep(WINDOW_MS);
    // The window ends with the statements of its last moment reported: the pool's connections are closed again.
    await db.query(closeIdle);
    await sleep(200);
    const after = await transactions();
    const seconds = (Date.now() - started) / 1000;
    const probes = probe.probes - probes0;
    const perSecond = (after - before) / seconds;
    const again = polled - polled0;
    console.log(
      `idle cost: ${perSecond.toFixed(2)} transactions/s (${after - before} in ${seconds.toFixed(1)} s), ${probes} sweep probes, ${POLLS} consumers polling again ${again} times`,
    );

    expect(again, 'every consumer polled again in the window').toBeGreaterThanOrEqual(POLLS);
    expect(perSecond).toBeLessThanOrEqual(IDLE_TRANSACTIONS_PER_S);
    // One probe per 500 ms for all the sweeps (and one for a tick that fell at the edge).
    expect(probes).toBeLessThanOrEqual(Math.ceil((seconds * 1000) / 500) + 1);
    expect(probes, 'the sweeps still ask').toBeGreaterThanOrEqual(Math.floor(WINDOW_MS / 1000));
    stopping = true;
    await Promise.all(consumers);
  }, 120_000);
});
