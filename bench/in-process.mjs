// The service's own CPU per operation without HTTP: QueueService driven in-process by several
// callers, so that a change to the engine can be judged apart from the HTTP stack and the load
// generator (which share the machine's cores in `npm run bench`).
//
//   npm run build && node bench/in-process.mjs --db=<database> [--op=push|pop|hot|ack-next|shared-batch] [--callers=64]
//     [--queues=1000] [--seconds=8] [--rounds=3] [--write=none|values] [--statements] [--alloc] [--ops=N] [--batch=90]
//
// Builds the app from dist/ on postgres://postgres@127.0.0.1:5432/<database> (dropped and made
// again: use a scratch database), warms up for 2 s, then reports per round: operations/s and the
// process's CPU µs per operation (user and system, from process.cpuUsage; PostgreSQL's work is in
// its own processes). `push` pushes 200-byte items to random queues; `pop` first fills every
// queue, then pops one item at a time; `hot` pushes and pops one queue; `ack-next` is an exclusive
// queue's consumer acknowledging each item with `next` (one operation per item), one queue per
// caller (--callers=1: the one consumer of `POST /queue/q/acknowledge {"next":{}}`);
// `shared-batch` is the Consumer's steady state on one shared queue: each caller acknowledges the
// --batch per-item locks it holds and takes as many again in the same turn
// (`acknowledge/batch` with `next.lock_per_item`), and the figures are per item, not per operation.
// Run it under `node --cpu-prof` for a profile of the engine alone.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import console from 'node:console';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { arg } from './common/args.mjs';

const db = arg('db', '');
if (!db) {
  console.error('--db=<scratch database> is required (it is dropped and made again)');
  process.exit(2);
}
const op = arg('op', 'push');
const callers = Number(arg('callers', '64'));
const queues = op === 'hot' || op === 'shared-batch' ? 1 : op === 'ack-next' ? callers : Number(arg('queues', '1000'));
const batch = Number(arg('batch', '90'));
const seconds = Number(arg('seconds', '8'));
const rounds = Number(arg('rounds', '3'));
// --ops=N: each round runs N operations instead of --seconds (for instruction counts, e.g. under
// `valgrind --tool=callgrind`, where time means little).
const fixedOps = Number(arg('ops', '0'));
// --write=none|values: the turn statement is not sent, and every turn's write is taken as applied
// at once (`values`: after building the statement's values, as a real write does first). What is
// left is the engine's JavaScript alone; the difference from a run without it is what the
// database round trips cost this process (driver, socket, and the garbage of turns kept alive
// across them). Nothing is stored, so only `push` makes sense with it.
const writeStub = arg('write', '');
if (writeStub && !['none', 'values'].includes(writeStub)) {
  console.error('--write must be none or values');
  process.exit(2);
}
if (writeStub && op !== 'push') {
  console.error('--write only goes with --op=push (nothing is stored, so there is nothing to pop)');
  process.exit(2);
}

const psql = (sql) => execFileSync('psql', ['-q', '-h', '127.0.0.1', '-U', 'postgres', '-d', 'postgres', '-c', sql]);
psql(`DROP DATABASE IF EXISTS "${db}"`);
psql(`CREATE DATABASE "${db}"`);
process.env.DATABASE_URL = `postgres://postgres@127.0.0.1:5432/${db}`;
process.env.LOG_LEVEL ??= 'warn';

// --statements: also count, per operation, the statements sent by the service, by their first words.
const statements = process.argv.includes('--statements') ? new Map() : null;
if (statements) {
  const { default: pg } = await import('pg');
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function (config, ...rest) {
    const text = typeof config === 'string' ? config : config?.text;
    if (text) {
      const key = text.replace(/\s+/g, ' ').slice(0, 90);
      statements.set(key, (statements.get(key) ?? 0) + 1);
    }
    return query.call(this, config, ...rest);
  };
}

const { createApp } = await import('../dist/bootstrap.js');
const { DatabaseProvider } = await import('../dist/database/database.provider.js');
const { QueueService } = await import('../dist/queue/queue.service.js');
const app = await createApp({}, false);
await app.init();
await app.get(DatabaseProvider).ready;
const service = app.get(QueueService);
const locks = op === 'ack-next' || op === 'shared-batch' ? app.get((await import('../dist/queue/queue-locks.service.js')).QueueLocksService) : undefined;
if (writeStub) {
  const { QueueStateRepository } = await import('../dist/storage/queue-state.repository.js');
  const { writeTurnValues } = await import('../dist/database/functions/write-turn.parameters.js');
  app.get(QueueStateRepository).writeTurn =
    writeStub === 'values' ? (queueId, write) => Promise.resolve(writeTurnValues(queueId, write).length > 0) : () => Promise.resolve(true);
}

