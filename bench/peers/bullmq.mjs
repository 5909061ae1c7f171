#!/usr/bin/env node
// BullMQ behind pushpop's push and pop routes, for the benchmark: what most Node.js users would
// pick instead of pushpop. On Redis (the benchmark starts its own redis-server with
// `--appendonly yes --appendfsync everysec`), or on BullMQ's own PostgreSQL backend
// (`createPostgresBackend`, new in BullMQ 6), chosen by the URL:
//
//   node bench/peers/bullmq.mjs --database-url=redis://127.0.0.1:6390 --port=8104
//   node bench/peers/bullmq.mjs --database-url=postgres://postgres@127.0.0.1:5432/bench_bullmq --port=8105
//
// One BullMQ Queue (and one Worker, which takes jobs) per queue id, created on first use and
// kept. Push = `queue.add()`; pop = `worker.getNextJob(token, { block: false })` then
// `job.moveToCompleted(..., token, false)` per item, the job removed on completion.
//
// Why that pop: BullMQ has no "take and delete" call. Its documented way to take jobs without a
// processor function is manual fetching ("Manually processing jobs" in the BullMQ guide): a
// Worker without a processor, `getNextJob(token)` (one Lua script: the next job, highest
// priority first, moved to active under a lock owned by `token`), then `moveToCompleted(value,
// token, fetchNext)` (one Lua script: the job leaves active; with `removeOnComplete` its hash
// is deleted at once instead of being kept in the completed set). Two round trips per item,
// each an atomic script, written to the append-only file like every other write: the cheapest
// way BullMQ offers that loses no job a response has reported. `block: false` answers an empty
// queue at once (the default blocks on the worker's blocking connection until a job comes);
// `fetchNext` false, or the completion would take (and lock) the next job as well. A worker's
// own loop (`autorun`) is not used: it processes jobs in the background, not when a pop asks.
//
// Workers normally get a dedicated blocking connection each (for waiting on an empty queue: a
// Redis connection, or a PostgreSQL LISTEN connection); these never block, so their backends
// are built without one, and every Queue and Worker shares one ioredis connection (Redis runs
// commands one at a time anyway; ioredis pipelines what the callers send at once), or one `pg`
// pool of 10 on PostgreSQL (BullMQ's tables in the schema `bullmq`, created at start).
//
// Priorities: BullMQ takes the lowest priority number first, but 0 means "no priority" (a plain
// list taken before every prioritized job), so pushpop's priority p is sent as p + 1. Within a
// priority BullMQ is FIFO. Items are a job's data: JSON text on Redis (they come back with their
// key order), jsonb on PostgreSQL (see raw-sql.mjs). Queue ids with `:` are renamed
// (bullmq-names.mjs).

import { DEFAULT_SCHEMA, Queue, Worker, createPostgresBackend, createRedisBackend, runMigrations } from 'bullmq';
import { Redis } from 'ioredis';
import pg from 'pg';
import console from 'node:console';
import { createRequire } from 'node:module';
import process from 'node:process';
import { bullName, BULL_PREFIX } from './bullmq-names.mjs';
import { peerOptions, servePeer } from './http-common.mjs';

const { databaseUrl, port, host } = peerOptions('BullMQ peer', ['redis', 'postgres', 'postgresql']);
const version = createRequire(import.meta.url)('bullmq/package.json').version;
const onRedis = databaseUrl.startsWith('redis://');

let errorEvents = 0;
const onError = (error) => {
  errorEvents += 1;
  if (errorEvents <= 20) console.error(`BullMQ peer: error event: ${error?.message ?? error}`);
};
const connection = onRedis
  ? new Redis(databaseUrl, { connectionName: 'pushpop-bench-bullmq' })
  : // BullMQ uses a pool it is given as it is: its schema must be on the search path
    new pg.Pool({ connectionString: databaseUrl, max: 10, application_name: 'pushpop-bench-bullmq', options: `-c search_path=${DEFAULT_SCHEMA}` });
connection.on('error', onError);
// every BullMQ backend (two per queue id) listens to the shared connection's events
connection.setMaxListeners(0);
if (!onRedis) {
  // BullMQ migrates only a pool it builds itself: create its schema on one session first
  const client = await connection.connect();
  try {
    await runMigrations(client, DEFAULT_SCHEMA);
  } finally {
    client.release();
  }
}

/** The backend, without the dedicated blocking connection a Worker would otherwise open (see above). */
const createBackend = onRedis ? createRedisBackend : createPostgresBackend;
const nonBlocking = (name, opts, options) => createBackend(name, opts, { ...options, withBlockingConnection: false });
/** Options of every Queue and Worker (the key prefix is Redis's; PostgreSQL has its schema). */
const base = onRedis ? { connection, prefix: BULL_PREFIX } : { connection };

// Ready before serving (a backend checks the server and BullMQ's schema on its first use).
const probe = new Queue('pushpop-bench-probe', base, nonBlocking);
probe.on('error', onError);
await probe.waitUntilReady();
await probe.close();

/** queue id → its Queue and Worker, created on first use. */
const queues = new Map();

function queueOf(queueId) {
  let entry = queues.get(queueId);
  if (!entry) {
    const name = bullName(queueId);
    const queue = new Queue(name, { ...base, defaultJobOptions: { removeOnComplete: true, removeOnFail: true } }, nonBlocking);
    const worker = new Worker(name, null, { ...base, autorun: false }, nonBlocking);
    queue.on('error', onError);
    worker.on('error', onError);
    entry = { queue, worker };
    queues.set(queueId, entry);
  }
  return entry;
}

let tokens = 0;

await servePeer({
  name: 'BullMQ peer',
  host,
  port,
  describe: `BullMQ ${version} on ${onRedis ? `Redis, one shared connection` : 'PostgreSQL, a pool of 10'}`,
  storage: {
    async push(queueId, _itemJson, item, priority) {
      const job = await queueOf(queueId).queue.add('item', item, { priority: priority + 1 });
      if (!job?.id) throw new Error(`add() to ${queueId} returned no job id`);
    },
    async pop(queueId, depth) {
      const { worker } = queueOf(queueId);
      // the lock token of this pop's jobs: unique per pop
      const token = `pop-${process.pid}-${++tokens}`;
      const items = [];
      while (items.length < depth) {
        const job = await worker.getNextJob(token, { block: false });
        if (!job) break;
        await job.moveToCompleted(null, token, false);
        items.push(job.data);
      }
      return items;
    },
    async ready() {
      if (onRedis) await connection.ping();
      else await connection.query('SELECT 1');
    },
    async close() {
      for (const { queue, worker } of queues.values()) {
        await worker.close();
        await queue.close();
      }
      if (onRedis) await connection.quit();
      else await connection.end();
    },
  },
});
