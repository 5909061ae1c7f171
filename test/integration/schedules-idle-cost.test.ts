import { describe, expect, it } from 'vitest';
import { DataSource } from 'typeorm';
import { ScheduleRule } from '../../src/schedules/schedule-rule.js';
import { answer, sleep } from '../support/queue-helpers.js';
import { serviceOnPrivateDatabase } from '../support/service.js';

/**
 * What idle schedules cost: 10,000 schedules none of which is due add at most 2 committed
 * database transactions per second to what the same service commits without them (measured
 * as `xact_commit` of pg_stat_database over WINDOW_MS, on a PostgreSQL server of the test's own
 * so that nobody else's transactions count), and the sweep's probe for due schedules reads the
 * partial index on `next_run_at`, not the table.
 */
const WINDOW_MS = Number(process.env.SCHEDULE_IDLE_WINDOW_MS ?? 10_000);
const SCHEDULES = 10_000;

describe('10,000 idle schedules (a private PostgreSQL)', () => {
  const { service } = serviceOnPrivateDatabase();

  /** Transactions committed in the service's database per second over WINDOW_MS. */
  async function commitsPerSecond(db: DataSource): Promise<number> {
    const read = async (): Promise<number> => {
      const [row] = await db.query<{ xact_commit: string }[]>(
        `SELECT pg_stat_clear_snapshot(), xact_commit FROM pg_stat_database WHERE datname = current_database()`,
      );
      return Number(row.xact_commit);
    };
    const before = await read();
    await sleep(WINDOW_MS);
    return ((await read()) - before) / (WINDOW_MS / 1000);
  }

  it(`${SCHEDULES} schedules not due cost at most 2 transactions/s more than none, and the due probe is an index scan`, async () => {
    const svc = service();
    const db = svc.app.get(DataSource);
    // Settle: the first sweeps after the start have run.
    await sleep(2000);
    const without = await commitsPerSecond(db);

    const cron = '0 0 1 1 *';
    const next = ScheduleRule.of(cron, 'UTC').nextAfter(Date.now())!;
    // A few through the API as a user makes them, the rest in one statement.
    for (let i = 0; i < 10; i++)
      expect((await answer(svc.http.put(`/schedules/idle-api-${i}`).send({ queue_id: 'idle', cron, item: { i } }))).status).toBe(200);
    await db.query(
      `INSERT INTO schedules (schedule_id, queue_id, cron, timezone, item, priority, paused, next_run_at)
       SELECT 'idle-' || g, 'idle', $1, 'UTC', '{}', 0, g % 10 = 0, CASE WHEN g % 10 = 0 THEN NULL ELSE to_timestamp($2 / 1000.0) END
         FROM generate_series(1, $3::int - 10) g`,
      [cron, next, SCHEDULES],
    );
    await db.query('ANALYZE schedules');
    expect(Number((await db.query<{ n: string }[]>('SELECT count(*) AS n FROM schedules'))[0].n)).toBe(SCHEDULES);
    await sleep(1000);
    const withSchedules = await commitsPerSecond(db);
    console.log(
      `idle cost: ${without.toFixed(2)} transactions/s without schedules, ${withSchedules.toFixed(2)} with ${SCHEDULES} (over ${WINDOW_MS / 1000} s each)`,
    );
    expect(withSchedules - without).toBeLessThanOrEqual(2);

    const [{ 'QUERY PLAN': plan }] = await db.query<{ 'QUERY PLAN': unknown }[]>(
      `EXPLAIN (FORMAT JSON) SELECT schedule_id FROM schedules WHERE NOT paused AND next_run_at <= now() ORDER BY next_run_at LIMIT 100`,
    );
    const text = JSON.stringify(plan);
    expect(text).toContain('IDX_schedules_next_run');
    expect(text).not.toContain('Seq Scan');
    const nothingDue = await answer(svc.http.get('/queue/idle'));
    expect(nothingDue.status, 'nothing fired').toBe(404);
  }, 120_000);
});