const payload = 'x'.repeat(150);
let seq = 0;
const queueId = (i) => `inproc-${i % queues}`;
const push = () => service.push(queueId(Math.floor(Math.random() * queues)), { seq: ++seq, payload }, Math.floor(Math.random() * 3));
let popCursor = 0;
const popOptions = { depth: 1, requireAck: false, ttlSeconds: 30, waitSeconds: 0 };
const pop = () => service.pop(queueId(popCursor++), popOptions);
const hot = () => (Math.random() < 0.5 ? service.push(queueId(0), { seq: ++seq, payload }, 0) : service.pop(queueId(0), {}));
// Each caller's lock id, on its own queue: the lock its last acknowledgement's `next` took.
const lockIds = [];
const ackNext = async (caller) => {
  const answer = await locks.acknowledge(queueId(caller), lockIds[caller], {});
  lockIds[caller] = answer.next.lock_id;
};
// Each caller's per-item locks on the one shared queue: those its last acknowledgement's `next` took.
const held = [];
const sharedNext = { depth: batch, lockPerItem: true, ttlSeconds: 30 };
const sharedBatch = async (caller) => {
  const answer = await locks.acknowledgeBatch(queueId(0), held[caller], sharedNext);
  held[caller] = answer.next.lock_ids;
};
const operation = { push, pop, hot, 'ack-next': ackNext, 'shared-batch': sharedBatch }[op];
if (!operation) throw new Error(`--op must be push, pop, hot, ack-next or shared-batch, not ${op}`);
/** Items one operation moves: the figures are per item. */
const itemsPerOp = op === 'shared-batch' ? batch : 1;
const unit = itemsPerOp > 1 ? 'item' : 'op';

// --alloc: sample the allocations of each round (also of objects already collected) and print the
// functions that allocated most, in bytes per operation.
const sampling = process.argv.includes('--alloc') ? new (await import('node:inspector')).Session() : null;
const post = (method, params) => new Promise((resolve, reject) => sampling.post(method, params, (e, r) => (e ? reject(e) : resolve(r))));
if (sampling) {
  sampling.connect();
  await post('HeapProfiler.enable');
}
async function allocations(n) {
  const { profile } = await post('HeapProfiler.stopSampling');
  // ALLOC_PROFILE_OUT=<file>: the sampled profile itself, for a closer look.
  if (process.env.ALLOC_PROFILE_OUT) writeFileSync(process.env.ALLOC_PROFILE_OUT, JSON.stringify(profile));
  const bySite = new Map();
  const walk = (node) => {
    const { functionName, url, lineNumber } = node.callFrame;
    const site = `${functionName || '(anonymous)'} ${url.replace(/.*node_modules\//, '').replace(/.*\/dist\//, 'dist/')}:${lineNumber + 1}`;
    bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize);
    node.children.forEach(walk);
  };
  walk(profile.head);
  const total = [...bySite.values()].reduce((a, b) => a + b, 0);
  console.log(`allocated ${(total / n / 1024).toFixed(1)} KB per ${unit === 'op' ? 'operation' : 'item'}; the largest sites:`);
  console.table(
    [...bySite]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 25)
      .map(([site, bytes]) => ({ [`bytes/${unit}`]: Math.round(bytes / n), site })),
  );
}

async function run(ms, ops = 0) {
  const deadline = performance.now() + ms;
  let done = 0;
  let started = 0;
  const more = ops > 0 ? () => started++ < ops : () => performance.now() < deadline;
  await Promise.all(
    Array.from({ length: callers }, async (_, caller) => {
      while (more()) {
        await operation(caller);
        done++;
      }
    }),
  );
  return done;
}

if (op === 'shared-batch') await service.putSettings(queueId(0), { lockMode: 'shared' });
if (op === 'pop' || op === 'ack-next' || op === 'shared-batch') {
  // Enough items for the warm-up and every round at a generous rate (pops: at most 1,000 a queue).
  const rate = { pop: 20_000, 'ack-next': 15_000, 'shared-batch': 30_000 }[op];
  const perQueue = Math.ceil(((2 + seconds * rounds) * rate) / queues);
  const items = Array.from({ length: Math.min(perQueue, 1000) }, (_, i) => ({ item: { seq: i, payload }, priority: i % 3 }));
  const batches = op === 'pop' ? 1 : Math.ceil(perQueue / items.length);
  if (op === 'shared-batch') console.log(`filling one shared queue with ${batches * items.length} items`);
  for (let q = 0; q < queues; q++) for (let b = 0; b < batches; b++) await service.pushBatch(queueId(q), items);
}
if (op === 'ack-next') {
  const ackPop = { depth: 1, requireAck: true, ttlSeconds: 30, waitSeconds: 0 };
  for (let c = 0; c < callers; c++) lockIds[c] = (await service.pop(queueId(c), ackPop)).lock_id;
}
if (op === 'shared-batch') {
  const perItem = { depth: batch, requireAck: true, lockPerItem: true, ttlSeconds: 30, waitSeconds: 0 };
  for (let c = 0; c < callers; c++) held[c] = (await service.pop(queueId(0), perItem)).lock_ids;
}
await run(2000, fixedOps > 0 ? Math.ceil(fixedOps / 4) : 0);
const rows = [];
for (let r = 0; r < rounds; r++) {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  statements?.clear();
  if (sampling)
    await post('HeapProfiler.startSampling', { samplingInterval: 256, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  const n = (await run(seconds * 1000, fixedOps)) * itemsPerOp;
  if (sampling) await allocations(n);
  if (statements) {
    const perOp = [...statements].sort((a, b) => b[1] - a[1]).map(([text, k]) => ({ [`per ${unit}`]: +(k / n).toFixed(3), statement: text }));
    console.table(perOp.slice(0, 12));
  }
  const cpu = process.cpuUsage(cpu0);
  const s = (performance.now() - t0) / 1000;
  rows.push({
    op,
    [itemsPerOp > 1 ? 'items/s' : 'ops/s']: Math.round(n / s),
    [`CPU µs/${unit}`]: +((cpu.user + cpu.system) / n).toFixed(1),
    [`user µs/${unit}`]: +(cpu.user / n).toFixed(1),
    [`system µs/${unit}`]: +(cpu.system / n).toFixed(1),
  });
}
console.table(rows);
await app.close();
psql(`DROP DATABASE IF EXISTS "${db}"`);
