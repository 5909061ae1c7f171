import { describe, expect, it } from 'vitest';
import { DataSource } from 'typeorm';
import { ItemNotifications } from '../../src/database/item-notifications.js';
import { QueueService } from '../../src/queue/queue.service.js';
import { QueueEvents } from '../../src/queue/runtime/queue-events.js';
import { SweepProbeRepository } from '../../src/storage/sweep-probe.repository.js';
import { range, sleep, until } from '../support/queue-helpers.js';
import { serviceOnPrivateDatabase, uniqueQueueId } from '../support/service.js';

/**
 * Idle costs (next to) nothing: with POLLS long polls waiting on empty queues, no schedules and
 * no other traffic, the service's database commits at most IDLE_TRANSACTIONS_PER_S transactions
 * per second (`xact_commit + xact_rollback` of pg_stat_database over WINDOW_MS, on a PostgreSQL
 * server of the test's own so that nobody else's transactions count; the test's two readings
 * included), and the sweeps, finding nothing to do, send one statement between them per
 * SCHEDULE_SWEEP_INTERVAL_MS (the shortest interval).
 */
const POLLS = 5000;
const WINDOW_MS = 8000;
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

    // Every poll waits up to 20 s, longer than the opening and the window together: none ends in the window.
    const polls = range(POLLS).map(() => queues.pop(uniqueQueueId('idle'), { depth: 1, requireAck: false, ttlSeconds: 30, waitSeconds: 20 }));
    expect(await until(() => events.waiting === POLLS, 10_000), `${POLLS} polls waiting (${events.waiting})`).toBe(true);
    const opened = Date.now();

    // PostgreSQL reports a backend's transactions up to 10 s late after a busy moment; a backend
    // reports everything when it ends. So the service's idle connections are closed first (the
    // pool opens new ones; the listening connection comes back by itself), and what the opening
    // cost is reported before the window.
    await db.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'idle'`);
    await sleep(200);
    expect(await until(() => notifications.listening, 5_000), 'listening again').toBe(true);
    await sleep(500);

    const transactions = async (): Promise<number> => {
      const [row] = await db.query<{ n: string }[]>(
        `SELECT pg_stat_clear_snapshot(), xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = current_database()`,
      );
      return Number(row.n);
    };
    const probes0 = probe.probes;
    const before = await transactions();
    const started = Date.now();
    await sleep(WINDOW_MS);
    // The window ends with the statements of its last moment reported: the reading's own connection
    // reports when it goes idle, the others are closed again.
    await db.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'idle'`);
    await sleep(200);
    const after = await transactions();
    const seconds = (Date.now() - started) / 1000;
    const probes = probe.probes - probes0;
    const perSecond = (after - before) / seconds;
    console.log(
      `idle cost: ${perSecond.toFixed(2)} transactions/s (${after - before} in ${seconds.toFixed(1)} s), ${probes} sweep probes, ${POLLS} polls waiting`,
    );

    expect(Date.now() - opened, 'no poll ended in the window').toBeLessThan(20_000);
    expect(events.waiting).toBe(POLLS);
    expect(perSecond).toBeLessThanOrEqual(IDLE_TRANSACTIONS_PER_S);
    // One probe per 500 ms for all the sweeps (and one for a tick that fell at the edge).
    expect(probes).toBeLessThanOrEqual(Math.ceil((seconds * 1000) / 500) + 1);
    expect(probes, 'the sweeps still ask').toBeGreaterThanOrEqual(Math.floor(WINDOW_MS / 1000));
    // The polls answer empty at shutdown (afterAll).
    void polls;
  }, 120_000);
});
