// pg-boss through its own API (`send`, `insert`, `work`), as the client rows use it: on the
// pgboss target's database (the peer created pg-boss's schema there), queues of its own.

import PgBoss from 'pg-boss';
import { setTimeout as sleep } from 'node:timers/promises';
import { ALL_ROWS } from './measure.mjs';

/** pg-boss's options: as bench/peers/pgboss.mjs (a pool of 10, no cron, no maintenance in the background). */
export const BOSS_OPTIONS = { max: 10, schedule: false, supervise: false };
/**
 * Each worker's options. pg-boss 10 has no concurrency option: a worker fetches `batchSize` jobs,
 * runs its handler, then waits out the rest of its polling interval (default 2 s) before it
 * fetches again; concurrency N is N workers (`work()` N times), each a job at a time, polling as
 * often as pg-boss allows (every 0.5 s).
 */
export const WORK_OPTIONS = { batchSize: 1, pollingIntervalSeconds: 0.5 };

/** pg-boss's default schema, where the pgboss peer created its tables. */
const SCHEMA = 'pgboss';

/** The adapter of bench/clients/measure.mjs for pg-boss on the database at `storeUrl`. */
export async function createAdapter({ storeUrl }) {
  const boss = new PgBoss({ connectionString: storeUrl, application_name: 'pushpop-bench-client-pgboss', ...BOSS_OPTIONS });
  const errors = [];
  boss.on('error', (error) => errors.push(String(error?.message ?? error)));
  await boss.start();
  return {
    system: 'pg-boss',
    options: { boss: BOSS_OPTIONS, work: WORK_OPTIONS },
    // no producer that gathers pushes
    rows: ALL_ROWS.filter((row) => row !== 'produce-linger'),
    takeErrors: () => errors.splice(0),
    async newQueue(name) {
      await boss.createQueue(name);
    },
    async dropQueue(name) {
      // offWork() stops the workers without waiting for a fetch in flight
      await boss.offWork(name);
      await sleep(1000);
      // completed jobs stay in the queue's table until maintenance (off here) archives them, and
      // pg-boss cannot delete a queue that still has jobs
      await boss.getDb().executeSql(`DELETE FROM ${SCHEMA}.job WHERE name = $1`, [name]);
      await boss.deleteQueue(name);
    },
    async pushOne(name, item) {
      if (!(await boss.send(name, item))) throw new Error(`send() to ${name} returned no job id`);
    },
    pushBatch: (name, items) => boss.insert(items.map((data) => ({ name, data }))),
    consumer(name, concurrency, { onStart, onDone }) {
      // pg-boss completes a job once its handler returned, and does not wait for that: a job is
      // counted done as its handler returns
      const handler = async (jobs) => {
        for (const job of jobs) onStart(job.data);
        onDone(jobs.length);
      };
      return {
        async start() {
          for (let i = 0; i < concurrency; i++) await boss.work(name, WORK_OPTIONS, handler);
        },
        stop: () => boss.offWork(name),
      };
    },
    async close() {
      await boss.stop({ graceful: true, wait: true, timeout: 10_000 });
    },
  };
}
