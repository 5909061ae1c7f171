#!/usr/bin/env node
// pg-boss behind pushpop's push and pop routes, for the benchmark: one pg-boss queue per queue
// id (created on its first push), push = send(), pop = fetch() + complete(), a pool of 10, cron
// scheduling and maintenance off (no background load).
//
//   node bench/peers/pgboss.mjs --database-url=postgres://postgres@127.0.0.1:5432/pgboss_bench --port=8102
//
// pg-boss hands out the highest priority first; pushpop pops priority 0 first, so priority p is
// sent as pg-boss priority 255 - p. Within a priority pg-boss orders by creation time, then id.
// Queue ids made only of `.`, `:` and `@` (which pg-boss refuses as names) become `q/<id>`.
// Jobs are stored as jsonb (see raw-sql.mjs for what that changes).

import PgBoss from 'pg-boss';
import { createRequire } from 'node:module';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { MAX_PRIORITY, peerOptions, servePeer } from './http-common.mjs';

const { databaseUrl, port, host } = peerOptions('pg-boss peer');
const version = createRequire(import.meta.url)('pg-boss/package.json').version;

const boss = new PgBoss({
  connectionString: databaseUrl,
  max: 10,
  schedule: false, // no cron scheduling (and no timekeeper)
  supervise: false, // no maintenance: no archiving, expiry or monitoring runs in the background
  migrate: true,
  application_name: 'pushpop-bench-pgboss',
});
let errorEvents = 0;
boss.on('error', (error) => {
  errorEvents += 1;
  if (errorEvents <= 20) process.stderr.write(`pg-boss peer: error event: ${error?.message ?? error}\n`);
});
await boss.start();
const db = boss.getDb();

/** The pg-boss queue name of a queue id (pg-boss needs a word character or a hyphen in a name). */
const bossName = (queueId) => (/[\w-]/.test(queueId) ? queueId : `q/${queueId}`);

// Queue creation. pg-boss 10 makes a partition per queue; two create_queue calls at once can
// deadlock each other (40P01), so creations run one at a time, are retried on a deadlock, and a
// push waits for its queue's creation however many pushes ask for it at once.
const created = new Set((await boss.getQueues()).map((q) => q.name));
const creating = new Map();
let creationChain = Promise.resolve();

async function createQueue(name) {
  for (let attempt = 1; attempt <= 5; attempt++) {
    try {
      await boss.createQueue(name);
      return;
    } catch (error) {
      if (error?.code !== '40P01' || attempt === 5) throw error;
      await sleep(20 * attempt);
    }
  }
}

function ensureQueue(name) {
  if (created.has(name)) return null;
  let pending = creating.get(name);
  if (!pending) {
    pending = creationChain.then(() => createQueue(name));
    creationChain = pending.catch(() => undefined);
    creating.set(name, pending);
    pending.then(
      () => {
        created.add(name);
        creating.delete(name);
      },
      () => creating.delete(name),
    );
  }
  return pending;
}

/** Order of the jobs one fetch returned (the UPDATE ... RETURNING behind fetch() has none). */
const fetchOrder = (a, b) => b.priority - a.priority || a.createdOn - b.createdOn || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

await servePeer({
  name: 'pg-boss peer',
  host,
  port,
  describe: `pg-boss ${version}, pool of 10, schedule and supervise off`,
  storage: {
    async push(queueId, _itemJson, item, priority) {
      const name = bossName(queueId);
      const pending = ensureQueue(name);
      if (pending) await pending;
      const id = await boss.send(name, item, { priority: MAX_PRIORITY - priority });
      if (!id) throw new Error(`send() to ${name} returned no job id`);
    },
    async pop(queueId, depth) {
      const name = bossName(queueId);
      // fetch() swallows query errors and answers [] (pg-boss 10): run it through a db wrapper
      // that remembers the error, so an error is never mistaken for an empty queue.
      /** @type {{ error: Error | null }} */
      const failure = { error: null };
      const recording = {
        executeSql: (text, values) =>
          db.executeSql(text, values).catch((error) => {
            failure.error = error instanceof Error ? error : new Error(String(error));
            throw error;
          }),
      };
      const jobs = await boss.fetch(name, { batchSize: depth, includeMetadata: depth > 1, db: recording });
      if (failure.error) throw failure.error;
      if (jobs.length === 0) return [];
      if (jobs.length > 1) jobs.sort(fetchOrder);
      const result = await boss.complete(
        name,
        jobs.map((job) => job.id),
      );
      if (result.affected !== jobs.length) throw new Error(`complete() on ${name} completed ${result.affected} of ${jobs.length} fetched jobs`);
      return jobs.map((job) => job.data);
    },
    async ready() {
      await db.executeSql('SELECT 1');
    },
    async close() {
      await boss.stop({ graceful: true, wait: true, timeout: 10_000 });
    },
  },
});
