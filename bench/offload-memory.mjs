// Measures what one queue of N items costs in memory, with offloading (BUFFER_SEGMENTS=1) and
// without it (BUFFER_SEGMENTS as large as the queue's segment count, so no segment is ever far enough from the
// head to move). Runs the built service in this process on a fresh embedded database, pushes N
// items in batches of 1000 through the service, and reports the items the actor holds in
// memory, the growth of the V8 heap and of the process's RSS (both after a full GC), and where
// the rows are.
//
//   npm run build && node bench/offload-memory.mjs [items=100000]
import console from 'node:console';
import { mkdtempSync, rmSync } from 'node:fs';
import process from 'node:process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const items = Number(process.argv[2] ?? 100_000);
const { createApp } = await import('../dist/bootstrap.js');
const { QueueService } = await import('../dist/queue/queue.service.js');
const { ActorRegistry } = await import('../dist/queue/runtime/actor-registry.js');
const { DatabaseProvider } = await import('../dist/database/database.provider.js');
const { DataSource } = await import('typeorm');

const mb = (bytes) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

async function measure(label, bufferSegments) {
  const dataDir = mkdtempSync(join(tmpdir(), 'pushpop-mem-'));
  const app = await createApp({ DATA_DIR: dataDir, BUFFER_SEGMENTS: String(bufferSegments), LOG_LEVEL: 'error' }, false);
  await app.init();
  await app.get(DatabaseProvider).ready;
  const queues = app.get(QueueService);
  const registry = app.get(ActorRegistry);
  const db = app.get(DataSource);
  const queueId = `memory-${bufferSegments}-${Date.now()}`;
  globalThis.gc?.();
  const { heapUsed: heapBefore, rss: rssBefore } = process.memoryUsage();
  let maxInMemory = 0;
  const started = Date.now();
  for (let i = 0; i < items; i += 1000) {
    const batch = Array.from({ length: Math.min(1000, items - i) }, (_, k) => ({ item: { n: i + k, payload: 'x'.repeat(100) } }));
    await queues.pushBatch(queueId, batch);
    maxInMemory = Math.max(maxInMemory, registry.itemsInMemory);
    if ((i / 1000) % 20 === 0) process.stdout.write(`\r[${label}] pushed ${i + batch.length}/${items}`);
  }
  process.stdout.write(`\r[${label}] pushed ${items}/${items} in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  globalThis.gc?.();
  const { heapUsed: heapAfter, rss: rssAfter } = process.memoryUsage();
  const rows = await db.transaction(async (tx) => ({
    inState: Number((await tx.query('SELECT count(*) AS n FROM segment_items WHERE queue_id = $1', [queueId]))[0].n),
    offloadedSegments: Number((await tx.query('SELECT count(*) AS n FROM offloaded_segments WHERE queue_id = $1', [queueId]))[0].n),
  }));
  const info = await queues.getQueue(queueId);
  await app.close();
  rmSync(dataDir, { recursive: true, force: true });
  return {
    label,
    bufferSegments,
    maxItemsInMemory: maxInMemory,
    itemsInMemoryAtEnd: registry.itemsInMemory,
    heapGrowth: mb(heapAfter - heapBefore),
    rssGrowth: mb(rssAfter - rssBefore),
    itemRowsInActorState: rows.inState,
    offloadedSegments: rows.offloadedSegments,
    priority0: info.priorities['0'],
  };
}

const withOffload = await measure('with offloading', 1);
// Without offloading, every segment stays in the actor's state (and its rows in the table); past
// a few hundred thousand items that comparison only takes long, so it is skipped.
const withoutOffload = items <= 200_000 ? [await measure('without offloading', Math.min(1000, Math.ceil(items / 100)))] : [];
console.table(
  [withOffload, ...withoutOffload].map(({ priority0, ...r }) => ({
    ...r,
    offloadedRange: priority0.head_offloaded_segment === null ? '-' : `${priority0.head_offloaded_segment}..${priority0.tail_offloaded_segment}`,
  })),
);
process.exit(0);
