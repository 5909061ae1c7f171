#!/usr/bin/env node
// BullMQ behind pushpop's push and pop routes, for the benchmark: what most Node.js users would
// pick instead of pushpop. On Redis (the benchmark starts its own redis-server with
// `--appendonly yes --appendfsync everysec`):
//
//   node bench/peers/bullmq.mjs --database-url=redis://127.0.0.1:6390 --port=8104
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
// Workers normally get a dedicated blocking Redis connection each (for waiting on an empty
// queue); these never block, so their backends are built without one, and every Queue and
// Worker shares one ioredis connection (Redis runs commands one at a time anyway; ioredis
// pipelines what the callers send at once).
//
// Priorities: BullMQ takes the lowest priority number first, but 0 means "no priority" (a plain
// list taken before every prioritized job), so pushpop's priority p is sent as p + 1. Within a
// priority BullMQ is FIFO. Items are stored as JSON text (jobs' data), so they come back with
// their key order; queue ids with `:` are renamed (bullmq-names.mjs).

import { Queue, Worker, createRedisBackend } from 'bullmq';
import { Redis } from 'ioredis';
import console from 'node:console';
import { createRequire } from 'node:module';
import process from 'node:process';
import { bullName, BULL_PREFIX } from './bullmq-names.mjs';
import { peerOptions, servePeer } from './http-common.mjs';

const { databaseUrl, port, host } = peerOptions('BullMQ peer', ['redis']);
const version = createRequire(import.meta.url)('bullmq/package.json').version;

const connection = new Redis(databaseUrl, { connectionName: 'pushpop-bench-bullmq' });
let errorEvents = 0;
const onError = (error) => {
  errorEvents += 1;
  if (errorEvents <= 20) console.error(`BullMQ peer: error event: ${error?.message ?? error}`);
};
connection.on('error', onError);
await connection.ping();

/** The Redis backend, without the dedicated blocking connection a Worker would otherwise open (see above). */
const nonBlocking = (name, opts, options) => createRedisBackend(name, opts, { ...options, withBlockingConnection: false });

/** queue id → its Queue and Worker, created on first use. */
const queues = new Map();

function queueOf(queueId) {
  let entry = queues.get(queueId);
  if (!entry) {
    const name = bullName(queueId);
    const queue = new Queue(name, { connection, prefix: BULL_PREFIX, defaultJobOptions: { removeOnComplete: true, removeOnFail: true } });
    const worker = new Worker(name, null, { connection, prefix: BULL_PREFIX, autorun: false }, nonBlocking);
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
  describe: `BullMQ ${version} on ${databaseUrl}, one shared connection`,
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
      await connection.ping();
    },
    async close() {
      for (const { queue, worker } of queues.values()) {
        await worker.close();
        await queue.close();
      }
      await connection.quit();
    },
  },
});
