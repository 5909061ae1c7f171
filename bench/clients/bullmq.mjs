// BullMQ through its own classes (`Queue.add`, `Queue.addBulk`, `Worker`), as the client rows use
// it: on the redis-server the benchmark started for the bullmq-redis target (append-only file,
// fsync every second).

import { Queue, Worker } from 'bullmq';
import { URL } from 'node:url';
import { ALL_ROWS } from './measure.mjs';

/** Every job's options: removed once completed or failed, as bench/peers/bullmq.mjs does (else BullMQ keeps them all). */
export const JOB_OPTIONS = { removeOnComplete: true, removeOnFail: true };
/** The Worker's options besides `concurrency` (the row's): BullMQ's defaults. */
export const WORKER_OPTIONS = {};

/** The adapter of bench/clients/measure.mjs for BullMQ on the Redis at `storeUrl`. */
export async function createAdapter({ storeUrl }) {
  const { hostname, port } = new URL(storeUrl);
  const connection = { host: hostname, port: Number(port) };
  const errors = [];
  const record = (error) => errors.push(String(error?.message ?? error));
  const queues = new Map();
  const queueOf = (name) => {
    let queue = queues.get(name);
    if (!queue) {
      queue = new Queue(name, { connection, defaultJobOptions: JOB_OPTIONS });
      queue.on('error', record);
      queues.set(name, queue);
    }
    return queue;
  };
  return {
    system: 'BullMQ on Redis',
    options: { job: JOB_OPTIONS, worker: WORKER_OPTIONS },
    // no producer that gathers pushes
    rows: ALL_ROWS.filter((row) => row !== 'produce-linger'),
    takeErrors: () => errors.splice(0),
    async newQueue(name) {
      await queueOf(name).waitUntilReady();
    },
    async dropQueue(name) {
      const queue = queueOf(name);
      await queue.obliterate({ force: true });
      await queue.close();
      queues.delete(name);
    },
    pushOne: (name, item) => queueOf(name).add('item', item),
    pushBatch: (name, items) => queueOf(name).addBulk(items.map((data) => ({ name: 'item', data }))),
    async consumer(name, concurrency, { onStart, onDone }) {
      const worker = new Worker(name, async (job) => onStart(job.data), { connection, concurrency, autorun: false, ...WORKER_OPTIONS });
      worker.on('completed', () => onDone(1));
      worker.on('error', record);
      await worker.waitUntilReady();
      return {
        start: () => void worker.run().catch(record),
        stop: () => worker.close(),
      };
    },
    async close() {
      for (const queue of queues.values()) await queue.close();
    },
  };
}
