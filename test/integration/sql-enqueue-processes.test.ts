import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseProvider } from '../../src/database/database.provider.js';
import { EnqueueCarrier } from '../../src/enqueue/enqueue-carrier.js';
import { buildService, sharedChildDatabase, startChildService, type ChildService, type ServiceBuild } from '../support/child-service.js';
import { drain, range, sleep } from '../support/queue-helpers.js';
import { databaseKind, removeDataDir, startService, type TestService, uniqueQueueId } from '../support/service.js';

/**
 * Rows of `pushpop_enqueue` carried by service processes (`node main.js`) on one database while
 * applications keep committing: a carrier killed with SIGKILL in the middle of carrying, twice,
 * then two carrying at once. Every committed item ends in its queue exactly once, and each
 * writer's items (its transactions commit one after the other) in commit order, call order
 * within a transaction. An in-process service owns the database and reads the queues; its own
 * carrier is stopped.
 */
const WRITERS = 8;
const TRANSACTIONS = 40;
const CALLS = 25;
const QUEUES = 6;
/** A writer's pause between transactions once it has committed {@link TRANSACTIONS}. */
const PACED_MS = 20;

interface Item {
  w: number;
  t: number;
  k: number;
}

describe(`enqueue from SQL carried by several processes (${databaseKind})`, () => {
  let owner: TestService;
  let build: ServiceBuild;
  const children: ChildService[] = [];
  const clients: pg.Client[] = [];

  const start = async (): Promise<ChildService> => {
    const child = await startChildService({ build, dataDir: owner.dataDir, env: sharedChildDatabase(owner.dataDir) });
    children.push(child);
    return child;
  };

  beforeAll(async () => {
    const building = buildService();
    owner = await startService();
    await owner.app.get(EnqueueCarrier).onModuleDestroy();
    build = await building;
  }, 240_000);
  afterAll(async () => {
    for (const client of clients) await client.end().catch(() => undefined);
    for (const child of children) await child.kill('SIGKILL');
    build?.remove();
    await owner?.close();
    if (owner) removeDataDir(owner.dataDir);
  }, 60_000);

  it('a carrier killed while carrying, then two at once: every item exactly once, each writer’s in commit order', async () => {
    const config = owner.app.get(DatabaseProvider).clientConfig('sql-enqueue-writer');
    const connect = async (): Promise<pg.Client> => {
      const client = new pg.Client(config);
      await client.connect();
      clients.push(client);
      return client;
    };
    const queues = range(QUEUES).map((i) => uniqueQueueId(`sqlp-${i}`));
    const probe = await connect();
    const [{ schema }] = (await probe.query<{ schema: string }>('SELECT current_schema() AS schema')).rows;
    /** Whether a carriage holds the schema's carrier lock now. */
    const carrying = async (): Promise<boolean> =>
      (
        await probe.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2
              AND classid::bigint = (hashtext('pushpop_enqueue_carrier')::bigint & 4294967295) AND objid::bigint = (hashtext($1)::bigint & 4294967295)`,
          [schema],
        )
      ).rows[0].n > 0;

    const writers = await Promise.all(range(WRITERS).map(() => connect()));
    /** Transactions each writer has committed: its items are {w, t < committed[w], k}. */
    const committed = range(WRITERS).map(() => 0);
    /**
     * Each writer commits transactions one after the other until `done(w)`; past
     * {@link TRANSACTIONS} it pauses {@link PACED_MS} between them (writes go on only so that
     * carriages go on until the kills are done, however slowly the processes start).
     */
    const write = (done: (w: number) => boolean): Promise<unknown> =>
      Promise.all(
        writers.map(async (db, w) => {
          while (!done(w)) {
            const t = committed[w];
            if (t >= TRANSACTIONS) await sleep(PACED_MS);
            await db.query('BEGIN');
            for (let k = 0; k < CALLS; k++) {
              await db.query('SELECT pushpop_enqueue($1, $2::jsonb)', [queues[(w + t + k) % QUEUES], JSON.stringify({ w, t, k })]);
            }
            await db.query('COMMIT');
            committed[w] = t + 1;
          }
        }),
      );

    // A backlog committed while no carrier runs; then A carries it while the writers go on, and
    // is killed twice in the middle of a carriage (it holds the carrier lock), restarted each
    // time. The writers go on until both kills are done: a carrier that started slowly (it
    // carries from before it answers ready) may have carried all that was written by then.
    await write((w) => committed[w] >= TRANSACTIONS / 2);
    let killed = false;
    const allWritten = write((w) => killed && committed[w] >= TRANSACTIONS);
    let kills = 0;
    let a = await start();
    const killBy = Date.now() + 60_000;
    while (kills < 2 && Date.now() < killBy) {
      if (await carrying()) {
        await a.kill('SIGKILL');
        kills += 1;
        a = await start();
      } else {
        await sleep(1);
      }
    }
    killed = true;
    expect(kills, 'A killed twice while it held the carrier lock').toBe(2);
    // Then A and B carry at once.
    await start();
    await allWritten;
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline && (await probe.query<{ n: number }>('SELECT count(*)::int AS n FROM enqueue_commits')).rows[0].n > 0) await sleep(100);
    expect((await probe.query<{ n: number }>('SELECT count(*)::int AS n FROM enqueued_items')).rows[0].n).toBe(0);

    const seen = new Set<string>();
    let total = 0;
    for (const q of queues) {
      const items = await drain<Item>(owner.http, q, 10_000);
      total += items.length;
      for (const item of items) {
        const key = `${item.w}/${item.t}/${item.k}`;
        expect(seen.has(key), `${key} twice`).toBe(false);
        seen.add(key);
      }
      for (let w = 0; w < WRITERS; w++) {
        const mine = items.filter((i) => i.w === w).map((i) => i.t * CALLS + i.k);
        expect(
          mine.every((v, i) => i === 0 || v > mine[i - 1]),
          `writer ${w} on ${q}: commit order`,
        ).toBe(true);
      }
    }
    expect(total).toBe(committed.reduce((sum, n) => sum + n, 0) * CALLS);
    expect(Math.min(...committed)).toBeGreaterThanOrEqual(TRANSACTIONS);
  }, 240_000);
});
