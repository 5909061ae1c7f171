// pushpop through its own client library, @pushpop/client (`Producer`, `pushBatch`, `Consumer`),
// as the client rows use it: the build of BENCH_PUSHPOP_DIR (libs/client/dist), against the
// pushpop target's HTTP.

import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ALL_ROWS } from './measure.mjs';

/**
 * The Consumer's options in every pushpop row, besides `concurrency` and `lockMode` (the row's).
 * Everything else is the client's default: on a service with per-item locks, a shared queue's
 * items are prefetched and acknowledged in batches, an exclusive queue's acknowledged with `next`. `waitSeconds` 1 only so that
 * `close()` at the end of a row is quick (it lets a long poll in flight finish); while a row
 * runs, items are there or come far more often than that.
 */
export const CONSUMER_OPTIONS = { waitSeconds: 1 };
/** The Producer of single pushes: the client's defaults (pushes made while a request is in flight share the next one). */
export const PRODUCER_OPTIONS = {};
/** The Producer of the lingering row. */
export const LINGER_PRODUCER_OPTIONS = { lingerMs: 5 };

/** The adapter of bench/clients/measure.mjs for pushpop in `lockMode` (`exclusive`, the default, or `shared`). */
export async function createAdapter({ url, pushpopDir, lockMode }) {
  const { PushpopClient } = await import(pathToFileURL(join(pushpopDir, 'libs/client/dist/index.js')).href);
  const client = new PushpopClient({ baseUrl: url });
  const errors = [];
  const producers = new Map();
  const producerOf = (queue) => {
    let producer = producers.get(queue);
    if (!producer) producers.set(queue, (producer = client.producer(queue, PRODUCER_OPTIONS)));
    return producer;
  };
  return {
    system: `pushpop (${lockMode})`,
    options: { consumer: CONSUMER_OPTIONS, producer: PRODUCER_OPTIONS, linger_producer: LINGER_PRODUCER_OPTIONS, lock_mode: lockMode },
    rows: ALL_ROWS,
    takeErrors: () => errors.splice(0),
    /** HTTP requests the client made so far, retries included. */
    requests: () => client.requests,
    async newQueue(queue) {
      if (lockMode !== 'exclusive') await client.queue(queue).updateSettings({ lock_mode: lockMode });
    },
    async dropQueue(queue) {
      producers.delete(queue);
      await client.queue(queue).delete();
    },
    pushOne: (queue, item) => producerOf(queue).push(item),
    lingeringPusher(queue) {
      const producer = client.producer(queue, LINGER_PRODUCER_OPTIONS);
      return (item) => producer.push(item);
    },
    pushBatch: (queue, items) => client.queue(queue).pushBatch(items.map((item) => ({ item }))),
    consumer(queue, concurrency, { onStart, onDone }) {
      let consumer = null;
      return {
        start() {
          consumer = client.consume(queue, ({ item }) => onStart(item), { ...CONSUMER_OPTIONS, concurrency, lockMode });
          consumer.on('completed', () => onDone(1));
          consumer.on('error', (error) => errors.push(String(error?.message ?? error)));
        },
        stop: () => consumer?.close(),
      };
    },
    async close() {},
  };
}
