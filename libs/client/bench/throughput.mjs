#!/usr/bin/env node
// Items/s through @pushpop/client against a hand-written loop over the generated client, side
// by side in one run, on a running service:
//   npm run build --workspace=@pushpop/client
//   PUSHPOP_URL=http://127.0.0.1:8000 node libs/client/bench/throughput.mjs [items]
// Producing: Producer.push one at a time awaited in parallel (no batching, then lingerMs 5),
// against a loop of generated `push` calls with the same parallelism. Consuming: a Consumer on an
// exclusive queue (one item at a time) and on a shared queue at concurrency 8 and 32 (a lock per
// item), against as many loops of generated pop(require_ack, depth 1) + acknowledge on a queue of
// the same mode. Handlers do nothing, so this
// measures the client's and the service's overhead per item. Queues are named bench-client-*
// and deleted at the end. Short runs on a shared machine: indicative only.
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import console from 'node:console';
import { setTimeout } from 'node:timers';
import { createPushpopClient } from '../dist/api-client/index.js';
import { PushpopClient } from '../dist/index.js';

const url = process.env.PUSHPOP_URL ?? 'http://127.0.0.1:8000';
const items = Number(process.argv[2] ?? 1000);
const PARALLEL = 64;
const client = new PushpopClient({ baseUrl: url });
const raw = createPushpopClient(url, process.env.PUSHPOP_API_KEY ? { apiKey: process.env.PUSHPOP_API_KEY } : {});
const queues = [];
const queueId = (label) => {
  const id = `bench-client-${label}-${Date.now().toString(36)}`;
  queues.push(id);
  return id;
};

/** Runs `count` calls of `one(i)` with `parallel` in flight; answers items/s. */
async function parallel(count, width, one) {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < count) await one(next++);
    }),
  );
  return count / ((performance.now() - started) / 1000);
}

async function fill(id) {
  for (let i = 0; i < items; i += 1000) {
    await client.queue(id).pushBatch(Array.from({ length: Math.min(1000, items - i) }, (_, k) => ({ item: { n: i + k } })));
  }
}

async function consumeWithConsumer(concurrency, mode) {
  const id = queueId(`consume-${mode}-${concurrency}`);
  await client.queue(id).updateSettings({ lock_mode: mode });
  await fill(id);
  const started = performance.now();
  const consumer = client.consume(id, () => {}, { concurrency, waitSeconds: 1 });
  while (consumer.stats.completed < items) await new Promise((r) => setTimeout(r, 5));
  const rate = items / ((performance.now() - started) / 1000);
  await consumer.close();
  return rate;
}

async function consumeByHand(loops, mode) {
  const id = queueId(`hand-${mode}-${loops}`);
  await client.queue(id).updateSettings({ lock_mode: mode });
  await fill(id);
  const path = { params: { path: { queue_id: id } } };
  let done = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: loops }, async () => {
      while (done < items) {
        const { data } = await raw.POST('/queue/{queue_id}/pop', {
          params: { path: { queue_id: id }, query: { depth: 1, require_ack: true, wait_seconds: 1 } },
        });
        if (!data?.lock_id) continue;
        await raw.POST('/queue/{queue_id}/acknowledge', { ...path, body: { lock_id: data.lock_id } });
        done += data.items.length;
      }
    }),
  );
  return items / ((performance.now() - started) / 1000);
}

const rows = [];
/** Runs both sides twice, alternating (hand, library, library, hand), and keeps the better of each. */
const row = async (what, library, hand) => {
  const h1 = await hand();
  const l1 = await library();
  const l2 = await library();
  const h2 = await hand();
  rows.push({ what, '@pushpop/client (items/s)': Math.round(Math.max(l1, l2)), 'hand-written loop (items/s)': Math.round(Math.max(h1, h2)) });
};

await row(
  `produce, ${PARALLEL} pushes in flight, no batching`,
  () => {
    const producer = client.producer(queueId('produce'));
    return parallel(items, PARALLEL, (n) => producer.push({ n }));
  },
  () => {
    const id = queueId('produce-raw');
    return parallel(items, PARALLEL, (n) => raw.POST('/queue/{queue_id}/push', { params: { path: { queue_id: id } }, body: { item: { n } } }));
  },
);
await row(
  `produce, ${PARALLEL * 16} pushes in flight, lingerMs 5 (hand: push/batch of 1000)`,
  () => {
    const producer = client.producer(queueId('produce-linger'), { lingerMs: 5 });
    return parallel(items * 5, PARALLEL * 16, (n) => producer.push({ n }));
  },
  async () => {
    const id = queueId('produce-raw-batch');
    const started = performance.now();
    for (let i = 0; i < items * 5; i += 1000) {
      await raw.POST('/queue/{queue_id}/push/batch', {
        params: { path: { queue_id: id } },
        body: { items: Array.from({ length: 1000 }, (_, k) => ({ item: { n: i + k } })) },
      });
    }
    return (items * 5) / ((performance.now() - started) / 1000);
  },
);
await row(
  'consume, exclusive queue, one item at a time (hand: one loop of pop depth 1 + acknowledge)',
  () => consumeWithConsumer(1, 'exclusive'),
  () => consumeByHand(1, 'exclusive'),
);
for (const concurrency of [8, 32]) {
  await row(
    `consume, shared queue, concurrency ${concurrency} (hand: ${concurrency} loops of pop depth 1 + acknowledge)`,
    () => consumeWithConsumer(concurrency, 'shared'),
    () => consumeByHand(concurrency, 'shared'),
  );
}
console.table(rows);
for (const id of queues)
  await client
    .queue(id)
    .delete()
    .catch(() => {});
