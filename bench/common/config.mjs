// The benchmark's knobs (BENCH_* environment variables, bench/README.md) read once into CONFIG,
// with the names of its targets, scenarios and databases. A bad knob is collected in
// `knobErrors`; bench/run.mjs prints them and exits with code 2 before anything starts.

import { existsSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import process from 'node:process';
import { fileURLToPath, URL } from 'node:url';

export const benchDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const repoRoot = resolve(benchDir, '..');
export const resultsDir = join(benchDir, 'results');

/** What is wrong with the knobs (empty when every knob is good). */
export const knobErrors = [];

function envInt(name, fallback, min, max) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    knobErrors.push(`${name} must be an integer between ${min} and ${max} (got ${JSON.stringify(raw)})`);
    return fallback;
  }
  return value;
}

function envList(name, fallback, allowed) {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const list = [
    ...new Set(
      raw
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  ];
  const unknown = list.filter((x) => !allowed.includes(x));
  if (unknown.length > 0 || list.length === 0) {
    knobErrors.push(`${name}: unknown ${unknown.map((x) => JSON.stringify(x)).join(', ') || 'empty list'} (choose from ${allowed.join(', ')})`);
    return fallback;
  }
  // keep the canonical order, so that tables always read the same way
  return allowed.filter((x) => list.includes(x));
}

export const ALL_TARGETS = ['pushpop-embedded', 'pushpop-postgres', 'group-commit', 'floor', 'bullmq-redis', 'bullmq-postgres', 'pgboss'];
/** The peer servers (bench/peers) by target name. */
export const PEER_SCRIPTS = {
  'group-commit': 'group-commit.mjs',
  floor: 'raw-sql.mjs',
  'bullmq-redis': 'bullmq.mjs',
  'bullmq-postgres': 'bullmq.mjs',
  pgboss: 'pgboss.mjs',
};
/** Peers whose items are rows of bench/peers/queue-table.mjs. */
export const TABLE_PEERS = ['group-commit', 'floor'];
/** Peers on a redis-server the benchmark starts for them (not on the machine's PostgreSQL). */
export const REDIS_TARGETS = ['bullmq-redis'];
export const ALL_SCENARIOS = ['push', 'pop', 'hot', 'depth', 'delayed', 'longpoll', 'ackpop', 'idle', 'fair', 'clients', 'sqlenq'];
/** Scenarios of pushpop alone (the peers have no deep-queue fill, delayed items or long polls of this kind). */
export const PUSHPOP_ONLY_SCENARIOS = ['depth', 'delayed', 'longpoll', 'ackpop', 'idle', 'fair', 'sqlenq'];
const DEFAULT_SCENARIOS = ['push', 'pop', 'hot'];

export const CONFIG = {
  targets: envList('BENCH_TARGETS', ALL_TARGETS, ALL_TARGETS),
  scenarios: envList('BENCH_SCENARIOS', DEFAULT_SCENARIOS, ALL_SCENARIOS),
  seconds: envInt('BENCH_SECONDS', 10, 1, 300),
  warmupSeconds: envInt('BENCH_WARMUP_SECONDS', 2, 0, 60),
  rounds: envInt('BENCH_ROUNDS', 3, 1, 20),
  connections: envInt('BENCH_CONNECTIONS', 64, 1, 1024),
  queues: envInt('BENCH_QUEUES', 1000, 1, 10_000),
  hotBacklog: envInt('BENCH_HOT_BACKLOG', 1000, 0, 100_000),
  maxPrefill: envInt('BENCH_MAX_PREFILL', 400_000, 1000, 5_000_000),
  prefillTimeoutSeconds: envInt('BENCH_PREFILL_TIMEOUT', 300, 10, 7200),
  stallSeconds: envInt('BENCH_STALL_SECONDS', 15, 2, 600),
  shallowItems: envInt('BENCH_SHALLOW_ITEMS', 100, 0, 100_000),
  deepItems: envInt('BENCH_DEEP_ITEMS', 200_000, 1000, 1_000_000),
  depthOps: envInt('BENCH_DEPTH_OPS', 2000, 100, 100_000),
  ackConsumers: envInt('BENCH_ACK_CONSUMERS', 16, 1, 1024),
  ackItems: envInt('BENCH_ACK_ITEMS', 60_000, 1000, 2_000_000),
  delayedItems: envInt('BENCH_DELAYED_ITEMS', 100_000, 1000, 1_000_000),
  longPolls: envInt('BENCH_LONGPOLL_POLLS', 10_000, 1, 50_000),
  longPollIdleSeconds: envInt('BENCH_LONGPOLL_IDLE_SECONDS', 8, 1, 10),
  longPollInFlight: envInt('BENCH_LONGPOLL_IN_FLIGHT', 50, 1, 1024),
  longPollProcesses: envList('BENCH_LONGPOLL_PROCESSES', ['1', '2'], ['1', '2']).map(Number),
  idlePolls: envInt('BENCH_IDLE_POLLS', 5000, 1, 50_000),
  idleSeconds: envInt('BENCH_IDLE_SECONDS', 8, 1, 60),
  fairQueues: envInt('BENCH_FAIR_QUEUES', 100_000, 1, 10_000_000),
  fairReady: envInt('BENCH_FAIR_READY', 1000, 1, 100_000),
  fairEmpty: envInt('BENCH_FAIR_EMPTY', 1_000_000, 0, 10_000_000),
  fairItems: envInt('BENCH_FAIR_ITEMS', 100, 1, 1000),
  fairConnections: envInt('BENCH_FAIR_CONNECTIONS', 32, 1, 1024),
  clientItems: envInt('BENCH_CLIENT_ITEMS', 3000, 100, 100_000),
  clientMaxSeconds: envInt('BENCH_CLIENT_MAX_SECONDS', 30, 1, 600),
  sqlEnqueueTransactions: envInt('BENCH_SQLENQ_TRANSACTIONS', 64, 1, 80),
  sqlEnqueueQueues: envInt('BENCH_SQLENQ_QUEUES', 16, 1, 1000),
  sqlEnqueueBatch: envInt('BENCH_SQLENQ_BATCH', 1000, 1, 100_000),
  clientLatencyPushes: envInt('BENCH_CLIENT_LATENCY_PUSHES', 500, 10, 10_000),
  keepDatabases: process.env.BENCH_KEEP_DATABASES === '1',
  dbPrefix: process.env.BENCH_DB_PREFIX ?? '',
  workers: Number(process.env.BENCH_PUSHPOP_WORKERS ?? '1'),
  pgServer: (process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432').replace(/\/+$/, ''),
  pushpopDir: resolve(process.env.BENCH_PUSHPOP_DIR || repoRoot),
  itemBytes: 200,
  priorities: 3, // items get a random priority 0..2
  batchSize: 1000, // pushpop pre-fills by batch pushes of this many
  minPerQueue: 20, // pop pre-fill floor, items per queue
  popRateFactor: 2, // pops are assumed at most this much faster than pushes when pre-filling
  defaultPushRate: 5000, // req/s assumed for the pop pre-fill when no push was measured yet
};

if (!/^postgres(ql)?:\/\/[^/]+$/.test(CONFIG.pgServer)) {
  knobErrors.push('BENCH_PG_URL must be a server URL without a database, e.g. postgres://postgres@127.0.0.1:5432');
} else {
  const host = new URL(CONFIG.pgServer).hostname;
  if (!['127.0.0.1', 'localhost', '::1', '[::1]'].includes(host))
    knobErrors.push(`BENCH_PG_URL must point at a loopback PostgreSQL (got host ${host}): CPU is read from /proc of this machine`);
}
// lower-case letters, digits and underscores only: the names are used unquoted in SQL, and
// PostgreSQL keeps at most 63 bytes of a name
if (!Number.isInteger(CONFIG.workers) || CONFIG.workers < 1 || CONFIG.workers > 64) knobErrors.push('BENCH_PUSHPOP_WORKERS must be an integer 1-64');
if (!/^[a-z0-9_]{0,30}$/.test(CONFIG.dbPrefix)) knobErrors.push('BENCH_DB_PREFIX must be at most 30 characters of a-z, 0-9 and _ (e.g. mine_)');
if (!existsSync(CONFIG.pushpopDir) || !statSync(CONFIG.pushpopDir).isDirectory()) knobErrors.push(`BENCH_PUSHPOP_DIR: ${CONFIG.pushpopDir} is not a directory`);
if (process.platform !== 'linux' || !existsSync('/proc/self/stat')) knobErrors.push('the benchmark reads CPU time from /proc: it runs on Linux only');

export const PUSHPOP_TARGETS = CONFIG.targets.filter((t) => t.startsWith('pushpop-'));
export const needsMachinePostgres = CONFIG.targets.some((t) => t !== 'pushpop-embedded' && !REDIS_TARGETS.includes(t));
/** The benchmark's databases on the machine's PostgreSQL, each name prefixed with BENCH_DB_PREFIX (so that runs side by side do not collide). */
export const DATABASES = Object.fromEntries(
  Object.entries({
    'pushpop-postgres': 'pushpop_bench',
    'group-commit': 'bench_group_commit',
    floor: 'bench_floor',
    'bullmq-postgres': 'bench_bullmq',
    pgboss: 'pgboss_bench',
  }).map(([target, name]) => [target, `${CONFIG.dbPrefix}${name}`]),
);
export const dbUrl = (name) => `${CONFIG.pgServer}/${name}`;
export const MAX_SAMPLES = 5_000_000; // latency samples kept per run (memory bound)
