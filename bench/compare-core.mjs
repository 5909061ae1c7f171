// Compares the in-memory cost of plain pushes and pops (no headers, no tracing) between two
// builds of pushpop, without HTTP or a database, so that small differences stand out of the
// noise of a shared machine:
//
//   node bench/compare-core.mjs <dir A> <dir B>   (each with dist/ built)
//
// Per build, alternating, COMPARE_ROUNDS (default 5) rounds of: a turn per operation on one
// queue core (push of one item, then pop of one item, 20,000 of each, as the turn runner drives
// them: operation, pending write, commit) and the turn statement's values for each write
// (`writeTurnValues`). Reports the median CPU nanoseconds per push and per pop turn.
import console from 'node:console';
import { resolve } from 'node:path';
import process from 'node:process';
import { pathToFileURL } from 'node:url';

const dirs = process.argv.slice(2).map((d) => resolve(d));
if (dirs.length !== 2) {
  console.error('usage: node bench/compare-core.mjs <dir A> <dir B>');
  process.exit(2);
}
const rounds = Number(process.env.COMPARE_ROUNDS ?? 5);
const N = 20_000;

async function load(dir) {
  const url = (p) => pathToFileURL(resolve(dir, 'dist', p)).href;
  const { QueueCore } = await import(url('queue/core/queue-core.js'));
  const { writeTurnValues } = await import(url('database/functions/write-turn.parameters.js'));
  return { QueueCore, writeTurnValues };
}

/** CPU time of this process so far (user + system), in nanoseconds: less disturbed by other processes than the clock. */
function cpuNs() {
  const { user, system } = process.cpuUsage();
  return (user + system) * 1000;
}

/** One turn: the operation, the write's statement values, the commit. */
function turn(core, writeTurnValues, op) {
  const result = op();
  const write = core.pendingWrite(() => 1);
  if (write) writeTurnValues('q', { ...write, storeSaves: [], storeDeletes: [] });
  core.committed(write);
  return result;
}

function measure({ QueueCore, writeTurnValues }) {
  // One segment for all: every item stays in memory, as on a queue whose head the actor holds.
  const core = QueueCore.absent({ segmentSize: N + 1, bufferSegments: 1 });
  const json = JSON.stringify({ n: 1, text: 'x'.repeat(100) });
  let t = cpuNs();
  for (let i = 0; i < N; i++) turn(core, writeTurnValues, () => core.push([{ priority: 0, json }], i, 0));
  const push = (cpuNs() - t) / N;
  t = cpuNs();
  // pop(depth, now, ack) since the time became an argument of its own; pop(depth, ack, now) before.
  const popAt = core.pop.length >= 3 ? (now) => core.pop(1, now) : (now) => core.pop(1, undefined, now);
  for (let i = 0; i < N; i++) turn(core, writeTurnValues, () => popAt(N + i));
  const pop = (cpuNs() - t) / N;
  return { push, pop };
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const builds = await Promise.all(dirs.map(load));
const results = dirs.map(() => ({ push: [], pop: [] }));
// Warm-up, then alternate.
for (const b of builds) measure(b);
for (let round = 0; round < rounds; round++) {
  for (const i of round % 2 === 0 ? [0, 1] : [1, 0]) {
    const r = measure(builds[i]);
    results[i].push.push(r.push);
    results[i].pop.push(r.pop);
  }
}
console.log('| build | CPU ns per push turn | CPU ns per pop turn |\n| --- | --- | --- |');
dirs.forEach((dir, i) => console.log(`| ${dir} | ${median(results[i].push).toFixed(0)} | ${median(results[i].pop).toFixed(0)} |`));
