#!/usr/bin/env node
// pushpop benchmark: `npm run build && npm run bench`. What it measures, the knobs and how to
// read the numbers: bench/README.md.
//
// Starts every target as a child process — pushpop on its embedded database, pushpop on the
// machine's PostgreSQL, and peer servers (bench/peers: a group-commit and a raw-SQL floor and
// pg-boss on the same PostgreSQL, BullMQ on a redis-server of its own), all speaking pushpop's
// push and pop routes — then, round after round, drives one
// target at a time over loopback HTTP with autocannon through the same scenarios, reading the CPU
// time of the server process and of its store (PostgreSQL or Redis) from /proc around every measured window. Prints a
// table, writes bench/results/latest.md and bench/results/latest.json. Every loop here is bounded
// both in count and in time; every child process is stopped on exit, also on Ctrl-C.

import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import pg from 'pg';
import { Buffer } from 'node:buffer';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import console from 'node:console';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { createServer } from 'node:net';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { clearInterval, clearTimeout, setInterval, setTimeout } from 'node:timers';
import { fileURLToPath, URL } from 'node:url';
import { bullName, waitingKeys } from './peers/bullmq-names.mjs';
import { TABLE as PEER_TABLE } from './peers/queue-table.mjs';

const benchDir = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(benchDir, '..');
const resultsDir = join(benchDir, 'results');

// ---------------------------------------------------------------------------------------------
// knobs (a bad one: exit code 2)

const knobErrors = [];

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

const ALL_TARGETS = ['pushpop-embedded', 'pushpop-postgres', 'group-commit', 'floor', 'bullmq-redis', 'bullmq-postgres', 'pgboss'];
/** The peer servers (bench/peers) by target name. */
const PEER_SCRIPTS = {
  'group-commit': 'group-commit.mjs',
  floor: 'raw-sql.mjs',
  'bullmq-redis': 'bullmq.mjs',
  'bullmq-postgres': 'bullmq.mjs',
  pgboss: 'pgboss.mjs',
};
/** Peers whose items are rows of bench/peers/queue-table.mjs. */
const TABLE_PEERS = ['group-commit', 'floor'];
/** Peers on a redis-server the benchmark starts for them (not on the machine's PostgreSQL). */
const REDIS_TARGETS = ['bullmq-redis'];
const ALL_SCENARIOS = ['push', 'pop', 'hot', 'depth', 'delayed', 'longpoll', 'ackpop'];
/** Scenarios of pushpop alone (the peers have no deep-queue fill, delayed items or long polls of this kind). */
const PUSHPOP_ONLY_SCENARIOS = ['depth', 'delayed', 'longpoll', 'ackpop'];
const DEFAULT_SCENARIOS = ['push', 'pop', 'hot'];

const CONFIG = {
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
if (knobErrors.length > 0) {
  for (const e of knobErrors) console.error(e);
  process.exit(2);
}

// The longpoll scenario holds BENCH_LONGPOLL_POLLS connections open at once, here and in the
// service: below that many open files, raise the soft limit (children inherit it) by running
// again under `ulimit -n`, or stop with a hint when the hard limit is too low.
if (CONFIG.scenarios.includes('longpoll')) {
  const need = CONFIG.longPolls + 1024;
  const [soft, hard] = execFileSync('/bin/sh', ['-c', 'ulimit -Sn; ulimit -Hn'], { encoding: 'utf8', timeout: 5000 })
    .trim()
    .split('\n')
    .map((v) => (v.trim() === 'unlimited' ? Infinity : Number(v)));
  if (soft < need) {
    if (hard >= need && process.env.BENCH_RAISED_NOFILE !== '1') {
      process.stdout.write(`open files limit ${soft} < ${need} needed by the longpoll scenario: running again under ulimit -n ${need}\n`);
      // Ctrl-C reaches the run below (same process group), which stops its servers; this one waits for it.
      for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => undefined);
      const again = spawnSync('/bin/sh', ['-c', `ulimit -Sn ${need} && exec "$0" "$@"`, process.execPath, ...process.execArgv, ...process.argv.slice(1)], {
        stdio: 'inherit',
        env: { ...process.env, BENCH_RAISED_NOFILE: '1' },
      });
      process.exit(again.status ?? 1);
    }
    console.error(
      `the longpoll scenario holds ${CONFIG.longPolls} connections open in this process and in pushpop: the open files limit is ${soft} (hard ${hard}); raise it (ulimit -n ${need}) or lower BENCH_LONGPOLL_POLLS`,
    );
    process.exit(2);
  }
}

const PUSHPOP_TARGETS = CONFIG.targets.filter((t) => t.startsWith('pushpop-'));
const needsMachinePostgres = CONFIG.targets.some((t) => t !== 'pushpop-embedded' && !REDIS_TARGETS.includes(t));
/** The benchmark's databases on the machine's PostgreSQL, each name prefixed with BENCH_DB_PREFIX (so that runs side by side do not collide). */
const DATABASES = Object.fromEntries(
  Object.entries({
    'pushpop-postgres': 'pushpop_bench',
    'group-commit': 'bench_group_commit',
    floor: 'bench_floor',
    'bullmq-postgres': 'bench_bullmq',
    pgboss: 'pgboss_bench',
  }).map(([target, name]) => [target, `${CONFIG.dbPrefix}${name}`]),
);
const dbUrl = (name) => `${CONFIG.pgServer}/${name}`;
const MAX_SAMPLES = 5_000_000; // latency samples kept per run (memory bound)

// ---------------------------------------------------------------------------------------------
// preconditions: the pushpop build in BENCH_PUSHPOP_DIR

const pushpopDir = CONFIG.pushpopDir;
let buildIsStale = false;
if (PUSHPOP_TARGETS.length > 0) {
  const hasMutexLib = existsSync(join(pushpopDir, 'libs/keyed-mutex/package.json'));
  const outputs = ['dist/main.js', ...(hasMutexLib ? ['libs/keyed-mutex/dist/index.js'] : [])];
  const inputs = ['src', ...(hasMutexLib ? ['libs/keyed-mutex/src'] : [])];
  const missing = outputs.filter((p) => !existsSync(join(pushpopDir, p)));
  if (missing.length > 0) {
    const hint = pushpopDir === repoRoot ? 'npm run build && npm run bench' : `(cd ${pushpopDir} && npm run build), then run the benchmark again`;
    console.error(`pushpop in ${pushpopDir} is not built (missing ${missing.join(', ')}). The benchmark builds nothing itself; run:\n\n  ${hint}\n`);
    process.exit(1);
  }
  const newestMtime = (path, budget = { entries: 20_000 }) => {
    if (!existsSync(path) || budget.entries-- <= 0) return 0;
    const stat = statSync(path);
    if (!stat.isDirectory()) return stat.mtimeMs;
    let newest = stat.mtimeMs;
    for (const entry of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, entry), budget));
    return newest;
  };
  buildIsStale = Math.max(...inputs.map((p) => newestMtime(join(pushpopDir, p)))) > Math.min(...outputs.map((p) => statSync(join(pushpopDir, p)).mtimeMs));
}

// ---------------------------------------------------------------------------------------------
// small helpers

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const round = (x, digits = 0) => (x === null || x === undefined || Number.isNaN(x) || !Number.isFinite(x) ? null : Number(x.toFixed(digits)));
const runStarted = performance.now();

function log(line) {
  process.stdout.write(`${line}\n`);
}
/** A progress line with the time since the start of the run. */
function progress(line) {
  const s = Math.round((performance.now() - runStarted) / 1000);
  log(`[${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}] ${line}`);
}
const errorText = (error) => String(error instanceof Error ? error.message : error).split('\n')[0];

/** Nearest-rank percentiles over float samples in milliseconds. */
function summarize(samples) {
  if (samples.length === 0) return { count: 0, mean: null, p50: null, p90: null, p99: null, max: null };
  const sorted = Float64Array.from(samples).sort();
  const pick = (p) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
  let sum = 0;
  for (const v of sorted) sum += v;
  return {
    count: sorted.length,
    mean: round(sum / sorted.length, 3),
    p50: round(pick(50), 3),
    p90: round(pick(90), 3),
    p99: round(pick(99), 3),
    max: round(sorted[sorted.length - 1], 3),
  };
}

function median(values) {
  const v = values.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return null;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

/** The version of package `name` as installed for `fromDir` (node_modules looked up from there). */
function packageVersion(name, fromDir = repoRoot) {
  let dir = fromDir;
  for (let i = 0; i < 20; i++) {
    try {
      return JSON.parse(readFileSync(join(dir, 'node_modules', name, 'package.json'), 'utf8')).version ?? null;
    } catch {
      const parent = dirname(dir);
      if (parent === dir) break;
      dir = parent;
    }
  }
  return null;
}

function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolvePort(port));
    });
  });
}

/** Runs `fn` over `items` with at most `limit` at once; stops at the first error. */
async function forEachLimit(items, limit, fn) {
  let next = 0;
  let failed = null;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (failed === null && next < items.length) {
        const i = next++;
        try {
          await fn(items[i], i);
        } catch (error) {
          failed ??= error;
        }
      }
    }),
  );
  if (failed !== null) throw failed instanceof Error ? failed : new Error(String(failed));
}

// ---------------------------------------------------------------------------------------------
// items and request bodies

let seq = 0;
const ITEM_HEAD = '{"seq":"';
const ITEM_MIDDLE = '","kind":"order.created","customer":"customer-000042","sku":"SKU-7731-XL","quantity":3,"price_cents":129900,"note":"';
const ITEM_TAIL = '"}';
const NOTE = 'x'.repeat(CONFIG.itemBytes - (ITEM_HEAD.length + 12 + ITEM_MIDDLE.length + ITEM_TAIL.length));
/** A JSON object of exactly CONFIG.itemBytes bytes carrying a sequence number unique in the run. */
function itemJson() {
  seq += 1;
  return `${ITEM_HEAD}${String(seq).padStart(12, '0')}${ITEM_MIDDLE}${NOTE}${ITEM_TAIL}`;
}
if (Buffer.byteLength(itemJson()) !== CONFIG.itemBytes || typeof JSON.parse(itemJson()).seq !== 'string')
  throw new Error('item template is not the configured size');
const randomPriority = () => Math.floor(Math.random() * CONFIG.priorities);
const pushBody = (priority = randomPriority()) => `{"item":${itemJson()},"priority":${priority}}`;

const QUEUE_IDS = Array.from({ length: CONFIG.queues }, (_, i) => `bench-${i}`);
const HOT_QUEUE = 'bench-hot';
const SHALLOW_QUEUE = 'bench-shallow';
const DEEP_QUEUE = 'bench-deep';
/** The delayed scenario: two queues of BENCH_SHALLOW_ITEMS visible items, one of them with BENCH_DELAYED_ITEMS delayed ones too. */
const PLAIN_QUEUE = 'bench-plain';
const DELAYED_QUEUE = 'bench-delayed';
/** The longest delay there is: the delayed items stay delayed through the whole run (unless it lasts longer). */
const BENCH_DELAY_SECONDS = 900;
const randomQueue = () => QUEUE_IDS[Math.floor(Math.random() * QUEUE_IDS.length)];

// ---------------------------------------------------------------------------------------------
// a small keep-alive HTTP client (set-up, pre-fills and counts; never the measured load)

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function httpRequest(baseUrl, method, path, body = null, timeoutMs = CONFIG.stallSeconds * 1000) {
  return new Promise((resolveRequest, reject) => {
    const url = new URL(path, baseUrl);
    const headers = body === null ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
    const req = http.request(url, { method, headers, agent }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        clearTimeout(timer);
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed;
        try {
          parsed = text ? JSON.parse(text) : null;
        } catch {
          parsed = text;
        }
        resolveRequest({ status: res.statusCode ?? 0, body: parsed });
      });
      res.on('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
    });
    const timer = setTimeout(() => req.destroy(new Error(`${method} ${path}: no answer within ${Math.round(timeoutMs / 1000)} s`)), timeoutMs);
    req.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    req.end(body ?? undefined);
  });
}

// ---------------------------------------------------------------------------------------------
// /proc: CPU time and memory of processes

let CLK_TCK = 100;
try {
  CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8', timeout: 5000 }).trim()) || 100;
} catch {
  // getconf missing: 100 is the Linux value everywhere that matters
}

/** Fields of /proc/<pid>/stat (comm may hold spaces and parentheses: fields are read after the last ')'). */
function readStat(pid) {
  let text;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  const close = text.lastIndexOf(')');
  const f = text.slice(close + 2).split(' ');
  // f[0] is field 3 (state): field n is f[n - 3]
  return {
    pid: Number(pid),
    comm: text.slice(text.indexOf('(') + 1, close),
    ppid: Number(f[1]),
    utime: Number(f[11]),
    stime: Number(f[12]),
    cutime: Number(f[13]),
    cstime: Number(f[14]),
    starttime: Number(f[19]),
  };
}

function allStats() {
  const out = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const s = readStat(name);
    if (s) out.push(s);
  }
  return out;
}

function rssKb(pid) {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/** CPU ticks of one process, its children not included. */
function ownTicks(pid) {
  const s = readStat(pid);
  return s ? s.utime + s.stime : null;
}

/**
 * CPU ticks of a store's server process: its own and its reaped children's
 * (utime+stime+cutime+cstime) plus every live child's. For a PostgreSQL postmaster the children
 * are the backends, checkpointer, walwriter, ...; for redis-server, the rewrites of its
 * append-only file. A child that exits between two samples moves from the second term to the first.
 */
function treeTicks(postmaster, stats = allStats()) {
  const pm = stats.find((s) => s.pid === postmaster.pid);
  if (!pm || pm.starttime !== postmaster.starttime) return null;
  let ticks = pm.utime + pm.stime + pm.cutime + pm.cstime;
  for (const s of stats) if (s.ppid === pm.pid) ticks += s.utime + s.stime;
  return ticks;
}

/** The postmaster of the machine's PostgreSQL: the parent of our own backend. */
async function findMachinePostmaster() {
  const client = new pg.Client({ connectionString: dbUrl('postgres'), connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    const { rows } = await client.query('SELECT pg_backend_pid() AS pid, current_setting($1) AS version', ['server_version']);
    const backend = readStat(rows[0].pid);
    const pm = backend ? readStat(backend.ppid) : null;
    return { version: rows[0].version, postmaster: pm && pm.comm === 'postgres' ? { pid: pm.pid, starttime: pm.starttime } : null };
  } finally {
    await client.end();
  }
}

/**
 * The embedded PostgreSQL of a pushpop process, if it runs one: a descendant `postgres` process
 * whose parent is not a `postgres` (the postmaster), else a postmaster whose working directory
 * (PostgreSQL changes into its data directory) is under the service's DATA_DIR. None: the
 * database runs inside the service (PGlite).
 */
function findEmbeddedPostmaster(servicePid, dataDir) {
  const stats = allStats();
  const byPid = new Map(stats.map((s) => [s.pid, s]));
  const isPostmaster = (s) => s.comm === 'postgres' && byPid.get(s.ppid)?.comm !== 'postgres';
  let frontier = [servicePid];
  for (let depth = 0; depth < 4 && frontier.length > 0; depth++) {
    const children = stats.filter((s) => frontier.includes(s.ppid));
    const found = children.find(isPostmaster);
    if (found) return { pid: found.pid, starttime: found.starttime };
    frontier = children.map((s) => s.pid);
  }
  if (dataDir) {
    let root;
    try {
      root = realpathSync(dataDir);
    } catch {
      return null;
    }
    for (const s of stats) {
      if (!isPostmaster(s)) continue;
      try {
        if (realpathSync(`/proc/${s.pid}/cwd`).startsWith(root)) return { pid: s.pid, starttime: s.starttime };
      } catch {
        // not ours to look at, or gone
      }
    }
  }
  return null;
}

function postgresBinaryVersion(pid) {
  const candidates = [];
  try {
    candidates.push(readlinkSync(`/proc/${pid}/exe`));
  } catch {
    // not readable
  }
  try {
    candidates.push(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0]);
  } catch {
    // gone
  }
  for (const bin of candidates) {
    try {
      return execFileSync(bin, ['--version'], { encoding: 'utf8', timeout: 5000 }).trim();
    } catch {
      // try the next
    }
  }
  return null;
}

function isAlive(proc) {
  const s = readStat(proc.pid);
  return s !== null && s.starttime === proc.starttime;
}

// ---------------------------------------------------------------------------------------------
// child processes

const children = new Set(); // { child, pid, exited }
const tempDirs = new Set();
const embeddedPostmasters = new Set(); // { pid, starttime } seen under a pushpop-embedded target

/**
 * Starts a server as a child process in its own process group (so that Ctrl-C reaches the
 * benchmark only, and the benchmark stops the children in order) and waits for GET readyPath.
 */
async function startServer({ label, args, env, cwd, port, readyPath, readyTimeoutSeconds = 180 }) {
  const started = performance.now();
  const child = spawn(process.execPath, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let output = '';
  const keep = (chunk) => {
    output += chunk.toString();
    if (output.length > 200_000) output = output.slice(-100_000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  let exitInfo = null;
  const exited = new Promise((r) => child.on('exit', (code, signal) => r((exitInfo = { code, signal }))));
  const entry = { child, pid: child.pid, exited };
  children.add(entry);
  void exited.then(() => children.delete(entry));
  const url = `http://127.0.0.1:${port}`;
  const proc = {
    label,
    url,
    pid: child.pid,
    starttime: readStat(child.pid)?.starttime ?? null,
    output: () => output,
    alive: () => exitInfo === null,
    exitInfo: () => exitInfo,
    /** SIGTERM, then SIGKILL of its process group after `graceSeconds`. */
    async stop(graceSeconds = 20) {
      if (exitInfo === null) {
        try {
          child.kill('SIGTERM');
        } catch {
          // gone
        }
        const timedOut = await Promise.race([exited.then(() => false), sleep(graceSeconds * 1000).then(() => true)]);
        if (timedOut) {
          killGroup(child.pid, 'SIGKILL');
          await Promise.race([exited, sleep(5000)]);
        }
      }
      return exitInfo;
    },
  };
  const deadline = Date.now() + readyTimeoutSeconds * 1000;
  for (let attempt = 0; attempt < readyTimeoutSeconds * 20; attempt++) {
    if (exitInfo !== null) throw new Error(`${label} exited before it was ready (code ${exitInfo.code}, signal ${exitInfo.signal}):\n${output.slice(-4000)}`);
    try {
      const res = await httpRequest(url, 'GET', readyPath, null, 2000);
      if (res.status === 200) return { proc, readySeconds: (performance.now() - started) / 1000 };
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) break;
    await sleep(100);
  }
  await proc.stop(5);
  throw new Error(`${label} not ready within ${readyTimeoutSeconds} s:\n${output.slice(-4000)}`);
}

/**
 * A redis-server of the benchmark's own for a Redis peer: loopback, a free port (never the
 * machine's 6379), its data in a fresh temporary directory (removed at the end), the
 * append-only file fsynced every second (`--appendonly yes --appendfsync everysec`) and no RDB
 * snapshots (the append-only file is the durability measured). Started in its own process group
 * like the servers, stopped with SIGTERM (Redis fsyncs and exits), SIGKILL after 10 s.
 */
async function startRedis(label) {
  const port = await freePort();
  const dir = mkdtempSync(join(os.tmpdir(), 'pushpop-bench-redis-'));
  tempDirs.add(dir);
  const args = ['--bind', '127.0.0.1', '--port', String(port), '--dir', dir, '--appendonly', 'yes', '--appendfsync', 'everysec', '--save', '', '--logfile', ''];
  const child = spawn('redis-server', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let output = '';
  const keep = (chunk) => {
    output += chunk.toString();
    if (output.length > 100_000) output = output.slice(-50_000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  let exitInfo = null;
  let spawnError = null;
  const exited = new Promise((r) => {
    child.on('exit', (code, signal) => r((exitInfo = { code, signal })));
    child.on('error', (error) => {
      spawnError = error;
      r((exitInfo = { code: null, signal: null }));
    });
  });
  const entry = { child, pid: child.pid, exited };
  if (child.pid) children.add(entry);
  void exited.then(() => children.delete(entry));
  const client = new Redis({
    host: '127.0.0.1',
    port,
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    retryStrategy: () => 200,
    connectionName: 'pushpop-bench-counts',
  });
  client.on('error', () => undefined); // while it starts; commands still reject
  const redis = {
    label,
    port,
    url: `redis://127.0.0.1:${port}`,
    dir,
    client,
    proc: child.pid ? { pid: child.pid, starttime: readStat(child.pid)?.starttime ?? null } : null,
    version: /** @type {string | null} */ (null),
    output: () => output,
    alive: () => exitInfo === null,
    async stop() {
      client.disconnect();
      if (exitInfo === null) {
        try {
          child.kill('SIGTERM');
        } catch {
          // gone
        }
        if (await Promise.race([exited.then(() => false), sleep(10_000).then(() => true)])) {
          killGroup(child.pid, 'SIGKILL');
          await Promise.race([exited, sleep(5000)]);
        }
      }
      rmSync(dir, { recursive: true, force: true });
      tempDirs.delete(dir);
      return exitInfo;
    },
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (exitInfo !== null) {
      if (spawnError?.code === 'ENOENT') throw new Error('redis-server is not installed (Debian: apt-get install redis-server)');
      throw new Error(`redis-server exited before it was ready (code ${exitInfo.code}, signal ${exitInfo.signal}):\n${output.slice(-2000)}`);
    }
    try {
      if (client.status === 'wait') await client.connect();
      if ((await client.ping()) === 'PONG') break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await redis.stop();
      throw new Error(`redis-server not ready within 30 s:\n${output.slice(-2000)}`);
    }
    await sleep(100);
  }
  redis.version = /redis_version:(\S+)/.exec(await client.info('server'))?.[1] ?? null;
  return redis;
}

function killGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      // gone
    }
  }
}

/** Stops an embedded PostgreSQL that outlived its service: fast shutdown, then SIGKILL. */
async function stopOrphanPostmaster(pm) {
  if (!isAlive(pm)) return false;
  try {
    process.kill(pm.pid, 'SIGINT');
  } catch {
    return false;
  }
  for (let i = 0; i < 100 && isAlive(pm); i++) await sleep(100);
  if (isAlive(pm)) {
    try {
      process.kill(pm.pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  return true;
}

/** Last-resort clean-up (exit, signal): kill every child's process group and orphaned embedded PostgreSQL servers, remove temporary directories. */
function killEverything() {
  for (const { pid } of children) killGroup(pid, 'SIGKILL');
  for (const pm of embeddedPostmasters) {
    if (isAlive(pm)) {
      try {
        process.kill(pm.pid, 'SIGQUIT'); // immediate shutdown: the postmaster takes its backends down
      } catch {
        // gone
      }
    }
  }
  for (const dir of tempDirs) {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // best effort
    }
  }
  tempDirs.clear();
}
process.on('exit', killEverything);

let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    if (interrupted) {
      killEverything();
      process.exit(130);
    }
    interrupted = true;
    log(`\n${signal}: stopping the servers (again to kill them at once) ...`);
    const graceful = Promise.all(
      [...children].map(({ child, exited }) => {
        try {
          child.kill('SIGTERM');
        } catch {
          // gone
        }
        return exited;
      }),
    );
    void Promise.race([graceful, sleep(8000)]).then(async () => {
      for (const pm of embeddedPostmasters) await stopOrphanPostmaster(pm);
      killEverything();
      process.exit(130);
    });
  });
}

// ---------------------------------------------------------------------------------------------
// databases of the machine's PostgreSQL

async function adminQuery(sql) {
  const client = new pg.Client({ connectionString: dbUrl('postgres'), connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    return await client.query(sql);
  } finally {
    await client.end();
  }
}

async function recreateDatabase(name) {
  // only the benchmark's own names, with this run's prefix
  if (!new RegExp(`^${CONFIG.dbPrefix}(bench_\\w+|pushpop_bench|pgboss_bench)$`).test(name)) throw new Error(`refusing to recreate database ${name}`);
  await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await adminQuery(`CREATE DATABASE ${name}`);
}

// ---------------------------------------------------------------------------------------------
// targets

const bossName = (queueId) => (/[\w-]/.test(queueId) ? queueId : `q/${queueId}`); // bench/peers/pgboss.mjs

/** Environment of a pushpop child: only what the benchmark sets; everything else at its default. */
function pushpopEnv(port) {
  const env = { ...process.env };
  for (const key of Object.keys(env)) {
    if (
      [
        'DATABASE_URL',
        'DATA_DIR',
        'SEGMENT_SIZE',
        'BUFFER_SEGMENTS',
        'MAX_PENDING_PER_QUEUE',
        'MAX_WAITING_POLLS',
        'DB_POOL_SIZE',
        'NODE_OPTIONS',
        'WORKERS',
        'ACTOR_IDLE_TIMEOUT_MS',
        'MAX_ITEM_BYTES',
        'MAX_BODY_BYTES',
        'LOCK_SWEEP_INTERVAL_MS',
        'MAX_PRIORITY',
        'API_KEYS',
        'API_KEYS_FILE',
        'RATE_LIMIT_PER_SECOND',
        'RATE_LIMIT_BURST',
      ].includes(key)
    )
      delete env[key];
  }
  return Object.assign(env, { PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', NODE_ENV: 'production' });
}

async function startTarget(name, machine) {
  const port = await freePort();
  const target = {
    name,
    kind: name.startsWith('pushpop-') ? 'pushpop' : 'peer',
    port,
    db: /** @type {string | null} */ (null),
    pool: /** @type {pg.Pool | null} */ (null),
    dataDir: /** @type {string | null} */ (null),
    postmaster: /** @type {{ pid: number, starttime: number } | null} */ (null),
    pgLocation: /** @type {string | null} */ (null),
    pgVersion: /** @type {string | null} */ (null),
    redis: /** @type {Awaited<ReturnType<typeof startRedis>> | null} */ (null),
    dead: /** @type {string | null} */ (null),
    pushRate: /** @type {number | null} */ (null),
    rss: /** @type {{ round: number, kb: number | null }[]} */ ([]),
    depthFill: /** @type {Record<string, number | null> | null} */ (null),
    depthFilled: false,
    logLines: /** @type {string[] | null} */ (null),
    workers: /** @type {{ pid: number, starttime: number } | null} */ (null),
  };
  let args;
  let env;
  let cwd = repoRoot;
  let readyPath = '/health/ready';
  if (target.kind === 'pushpop') {
    env = pushpopEnv(port);
    args = [join(pushpopDir, 'dist/main.js')];
    cwd = pushpopDir;
    if (name === 'pushpop-postgres') {
      target.db = DATABASES[name];
      await recreateDatabase(target.db);
      env.DATABASE_URL = dbUrl(target.db);
      // Several worker processes (pushpop's WORKERS); their CPU is read as the primary's tree.
      if (CONFIG.workers > 1) env.WORKERS = String(CONFIG.workers);
    } else {
      target.dataDir = mkdtempSync(join(os.tmpdir(), 'pushpop-bench-'));
      tempDirs.add(target.dataDir);
      env.DATA_DIR = target.dataDir;
    }
  } else {
    let storeUrl;
    if (REDIS_TARGETS.includes(name)) {
      target.redis = await startRedis(`${name} redis-server`);
      storeUrl = target.redis.url;
    } else {
      target.db = DATABASES[name];
      await recreateDatabase(target.db);
      storeUrl = dbUrl(target.db);
    }
    env = { ...process.env };
    delete env.NODE_OPTIONS;
    args = [join(benchDir, 'peers', PEER_SCRIPTS[name]), `--port=${port}`, `--database-url=${storeUrl}`];
    readyPath = '/health/ready';
  }
  let started;
  try {
    started = await startServer({ label: name, args, env, cwd, port, readyPath });
  } catch (error) {
    if (target.redis) await target.redis.stop();
    throw error;
  }
  const { proc, readySeconds } = started;
  target.proc = proc;
  target.url = proc.url;
  if (name === 'pushpop-postgres' && CONFIG.workers > 1) {
    const own = readStat(proc.pid);
    target.workers = own ? { pid: proc.pid, starttime: own.starttime } : null;
  }
  target.readySeconds = round(readySeconds, 1);
  if (name === 'pushpop-embedded') {
    target.postmaster = findEmbeddedPostmaster(proc.pid, target.dataDir);
    if (target.postmaster) {
      embeddedPostmasters.add(target.postmaster);
      target.pgLocation = 'embedded server (child process)';
      target.pgVersion = postgresBinaryVersion(target.postmaster.pid);
    } else {
      target.pgLocation = 'in process';
      const pglite = packageVersion('@electric-sql/pglite', pushpopDir);
      target.pgVersion = pglite ? `PGlite ${pglite} (in process)` : 'in process';
    }
  } else if (target.redis) {
    target.pgLocation = 'redis-server (started for it)';
    target.pgVersion = target.redis.version ? `Redis ${target.redis.version}` : 'Redis';
  } else {
    target.postmaster = machine.postmaster;
    target.pgLocation = 'machine PostgreSQL (shared)';
    target.pgVersion = machine.version;
  }
  if (target.kind === 'peer' && target.db) target.pool = new pg.Pool({ connectionString: dbUrl(target.db), max: 2, application_name: 'pushpop-bench-counts' });
  return target;
}

/** Items waiting per queue id (pushpop: GET /queue/{id}; the peers: a count on their database). */
async function queueCounts(target, ids) {
  const counts = new Map(ids.map((id) => [id, 0]));
  if (target.kind === 'pushpop') {
    await forEachLimit(ids, 16, async (id) => {
      const { status, body } = await httpRequest(target.url, 'GET', `/queue/${encodeURIComponent(id)}`);
      if (status === 404) return;
      if (status !== 200 || typeof body?.count !== 'number') throw new Error(`GET /queue/${id}: ${status} ${JSON.stringify(body).slice(0, 200)}`);
      counts.set(id, body.count + (body.lock?.item_count ?? 0) + (body.locks?.item_count ?? 0));
    });
    return counts;
  }
  if (target.redis) {
    // BullMQ: the jobs waiting without a priority (a list) and with one (a sorted set)
    const pipeline = target.redis.client.pipeline();
    for (const id of ids) {
      const keys = waitingKeys(id);
      pipeline.llen(keys.wait);
      pipeline.zcard(keys.prioritized);
    }
    const results = (await pipeline.exec()) ?? [];
    ids.forEach((id, i) => {
      const [[e1, waiting], [e2, prioritized]] = [results[2 * i] ?? [new Error('no reply')], results[2 * i + 1] ?? [new Error('no reply')]];
      if (e1 || e2) throw e1 ?? e2;
      counts.set(id, Number(waiting) + Number(prioritized));
    });
    return counts;
  }
  if (target.name === 'bullmq-postgres') {
    // BullMQ's PostgreSQL backend: its jobs in the state `waiting` (with a priority or not)
    const names = new Map(ids.map((id) => [bullName(id), id]));
    const { rows } = await target.pool.query(`SELECT queue, count(*)::int AS n FROM bullmq.job WHERE queue = ANY($1) AND state = 'waiting' GROUP BY queue`, [
      [...names.keys()],
    ]);
    for (const row of rows) counts.set(names.get(row.queue), row.n);
    return counts;
  }
  if (TABLE_PEERS.includes(target.name)) {
    const { rows } = await target.pool.query(`SELECT queue_id AS id, count(*)::int AS n FROM ${PEER_TABLE} WHERE queue_id = ANY($1) GROUP BY queue_id`, [ids]);
    for (const row of rows) counts.set(row.id, row.n);
    return counts;
  }
  const names = new Map(ids.map((id) => [bossName(id), id]));
  let rows = [];
  try {
    ({ rows } = await target.pool.query(`SELECT name, count(*)::int AS n FROM pgboss.job WHERE name = ANY($1) AND state < 'active' GROUP BY name`, [
      [...names.keys()],
    ]));
  } catch (error) {
    if (error?.code !== '42P01') throw error; // no pgboss.job yet: nothing pushed
  }
  for (const row of rows) counts.set(names.get(row.name), row.n);
  return counts;
}

const sumCounts = (counts) => [...counts.values()].reduce((a, b) => a + b, 0);

/**
 * Adds plan.get(queue) items to each queue, not measured: pushpop by batch pushes of up to
 * 1000, the peers by single pushes through their push route. Verifies the counts afterwards.
 */
async function addItems(target, plan, { priority = null, label = 'pre-fill', onTick = null } = {}) {
  const total = [...plan.values()].reduce((a, b) => a + b, 0);
  if (total === 0) return { items: 0, seconds: 0 };
  const ids = [...plan.keys()];
  const before = await queueCounts(target, ids);
  const started = performance.now();
  const deadline = Date.now() + CONFIG.prefillTimeoutSeconds * 1000;
  const checkDeadline = () => {
    if (Date.now() > deadline) throw new Error(`${label} took longer than BENCH_PREFILL_TIMEOUT=${CONFIG.prefillTimeoutSeconds} s`);
    if (!target.proc.alive()) throw new Error(`${target.name} exited during the ${label}`);
  };
  const prio = () => (priority === null ? randomPriority() : priority);
  let done = 0;
  let lastTick = 0;
  const tick = () => {
    if (onTick) onTick();
    if (performance.now() - lastTick > 10_000) {
      lastTick = performance.now();
      if (done > 0) progress(`    ${label}: ${done.toLocaleString('en-US')} of ${total.toLocaleString('en-US')} items`);
    }
  };
  lastTick = performance.now();
  if (target.kind === 'pushpop') {
    const batches = [];
    for (const [id, n] of plan) for (let off = 0; off < n; off += CONFIG.batchSize) batches.push([id, Math.min(CONFIG.batchSize, n - off)]);
    // one worker per queue at a time keeps batches to one queue in order; queues run in parallel
    const byQueue = new Map();
    for (const b of batches) byQueue.set(b[0], [...(byQueue.get(b[0]) ?? []), b]);
    await forEachLimit([...byQueue.values()], 8, async (queueBatches) => {
      for (const [id, n] of queueBatches) {
        checkDeadline();
        const entries = [];
        for (let i = 0; i < n; i++) entries.push(`{"item":${itemJson()},"priority":${prio()}}`);
        const { status, body } = await httpRequest(
          target.url,
          'POST',
          `/queue/${encodeURIComponent(id)}/push/batch`,
          `{"items":[${entries.join(',')}]}`,
          120_000,
        );
        if (status !== 200 || body?.count !== n) throw new Error(`batch push of ${n} to ${id}: ${status} ${JSON.stringify(body).slice(0, 200)}`);
        done += n;
        tick();
      }
    });
  } else {
    // round-robin over the queues, so that a slow pre-fill spreads evenly
    const pushes = [];
    const remaining = new Map([...plan].filter(([, n]) => n > 0));
    for (let guard = 0; remaining.size > 0 && guard < total + 1; guard++) {
      for (const [id, n] of remaining) {
        pushes.push(id);
        if (n <= 1) remaining.delete(id);
        else remaining.set(id, n - 1);
      }
    }
    await forEachLimit(pushes, Math.min(32, CONFIG.connections), async (id) => {
      if ((done & 255) === 0) checkDeadline();
      const { status, body } = await httpRequest(target.url, 'POST', `/queue/${encodeURIComponent(id)}/push`, pushBody(prio()));
      if (status !== 200) throw new Error(`push to ${id}: ${status} ${JSON.stringify(body).slice(0, 200)}`);
      done += 1;
      if ((done & 1023) === 0) tick();
    });
  }
  const seconds = (performance.now() - started) / 1000;
  const after = await queueCounts(target, ids);
  const wrong = ids.filter((id) => after.get(id) !== before.get(id) + plan.get(id));
  if (wrong.length > 0) {
    const id = wrong[0];
    throw new Error(
      `${label}: ${wrong.length} queue(s) do not hold what was pushed (e.g. ${id}: ${after.get(id)} items, expected ${before.get(id)} + ${plan.get(id)})`,
    );
  }
  return { items: total, seconds: round(seconds, 2), items_per_s: Math.round(total / seconds) };
}

// ---------------------------------------------------------------------------------------------
// autocannon runs and CPU sampling

const JSON_HEADERS = { 'content-type': 'application/json' };

/** A push request; `queueFor()` picks the queue of each request. */
function pushRequest(queueFor, counters, priority = null) {
  return {
    method: 'POST',
    path: '/',
    headers: JSON_HEADERS,
    setupRequest: (req) => ({ ...req, path: `/queue/${queueFor()}/push`, body: pushBody(priority === null ? randomPriority() : priority) }),
    onResponse: (status) => {
      if (status === 200) counters.pushed += 1;
    },
  };
}

/** A pop request, depth 1; counts items received and pops that came back empty. */
function popRequest(queueFor, counters) {
  return {
    method: 'POST',
    path: '/',
    setupRequest: (req) => ({ ...req, path: `/queue/${queueFor()}/pop?depth=1` }),
    onResponse: (status, body) => {
      if (status !== 200) return;
      try {
        const parsed = JSON.parse(body);
        if (parsed.count === 0) counters.emptyPops += 1;
        else counters.popped += parsed.count;
      } catch {
        counters.unparsable += 1;
      }
    },
  };
}

const newCounters = () => ({ pushed: 0, popped: 0, emptyPops: 0, unparsable: 0 });

/**
 * One autocannon run (keep-alive connections, one request in flight per connection). Latencies
 * are autocannon's per-response timings (float ms, write of the request to end of the
 * response), all kept, so the percentiles are exact. With `sequence` set and one connection,
 * responses alternate between the named operations.
 */
async function cannon({ url, connections, seconds, amount, requests, sequence }) {
  const all = [];
  const byOp = sequence ? Object.fromEntries(sequence.map((op) => [op, []])) : null;
  let index = 0;
  const wallStart = performance.now();
  const instance = autocannon({ url, connections, pipelining: 1, timeout: CONFIG.stallSeconds, ...(amount ? { amount } : { duration: seconds }), requests });
  let lastResponse = performance.now();
  instance.on('response', (_client, _status, _bytes, ms) => {
    lastResponse = performance.now();
    if (all.length < MAX_SAMPLES) all.push(ms);
    if (byOp && byOp[sequence[index % sequence.length]].length < MAX_SAMPLES) byOp[sequence[index % sequence.length]].push(ms);
    index += 1;
  });
  // Watchdog: any run stops when nothing has answered for BENCH_STALL_SECONDS, and a run with
  // `amount` stops at a time cap (a stuck server must not hang the benchmark).
  let stoppedBy = null;
  const hardCapMs = (amount ? Math.max(120, amount / 10) : seconds + 60) * 1000;
  const watchdog = setInterval(() => {
    const now = performance.now();
    if (stoppedBy) return;
    if (interrupted) stoppedBy = 'interrupted';
    else if (now - lastResponse > CONFIG.stallSeconds * 1000) stoppedBy = `stalled: no response for ${CONFIG.stallSeconds} s`;
    else if (now - wallStart > hardCapMs) stoppedBy = `time cap of ${Math.round(hardCapMs / 1000)} s reached`;
    if (stoppedBy) instance.stop();
  }, 250);
  let result;
  try {
    result = await instance;
  } finally {
    clearInterval(watchdog);
  }
  // autocannon ends an `amount` run only at its next 1-second tick (and reports that duration):
  // such a run lasts until its last response
  const activeSeconds = amount ? (lastResponse - wallStart) / 1000 : result.duration || (performance.now() - wallStart) / 1000;
  const statusCodes = Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([code, v]) => [code, v.count]));
  const non2xx = Object.entries(statusCodes)
    .filter(([code]) => !code.startsWith('2'))
    .reduce((n, [, c]) => n + c, 0);
  const count429 = statusCodes['429'] ?? 0;
  return {
    durationSeconds: activeSeconds,
    responses: index,
    ok: result['2xx'],
    statusCodes,
    non2xx,
    non2xxExcept429: non2xx - count429,
    count429,
    errors: result.errors,
    timeouts: result.timeouts,
    latency: summarize(all),
    stoppedBy,
    latencyByOp: byOp ? Object.fromEntries(Object.entries(byOp).map(([op, s]) => [op, summarize(s)])) : undefined,
  };
}

/** The process whose tree is the target's store: its PostgreSQL's postmaster, or the redis-server started for it. */
const storeProcess = (target) => target.postmaster ?? target.redis?.proc ?? null;

/** CPU of the target's server process and of its store (PostgreSQL or Redis), and of this process (the load generator). */
function sampleCpu(target) {
  const store = storeProcess(target);
  const stats = store ? allStats() : null;
  return {
    server: target.workers ? treeTicks(target.workers) : ownTicks(target.proc.pid),
    store: store ? treeTicks(store, stats) : null,
    loadgen: process.cpuUsage(),
  };
}

function cpuPerRequest(before, after, requests) {
  const perReq = (ticksBefore, ticksAfter) =>
    ticksBefore === null || ticksAfter === null || requests === 0 ? null : (((ticksAfter - ticksBefore) / CLK_TCK) * 1e6) / requests;
  const loadgenUs = after.loadgen.user + after.loadgen.system - (before.loadgen.user + before.loadgen.system);
  return {
    server_cpu_s: before.server === null || after.server === null ? null : round((after.server - before.server) / CLK_TCK, 2),
    store_cpu_s: before.store === null || after.store === null ? null : round((after.store - before.store) / CLK_TCK, 2),
    server_us_per_req: round(perReq(before.server, after.server), 1),
    store_us_per_req: round(perReq(before.store, after.store), 1),
    loadgen_us_per_req: requests === 0 ? null : round(loadgenUs / requests, 1),
  };
}

// ---------------------------------------------------------------------------------------------
// scenarios

const problems = [];
const runRows = []; // one per target x scenario x round

function scenarioTitle(name) {
  if (name === 'push') return `push, ${CONFIG.queues} queues`;
  if (name === 'pop') return `pop, ${CONFIG.queues} queues`;
  if (name === 'hot') return 'hot queue, 50% push / 50% pop';
  if (name === 'depth-shallow') return `push+pop @${fmtCount(CONFIG.shallowItems)}, 1 conn`;
  if (name === 'depth-deep') return `push+pop @${fmtCount(CONFIG.deepItems)}, 1 conn`;
  if (name === 'delayed-none') return `push+pop @${fmtCount(CONFIG.shallowItems)}, no delayed items, 1 conn`;
  if (name === 'ackpop-shared') return `pop with ack + acknowledge, 1 shared queue, ${CONFIG.ackConsumers} conn`;
  if (name === 'ackpop-exclusive') return `pop with ack + acknowledge, 1 exclusive queue, ${CONFIG.ackConsumers} conn`;
  if (name === 'delayed-many') return `push+pop @${fmtCount(CONFIG.shallowItems)} + ${fmtCount(CONFIG.delayedItems)} delayed, 1 conn`;
  return name;
}

function fmtCount(n) {
  return n >= 1_000_000 && n % 1_000_000 === 0 ? `${n / 1_000_000}M` : n >= 1000 && n % 1000 === 0 ? `${n / 1000}k` : String(n);
}

/** Non-2xx (other than 429), errors, timeouts and stops of a run, as problem texts. */
function runIssues(r) {
  const bad = [];
  if (r.stoppedBy) bad.push(`run stopped early (${r.stoppedBy})`);
  if (r.non2xxExcept429 > 0) bad.push(`${r.non2xxExcept429} non-2xx responses other than 429 (${JSON.stringify(r.statusCodes)})`);
  if (r.errors > 0) bad.push(`${r.errors} connection errors`);
  if (r.timeouts > 0) bad.push(`${r.timeouts} requests timed out after ${CONFIG.stallSeconds} s`);
  return bad;
}

/** Unmeasured load of the same shape before a measured run. */
async function warmUp(target, scenario, makeRequests, connections) {
  if (CONFIG.warmupSeconds === 0) return;
  const r = await cannon({ url: target.url, connections, seconds: CONFIG.warmupSeconds, requests: makeRequests(newCounters()) });
  for (const b of runIssues(r)) problems.push(`${target.name} ${scenario} (warm-up): ${b}`);
}

/** A measured run with CPU sampled around it. */
async function measured(target, { connections, seconds, amount, requests, sequence }) {
  const before = sampleCpu(target);
  const r = await cannon({ url: target.url, connections, seconds, amount, requests, sequence });
  const after = sampleCpu(target);
  return { r, cpu: cpuPerRequest(before, after, r.responses) };
}

function record(target, scenario, roundNo, r, cpu, extra = {}) {
  const row = {
    round: roundNo,
    target: target.name,
    scenario,
    title: scenarioTitle(scenario),
    connections: extra.connections ?? CONFIG.connections,
    duration_s: round(r.durationSeconds, 2),
    requests: r.responses,
    req_per_s: Math.round(r.responses / r.durationSeconds),
    latency_ms: r.latency,
    ...(r.latencyByOp ? { latency_ms_by_op: r.latencyByOp } : {}),
    status_codes: r.statusCodes,
    non_2xx: r.non2xx,
    non_2xx_except_429: r.non2xxExcept429,
    http_429: r.count429,
    errors: r.errors,
    timeouts: r.timeouts,
    stopped_by: r.stoppedBy,
    cpu,
    ...extra,
  };
  runRows.push(row);
  const bad = runIssues(r);
  if (row.check && row.check.ok === false) bad.push(`check failed: ${row.check.detail}`);
  if (row.ran_dry) bad.push(`ran dry: ${row.ran_dry_detail}`);
  for (const b of bad) problems.push(`${target.name} ${scenario} round ${roundNo}: ${b}`);
  const storeCpu = storeProcess(target) ? `${fmtNum(cpu.store_us_per_req)} µs/req` : target.pgLocation === 'in process' ? 'in process' : '-';
  progress(
    `    ${fmtNum(row.req_per_s)} req/s, p50 ${fmtMs(r.latency.p50)} ms, p99 ${fmtMs(r.latency.p99)} ms, CPU server ${fmtNum(cpu.server_us_per_req)} µs/req, ${target.redis ? 'Redis' : 'PostgreSQL'} ${storeCpu}` +
      (r.non2xx ? `, non-2xx ${r.non2xx}` : '') +
      (r.errors ? `, errors ${r.errors}` : '') +
      (row.empty_pops ? `, empty pops ${row.empty_pops}` : '') +
      (bad.length ? ` — PROBLEM: ${bad.join('; ')}` : ''),
  );
  return row;
}

function failed(target, scenario, roundNo, error) {
  const message = errorText(error);
  problems.push(`${target.name} ${scenario} round ${roundNo}: FAILED: ${message}`);
  runRows.push({ round: roundNo, target: target.name, scenario, title: scenarioTitle(scenario), failed: message, latency_ms: summarize([]), cpu: {} });
  progress(`    FAILED: ${message}`);
}

/**
 * Requests cut off when a run stops (autocannon closes its connections at the end) may still be
 * running in the server; counts are taken after this pause so that they have landed.
 */
const settle = () => sleep(1000);

const W = () => CONFIG.warmupSeconds;
const S = () => CONFIG.seconds;
const C = () => CONFIG.connections;

async function scenarioPush(target, roundNo) {
  progress(`  ${target.name} · push: ${W()} s warm-up + ${S()} s measured, ${C()} connections, a random queue of ${CONFIG.queues} per request ...`);
  const makeRequests = (counters) => [pushRequest(randomQueue, counters)];
  await warmUp(target, 'push', makeRequests, C());
  await settle();
  const before = sumCounts(await queueCounts(target, QUEUE_IDS));
  const counters = newCounters();
  const { r, cpu } = await measured(target, { connections: C(), seconds: S(), requests: makeRequests(counters) });
  await settle();
  const stored = sumCounts(await queueCounts(target, QUEUE_IDS)) - before;
  // a request cut off when the run stopped may have committed without its response being counted
  const ok = stored >= counters.pushed && stored <= counters.pushed + C();
  const row = record(target, 'push', roundNo, r, cpu, {
    check: { ok, detail: `${stored} items stored in the ${CONFIG.queues} queues for ${counters.pushed} 200 pushes` },
  });
  target.pushRate = Math.max(target.pushRate ?? 0, row.req_per_s);
}

async function scenarioPop(target, roundNo) {
  // Enough per queue that none runs dry: pops are assumed up to popRateFactor x as fast as the
  // target's pushes measured so far, a queue is drawn at random per request (5 standard
  // deviations of headroom), at least minPerQueue, at most BENCH_MAX_PREFILL over all queues.
  const rate = CONFIG.popRateFactor * (target.pushRate ?? CONFIG.defaultPushRate);
  const mean = (rate * (W() + S())) / CONFIG.queues;
  const cap = Math.max(1, Math.floor(CONFIG.maxPrefill / CONFIG.queues));
  const level = Math.min(cap, Math.max(CONFIG.minPerQueue, Math.ceil(mean + 5 * Math.sqrt(mean) + 5)));
  const now = await queueCounts(target, QUEUE_IDS);
  const plan = new Map(QUEUE_IDS.map((id) => [id, Math.max(0, level - now.get(id))]));
  const adding = [...plan.values()].reduce((a, b) => a + b, 0);
  progress(
    `  ${target.name} · pop: pre-filling to ${level} items per queue (${adding.toLocaleString('en-US')} items; ${target.kind === 'pushpop' ? 'batch pushes' : 'single pushes'}, not measured) ...`,
  );
  const fill = await addItems(target, plan, { label: 'pop pre-fill' });
  if (fill.items > 0) progress(`    pre-filled in ${fill.seconds} s (${fmtNum(fill.items_per_s)} items/s)`);
  if (level === cap && mean + 5 * Math.sqrt(mean) + 5 > cap)
    progress(`    note: the pre-fill is capped by BENCH_MAX_PREFILL=${CONFIG.maxPrefill}; raise it if the queues run dry`);
  progress(`  ${target.name} · pop depth 1: ${W()} s warm-up + ${S()} s measured, ${C()} connections, a random queue of ${CONFIG.queues} per request ...`);
  const warm = newCounters();
  if (W() > 0) {
    const r = await cannon({ url: target.url, connections: C(), seconds: W(), requests: [popRequest(randomQueue, warm)] });
    for (const b of runIssues(r)) problems.push(`${target.name} pop (warm-up): ${b}`);
    await settle();
  }
  const beforeCounts = await queueCounts(target, QUEUE_IDS);
  const counters = newCounters();
  const { r, cpu } = await measured(target, { connections: C(), seconds: S(), requests: [popRequest(randomQueue, counters)] });
  await settle();
  const afterCounts = await queueCounts(target, QUEUE_IDS);
  const removed = sumCounts(beforeCounts) - sumCounts(afterCounts);
  const emptied = QUEUE_IDS.filter((id) => afterCounts.get(id) === 0).length;
  const empty = counters.emptyPops + warm.emptyPops;
  const ranDry = empty > 0 || emptied > 0;
  const ok = counters.unparsable === 0 && removed >= counters.popped && removed <= counters.popped + C();
  record(target, 'pop', roundNo, r, cpu, {
    prefill: { per_queue: level, added: fill.items, seconds: fill.seconds },
    popped_items: counters.popped,
    empty_pops: counters.emptyPops,
    empty_pops_warmup: warm.emptyPops,
    queues_emptied: emptied,
    items_left: sumCounts(afterCounts),
    ran_dry: ranDry,
    ran_dry_detail: ranDry ? `${empty} empty pop(s), ${emptied} queue(s) empty at the end; raise BENCH_MAX_PREFILL` : undefined,
    check: { ok, detail: `${removed} items left the queues, ${counters.popped} received in 200 pops, ${counters.unparsable} unparsable bodies` },
  });
}

async function scenarioHot(target, roundNo) {
  const now = (await queueCounts(target, [HOT_QUEUE])).get(HOT_QUEUE);
  if (now < CONFIG.hotBacklog) {
    progress(`  ${target.name} · hot: topping ${HOT_QUEUE} up to ${CONFIG.hotBacklog} items (not measured) ...`);
    await addItems(target, new Map([[HOT_QUEUE, CONFIG.hotBacklog - now]]), { label: 'hot pre-fill' });
  }
  progress(`  ${target.name} · hot: ${W()} s warm-up + ${S()} s measured, ${C()} connections alternating push and pop on one queue ...`);
  const makeRequests = (counters) => [pushRequest(() => HOT_QUEUE, counters), popRequest(() => HOT_QUEUE, counters)];
  await warmUp(target, 'hot', makeRequests, C());
  await settle();
  const before = (await queueCounts(target, [HOT_QUEUE])).get(HOT_QUEUE);
  const counters = newCounters();
  const { r, cpu } = await measured(target, { connections: C(), seconds: S(), requests: makeRequests(counters) });
  await settle();
  const after = (await queueCounts(target, [HOT_QUEUE])).get(HOT_QUEUE);
  const expected = before + counters.pushed - counters.popped;
  const ok = counters.unparsable === 0 && Math.abs(after - expected) <= C();
  record(target, 'hot', roundNo, r, cpu, {
    backlog_before: before,
    backlog_after: after,
    pushed_items: counters.pushed,
    popped_items: counters.popped,
    empty_pops: counters.emptyPops,
    check: { ok, detail: `${before} + ${counters.pushed} pushed - ${counters.popped} popped = ${expected}, queue holds ${after}` },
  });
}

/** pushpop only: push+pop latency on one connection at a shallow and at a deep queue, and the service's RSS while the deep queue fills. */
async function scenarioDepth(target, roundNo) {
  if (!target.depthFilled) {
    const counts = await queueCounts(target, [SHALLOW_QUEUE, DEEP_QUEUE]);
    const plan = new Map([
      [SHALLOW_QUEUE, Math.max(0, CONFIG.shallowItems - counts.get(SHALLOW_QUEUE))],
      [DEEP_QUEUE, Math.max(0, CONFIG.deepItems - counts.get(DEEP_QUEUE))],
    ]);
    progress(
      `  ${target.name} · depth: filling ${SHALLOW_QUEUE} with ${fmtNum(CONFIG.shallowItems)} and ${DEEP_QUEUE} with ${fmtNum(CONFIG.deepItems)} items (batch pushes of ${CONFIG.batchSize}, priority 0, not measured; RSS sampled) ...`,
    );
    const rssBefore = rssKb(target.proc.pid);
    let peak = rssBefore ?? 0;
    const sampler = setInterval(() => (peak = Math.max(peak, rssKb(target.proc.pid) ?? 0)), 250);
    let fill;
    try {
      fill = await addItems(target, plan, { priority: 0, label: 'depth fill' });
    } finally {
      clearInterval(sampler);
    }
    const rssAfter = rssKb(target.proc.pid);
    target.depthFill = {
      items: fill.items,
      seconds: fill.seconds,
      items_per_s: fill.items_per_s,
      rss_before_kb: rssBefore,
      rss_peak_kb: Math.max(peak, rssAfter ?? 0),
      rss_after_kb: rssAfter,
    };
    target.depthFilled = true;
    progress(`    filled in ${fill.seconds} s; RSS ${fmtMb(rssBefore)} before, ${fmtMb(target.depthFill.rss_peak_kb)} peak, ${fmtMb(rssAfter)} after`);
  }
  const ops = CONFIG.depthOps - (CONFIG.depthOps % 2);
  for (const [queue, depth, name] of [
    [SHALLOW_QUEUE, CONFIG.shallowItems, 'depth-shallow'],
    [DEEP_QUEUE, CONFIG.deepItems, 'depth-deep'],
  ]) {
    try {
      progress(
        `  ${target.name} · ${scenarioTitle(name)}: ${ops.toLocaleString('en-US')} requests alternating push and pop (priority 0) after 200 unmeasured ...`,
      );
      const warm = newCounters();
      await cannon({ url: target.url, connections: 1, amount: 200, requests: [pushRequest(() => queue, warm, 0), popRequest(() => queue, warm)] });
      const counters = newCounters();
      const { r, cpu } = await measured(target, {
        connections: 1,
        amount: ops,
        requests: [pushRequest(() => queue, counters, 0), popRequest(() => queue, counters)],
        sequence: ['push', 'pop'],
      });
      const left = (await queueCounts(target, [queue])).get(queue);
      const ok = counters.emptyPops === 0 && warm.emptyPops === 0 && counters.unparsable === 0 && left === depth && counters.popped === ops / 2;
      record(target, name, roundNo, r, cpu, {
        connections: 1,
        queue_depth: depth,
        popped_items: counters.popped,
        empty_pops: counters.emptyPops,
        check: { ok, detail: `${counters.popped} popped of ${ops / 2} pops, ${left} items left (expected ${depth})` },
      });
    } catch (error) {
      failed(target, name, roundNo, error);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// ackpop: competing consumers, pop with ack then acknowledge, on one shared vs one exclusive queue

const ACK_TTL_SECONDS = 5;

/** Whether the queue holds no live lock (exclusive: `lock` null; shared: `locks.count` 0). */
async function noLiveLock(target, queue) {
  const { status, body } = await httpRequest(target.url, 'GET', `/queue/${encodeURIComponent(queue)}`);
  if (status !== 200) throw new Error(`GET /queue/${queue}: ${status} ${JSON.stringify(body).slice(0, 200)}`);
  return body.locks ? body.locks.count === 0 : body.lock === null;
}

/**
 * One connection's loop: a pop with ack (depth 1), then, if it got a lock, its acknowledge; a
 * 423 or an empty pop starts the loop over (autocannon restarts at the first request when
 * setupRequest returns nothing).
 */
function ackPopRequests(queue, counters) {
  return [
    {
      method: 'POST',
      path: `/queue/${queue}/pop?require_ack=true&depth=1&ttl_seconds=${ACK_TTL_SECONDS}`,
      onResponse: (status, body, context) => {
        context.lockId = undefined;
        if (status === 423) counters.locked += 1;
        if (status !== 200) return;
        try {
          const parsed = JSON.parse(body);
          if (parsed.locked) context.lockId = parsed.lock_id;
          else counters.emptyPops += 1;
        } catch {
          counters.unparsable += 1;
        }
      },
    },
    {
      method: 'POST',
      path: `/queue/${queue}/acknowledge`,
      headers: JSON_HEADERS,
      setupRequest: (req, context) => (context.lockId ? { ...req, body: `{"lock_id":"${context.lockId}"}` } : null),
      onResponse: (status, body) => {
        if (status !== 200) return;
        try {
          counters.acked += JSON.parse(body).items_acknowledged;
        } catch {
          counters.unparsable += 1;
        }
      },
    },
  ];
}

async function scenarioAckPop(target, roundNo) {
  const conns = CONFIG.ackConsumers;
  for (const [mode, name] of [
    ['shared', 'ackpop-shared'],
    ['exclusive', 'ackpop-exclusive'],
  ]) {
    const queue = `bench-ack-${mode}`;
    try {
      if (!target.ackModes?.has(mode)) {
        const { status, body } = await httpRequest(target.url, 'PUT', `/queue/${queue}/settings`, JSON.stringify({ lock_mode: mode }));
        if (status !== 200) throw new Error(`PUT /queue/${queue}/settings: ${status} ${JSON.stringify(body).slice(0, 200)}`);
        (target.ackModes ??= new Set()).add(mode);
      }
      const now = (await queueCounts(target, [queue])).get(queue);
      if (now < CONFIG.ackItems) {
        progress(`  ${target.name} · ${name}: topping ${queue} up to ${fmtNum(CONFIG.ackItems)} items (not measured) ...`);
        await addItems(target, new Map([[queue, CONFIG.ackItems - now]]), { label: `${name} pre-fill` });
      }
      progress(`  ${target.name} · ${scenarioTitle(name)}: ${W()} s warm-up + ${S()} s measured ...`);
      const warm = { ...newCounters(), acked: 0, locked: 0 };
      if (W() > 0) {
        const r = await cannon({ url: target.url, connections: conns, seconds: W(), requests: ackPopRequests(queue, warm) });
        if (r.stoppedBy || r.errors > 0) problems.push(`${target.name} ${name} (warm-up): ${runIssues(r).join('; ')}`);
      }
      // A lock left by a cut-off cycle would block an exclusive queue until it expires.
      const deadline = Date.now() + (ACK_TTL_SECONDS + 5) * 1000;
      while (!(await noLiveLock(target, queue)) && Date.now() < deadline) await sleep(100);
      const before = (await queueCounts(target, [queue])).get(queue);
      const counters = { ...newCounters(), acked: 0, locked: 0 };
      const cpuBefore = sampleCpu(target);
      const r = await cannon({ url: target.url, connections: conns, seconds: S(), requests: ackPopRequests(queue, counters) });
      const cpuAfter = sampleCpu(target);
      await settle();
      const after = (await queueCounts(target, [queue])).get(queue);
      // 423 is the exclusive mode's answer while another connection's lock lives: expected here.
      const count423 = r.statusCodes['423'] ?? 0;
      const rr = { ...r, non2xxExcept429: r.non2xxExcept429 - count423 };
      const cycles = counters.acked;
      const taken = before - after;
      // Items popped by cycles cut off at the end are held by locks (not in the count) until they expire.
      const ok = counters.unparsable === 0 && counters.emptyPops === 0 && taken >= cycles && taken <= cycles + conns;
      const row = record(target, name, roundNo, rr, cpuPerRequest(cpuBefore, cpuAfter, cycles), {
        connections: conns,
        responses_per_s: Math.round(r.responses / r.durationSeconds),
        cycles,
        http_423: count423,
        empty_pops: counters.emptyPops,
        ran_dry: counters.emptyPops > 0 || warm.emptyPops > 0,
        ran_dry_detail: `${counters.emptyPops + warm.emptyPops} empty pop(s); raise BENCH_ACK_ITEMS`,
        check: {
          ok,
          detail: `${taken} items left the queue, ${cycles} acknowledged, ${counters.emptyPops} empty pops, ${counters.unparsable} unparsable bodies`,
        },
      });
      row.req_per_s = Math.round(cycles / r.durationSeconds);
      progress(`    = ${fmtNum(row.req_per_s)} cycles/s (${fmtNum(row.responses_per_s)} responses/s, ${fmtNum(count423)} × 423)`);
    } catch (error) {
      failed(target, name, roundNo, error);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// longpoll: idle consumers, then one push each

/** The connection string of a pushpop target's database (the embedded server's socket and password, or pushpop_bench). */
function pushpopDatabaseUrl(target) {
  if (target.db) return dbUrl(target.db);
  const pgdata = join(target.dataDir, 'postgres');
  // postmaster.pid line 5: the unix socket's directory
  const socketDir = readFileSync(join(pgdata, 'postmaster.pid'), 'utf8').split('\n')[4].trim();
  const password = readFileSync(join(target.dataDir, 'postgres.password'), 'utf8').trim();
  return `postgresql://pushpop:${encodeURIComponent(password)}@localhost:5432/postgres?host=${encodeURIComponent(socketDir)}`;
}

/** Transactions committed or rolled back in the target's database so far (pg_stat_database). */
async function transactionsOf(client) {
  const { rows } = await client.query('SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = current_database()');
  return Number(rows[0].n);
}

/** Numbers of pushpop's /metrics: `name` or `name{labels}` → value. */
async function metricsOf(url) {
  const res = await httpRequest(url, 'GET', '/metrics', null, 10_000);
  if (res.status !== 200 || typeof res.body !== 'string') throw new Error(`GET /metrics: ${res.status}`);
  const out = new Map();
  for (const line of res.body.split('\n')) {
    const m = /^(pushpop_[a-z_]+(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (m) out.set(m[1], Number(m[2]));
  }
  return out;
}

/** A second pushpop process on the target's database (pushes go through it), started on first use and kept to the end. */
async function secondProcess(target) {
  if (target.second) return target.second;
  const port = await freePort();
  const dataDir = mkdtempSync(join(os.tmpdir(), 'pushpop-bench-second-'));
  tempDirs.add(dataDir);
  const env = { ...pushpopEnv(port), DATA_DIR: dataDir, DATABASE_URL: pushpopDatabaseUrl(target) };
  progress(`  ${target.name}: starting a second pushpop process on the same database ...`);
  const { proc } = await startServer({
    label: `${target.name} (second process)`,
    args: [join(pushpopDir, 'dist/main.js')],
    env,
    cwd: pushpopDir,
    port,
    readyPath: '/health/ready',
  });
  target.second = { proc, dataDir };
  // Like every measured window, the pushes through the new process start after a warm-up:
  // BENCH_WARMUP_SECONDS of pushes to new queues through it, each popped through the first.
  if (CONFIG.warmupSeconds > 0) {
    progress(`  ${target.name}: warming the second process up for ${CONFIG.warmupSeconds} s (pushes through it, pops through the first; not measured) ...`);
    const until = performance.now() + CONFIG.warmupSeconds * 1000;
    const stamp = Date.now().toString(36);
    let next = 0;
    await Promise.all(
      Array.from({ length: CONFIG.longPollInFlight }, async () => {
        while (performance.now() < until) {
          const id = `lp-warm-${stamp}-${next++}`;
          for (const [url, path, body] of [
            [proc.url, 'push', '{"item":{"warm":true}}'],
            [target.url, 'pop', null],
          ]) {
            const { status } = await httpRequest(url, 'POST', `/queue/${encodeURIComponent(id)}/${path}`, body);
            if (status !== 200) throw new Error(`warm-up ${path} on ${id}: ${status}`);
          }
        }
      }),
    );
  }
  return target.second;
}

/**
 * One long poll (`wait_seconds=20`) on its own keep-alive connection; `onSent` runs once the
 * request is written (the connection is open).
 */
function longPollRequest(url, queueId, pollAgent, onSent) {
  return new Promise((resolvePoll) => {
    const req = http.request(new URL(`/queue/${encodeURIComponent(queueId)}/pop?wait_seconds=20`, url), { method: 'POST', agent: pollAgent }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        clearTimeout(timer);
        const at = performance.now();
        try {
          resolvePoll({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8')), at });
        } catch {
          resolvePoll({ status: res.statusCode ?? 0, body: null, at });
        }
      });
      res.on('error', (error) => resolvePoll({ status: 0, error: errorText(error), at: performance.now() }));
    });
    const timer = setTimeout(() => req.destroy(new Error('no answer within 45 s')), 45_000);
    req.on('error', (error) => {
      clearTimeout(timer);
      onSent?.();
      resolvePoll({ status: 0, error: errorText(error), at: performance.now() });
    });
    req.on('finish', () => onSent?.());
    req.end();
  });
}

/**
 * pushpop only. `BENCH_LONGPOLL_POLLS` consumers each long-poll (`wait_seconds=20`) a queue of
 * their own that was never pushed to; once all of them wait, nothing happens for
 * `BENCH_LONGPOLL_IDLE_SECONDS` while the database's transactions (pg_stat_database), the
 * service's CPU and PostgreSQL's CPU are measured; then every queue gets one push,
 * `BENCH_LONGPOLL_IN_FLIGHT` at a time, in the order the polls started, through the same process
 * or through a second one on the same database; every consumer must receive its item; the
 * latency is (poll answered − that queue's push answered). A consumer whose poll ends empty
 * polls again (counted), as a real one would.
 */
async function scenarioLongPoll(target, roundNo) {
  if (!target.longPollWarm) {
    // Unmeasured: a fresh service opens its first thousands of polls slower (code not yet optimised by V8).
    target.longPollWarm = true;
    const warm = Array.from({ length: Math.min(2000, CONFIG.longPolls) }, (_, i) => `lp-warm-${i}-${Date.now().toString(36)}`);
    await forEachLimit(warm, 200, async (id) => {
      await httpRequest(target.url, 'POST', `/queue/${encodeURIComponent(id)}/pop?wait_seconds=1`, null, 30_000);
    });
  }
  for (const processes of CONFIG.longPollProcesses) {
    const name = `longpoll-${processes}p`;
    try {
      await longPollRun(target, roundNo, processes, name);
    } catch (error) {
      failed(target, name, roundNo, error);
    }
  }
}

async function longPollRun(target, roundNo, processes, name) {
  const n = CONFIG.longPolls;
  const pusher = processes === 2 ? (await secondProcess(target)).proc : target.proc;
  const ids = Array.from({ length: n }, (_, i) => `lp-${roundNo}-${processes}-${i}-${Date.now().toString(36)}`);
  const pollAgent = new http.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: n + 16 });
  const monitor = new pg.Client({ connectionString: pushpopDatabaseUrl(target), application_name: 'pushpop-bench-monitor' });
  await monitor.connect();
  const waitingNow = async () => (await metricsOf(target.url)).get('pushpop_long_polls_waiting') ?? 0;
  // consumers give up polling again after this (set once every push answered, or when the run fails)
  let giveUpAt = Infinity;
  let sampling = true;
  try {
    progress(
      `  ${target.name} · long polls, ${processes === 2 ? 'pushes through a second process' : 'one process'}: opening ${fmtNum(n)} long polls on empty queues ...`,
    );
    // polls of an earlier run that failed end when their connections close; give them time
    for (let i = 0; i < 100 && (await waitingNow()) !== 0; i++) await sleep(250);
    const baseline = await waitingNow();
    if (baseline !== 0) throw new Error(`${baseline} long polls already waiting before the run`);
    const rssBefore = rssKb(target.proc.pid);
    const wakeBefore = await metricsOf(target.url);
    const opened = performance.now();

    // Consumers. At most 256 connections opening at a time (the listen backlog is finite), and
    // at most 400 polls sent and not yet waiting (in their first turn), read from the service's
    // gauge: more would only queue for the service's database connections.
    const answeredAt = new Array(n).fill(null);
    // whether a consumer's wait ran out (an empty answer) before it received its item
    const repolledBefore = new Array(n).fill(false);
    const errors = [];
    let repolls = 0;
    let repollsInWindow = 0;
    let answeredInWindow = 0;
    let inWindow = false;
    let sending = 0;
    const slots = [];
    const slot = async () => {
      while (sending >= 256) await new Promise((r) => slots.push(r));
      sending += 1;
    };
    const release = () => {
      sending -= 1;
      slots.shift()?.();
    };
    const consumers = [];
    let parked = 0;
    const sampler = (async () => {
      while (sampling) {
        parked = await waitingNow().catch(() => parked);
        await sleep(100);
      }
    })();
    let firstSentAt = null;
    for (let i = 0; i < n; i++) {
      while (i - parked > 400 && errors.length === 0) await sleep(20);
      if (errors.length > 0) break;
      await slot();
      firstSentAt ??= performance.now();
      const first = longPollRequest(target.url, ids[i], pollAgent, release);
      consumers.push(
        (async () => {
          let res = await first;
          for (;;) {
            if (res.status === 200 && res.body?.count > 0) {
              answeredAt[i] = res.at;
              if (inWindow) answeredInWindow += 1;
              return;
            }
            if (res.status !== 200) errors.push(`${ids[i]}: ${res.status} ${res.error ?? JSON.stringify(res.body).slice(0, 200)}`);
            if (performance.now() > giveUpAt || interrupted || errors.length > 100) return;
            repolls += 1;
            repolledBefore[i] = true;
            if (inWindow) repollsInWindow += 1;
            if (res.status !== 200) await sleep(100);
            res = await longPollRequest(target.url, ids[i], pollAgent);
          }
        })(),
      );
    }
    const deadline = Date.now() + 60_000;
    const allSent = performance.now();
    while (parked < n) {
      // A build whose polls go back to a turn every so often never shows them all waiting at once
      // (BENCH_PUSHPOP_DIR with an older build): go on 5 s after the last poll was sent.
      if (performance.now() - allSent > 5000 && parked >= n / 2) break;
      if (Date.now() > deadline) throw new Error(`only ${parked} of ${fmtNum(n)} long polls waiting after 60 s`);
      if (errors.length > 0) throw new Error(`long polls failed: ${errors[0]}`);
      await sleep(100);
    }
    sampling = false;
    await sampler;
    const waitingAtStart = parked;
    const openSeconds = (performance.now() - opened) / 1000;
    const rssWaiting = rssKb(target.proc.pid);
    const openedAt = performance.now();
    // The window ends before the first poll's 20 s are up (its answer and the poll after it would be counted).
    const windowMs = Math.min(CONFIG.longPollIdleSeconds * 1000, firstSentAt + 20_000 - 1_500 - 1_500 - performance.now());
    if (windowMs < 1000)
      throw new Error(
        `opening ${fmtNum(n)} long polls took ${openSeconds.toFixed(1)} s: no time is left for an idle window before the first poll's 20 s are up (lower BENCH_LONGPOLL_POLLS)`,
      );
    progress(
      `    ${fmtNum(waitingAtStart)}${waitingAtStart < n ? ` (of ${fmtNum(n)} sent; the others in a turn)` : ''} polls waiting after ${openSeconds.toFixed(1)} s; idle for ${(windowMs / 1000).toFixed(1)} s (measured)${windowMs < CONFIG.longPollIdleSeconds * 1000 ? `, shortened: the first poll's 20 s end then` : ''} ...`,
    );

    // PostgreSQL reports a backend's transactions up to 10 s late when it went idle less than a
    // second after its last report, so what the polls' first turns ran could land in the window.
    // A backend reports everything when it exits: the service's idle connections are closed (the
    // pool opens new ones when it needs them; the notification connection comes back by itself).
    await sleep(Math.max(0, 1000 - (performance.now() - openedAt)));
    const { rowCount: closedConnections } = await monitor.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name IN ('pushpop', 'pushpop-notifications') AND state = 'idle' AND pid <> pg_backend_pid()`,
    );
    for (const proc of processes === 2 ? [target.proc, pusher] : [target.proc]) {
      for (let i = 0; i < 50 && (await metricsOf(proc.url)).get('pushpop_notifications_listening') !== 1; i++) await sleep(20);
    }
    await sleep(200);

    inWindow = true;
    const t0 = performance.now();
    const xact0 = await transactionsOf(monitor);
    const cpu0 = {
      server: ownTicks(target.proc.pid),
      pusher: processes === 2 ? ownTicks(pusher.pid) : null,
      postgres: target.postmaster ? treeTicks(target.postmaster) : null,
    };
    await sleep(windowMs);
    const xact1 = await transactionsOf(monitor);
    const cpu1 = {
      server: ownTicks(target.proc.pid),
      pusher: processes === 2 ? ownTicks(pusher.pid) : null,
      postgres: target.postmaster ? treeTicks(target.postmaster) : null,
    };
    const windowSeconds = (performance.now() - t0) / 1000;
    inWindow = false;
    const waitingAfterIdle = await waitingNow();
    const pct = (a, b) => (a === null || b === null ? null : round(((b - a) / CLK_TCK / windowSeconds) * 100, 1));
    const idle = {
      seconds: round(windowSeconds, 2),
      transactions: xact1 - xact0,
      transactions_per_s: round((xact1 - xact0) / windowSeconds, 1),
      pool_connections_closed_before: closedConnections,
      server_cpu_pct: pct(cpu0.server, cpu1.server),
      pusher_cpu_pct: pct(cpu0.pusher, cpu1.pusher),
      postgres_cpu_pct: pct(cpu0.postgres, cpu1.postgres),
      polls_answered: answeredInWindow,
      repolls: repollsInWindow,
      waiting_after: waitingAfterIdle,
    };
    progress(
      `    idle: ${idle.transactions_per_s} transactions/s, service CPU ${idle.server_cpu_pct}% of a core, PostgreSQL CPU ${idle.postgres_cpu_pct ?? '-'}%; pushing one item to each queue, ${CONFIG.longPollInFlight} in flight${processes === 2 ? ' through the second process' : ''} ...`,
    );

    const pushedAt = new Array(n).fill(null);
    const cpu2 = {
      server: ownTicks(target.proc.pid),
      pusher: processes === 2 ? ownTicks(pusher.pid) : null,
      postgres: target.postmaster ? treeTicks(target.postmaster) : null,
    };
    const pushStarted = performance.now();
    await forEachLimit(ids, CONFIG.longPollInFlight, async (id, i) => {
      const { status, body } = await httpRequest(pusher.url, 'POST', `/queue/${encodeURIComponent(id)}/push`, `{"item":{"i":${i}}}`);
      if (status !== 200) throw new Error(`push to ${id}: ${status} ${JSON.stringify(body).slice(0, 200)}`);
      pushedAt[i] = performance.now();
    });
    const pushSeconds = (performance.now() - pushStarted) / 1000;
    const cpu3 = {
      server: ownTicks(target.proc.pid),
      pusher: processes === 2 ? ownTicks(pusher.pid) : null,
      postgres: target.postmaster ? treeTicks(target.postmaster) : null,
    };
    const busy = (a, b) => (a === null || b === null ? null : round(((b - a) / CLK_TCK / pushSeconds) * 100, 1));
    const pushCpu = {
      server_cpu_pct: busy(cpu2.server, cpu3.server),
      pusher_cpu_pct: busy(cpu2.pusher, cpu3.pusher),
      postgres_cpu_pct: busy(cpu2.postgres, cpu3.postgres),
    };
    giveUpAt = performance.now() + 30_000;
    await Promise.race([Promise.all(consumers), sleep(60_000)]);
    giveUpAt = 0;
    const received = answeredAt.filter((a) => a !== null).length;
    const latencies = answeredAt.map((a, i) => (a === null || pushedAt[i] === null ? null : a - pushedAt[i])).filter((x) => x !== null);
    const latency = summarize(latencies);
    // Split: consumers whose first poll received the item, and those whose 20 s wait had run out
    // first (the push phase outlasted it), who received it through a poll sent again.
    const latencyOf = (repolled) =>
      summarize(answeredAt.flatMap((a, i) => (a === null || pushedAt[i] === null || repolledBefore[i] !== repolled ? [] : [a - pushedAt[i]])));
    const firstPoll = latencyOf(false);
    const afterRepoll = latencyOf(true);
    const wakeAfter = await metricsOf(target.url);
    const wake = (cause) =>
      (wakeAfter.get(`pushpop_long_poll_wake_ups_total{cause="${cause}"}`) ?? 0) - (wakeBefore.get(`pushpop_long_poll_wake_ups_total{cause="${cause}"}`) ?? 0);
    const row = {
      round: roundNo,
      target: target.name,
      scenario: name,
      title: `long polls, ${processes === 2 ? 'pushes through a second process' : 'one process'}`,
      processes,
      polls: n,
      waiting_at_start: waitingAtStart,
      open_seconds: round(openSeconds, 2),
      memory_per_poll_kb: rssBefore && rssWaiting ? round((rssWaiting - rssBefore) / n, 2) : null,
      idle,
      push_seconds: round(pushSeconds, 2),
      push_cpu: pushCpu,
      pushes_per_s: Math.round(n / pushSeconds),
      received,
      repolls,
      wake_ups: { local: wake('local'), notification: wake('notification'), recheck: wake('recheck') },
      notifications_received:
        (wakeAfter.get('pushpop_notifications_total{direction="received"}') ?? 0) - (wakeBefore.get('pushpop_notifications_total{direction="received"}') ?? 0),
      latency_ms: latency,
      latency_first_poll_ms: firstPoll,
      latency_after_repoll_ms: afterRepoll,
      // the median latency of each tenth of the queues, in push order: shows whether it grew as the pushes went on
      latency_p50_ms_by_tenth: Array.from({ length: 10 }, (_, k) => {
        const part = answeredAt.slice(Math.floor((k * n) / 10), Math.floor(((k + 1) * n) / 10)).map((a, j) => {
          const i = Math.floor((k * n) / 10) + j;
          return a === null || pushedAt[i] === null ? null : a - pushedAt[i];
        });
        return summarize(part.filter((x) => x !== null)).p50;
      }),
      errors: errors.slice(0, 20),
      error_count: errors.length,
      cpu: {},
    };
    runRows.push(row);
    const bad = [];
    if (received !== n) bad.push(`${n - received} of ${fmtNum(n)} consumers did not receive their item`);
    if (errors.length > 0) bad.push(`${errors.length} failed polls (${errors[0]})`);
    if (idle.polls_answered > 0 || idle.repolls > 0 || (waitingAtStart === n && idle.waiting_after !== n))
      bad.push(`the idle window was not idle (${idle.polls_answered} answered, ${idle.repolls} re-polls, ${idle.waiting_after} waiting at its end)`);
    for (const b of bad) problems.push(`${target.name} ${name} round ${roundNo}: ${b}`);
    const misses = [];
    if (idle.transactions_per_s > 20) misses.push(`${idle.transactions_per_s} transactions/s > 20`);
    if (idle.server_cpu_pct !== null && idle.server_cpu_pct > 10) misses.push(`service CPU ${idle.server_cpu_pct}% > 10%`);
    if (latency.p99 !== null && latency.p99 > 200) misses.push(`p99 ${fmtMs(latency.p99)} ms > 200 ms`);
    row.target_missed = misses;
    progress(
      `    ${fmtNum(received)} of ${fmtNum(n)} received; poll answered − push answered p50 ${fmtMs(latency.p50)} ms, p99 ${fmtMs(latency.p99)} ms, max ${fmtMs(latency.max)} ms; ` +
        `(first poll: ${fmtNum(firstPoll.count)}, p99 ${fmtMs(firstPoll.p99)} ms; after its wait ran out: ${fmtNum(afterRepoll.count)}, p99 ${fmtMs(afterRepoll.p99)} ms); ` +
        `pushes ${fmtNum(row.pushes_per_s)}/s; ${repolls} re-polls; wake-ups local ${row.wake_ups.local}, notification ${row.wake_ups.notification}, re-check ${row.wake_ups.recheck}; ` +
        `${row.memory_per_poll_kb ?? '-'} KB RSS per waiting poll` +
        (misses.length ? ` — target missed: ${misses.join('; ')}` : '') +
        (bad.length ? ` — PROBLEM: ${bad.join('; ')}` : ''),
    );
  } finally {
    giveUpAt = 0;
    sampling = false;
    pollAgent.destroy();
    await monitor.end().catch(() => undefined);
  }
}

/**
 * pushpop only: push+pop latency on one connection on a queue with BENCH_DELAYED_ITEMS delayed
 * items (not due during the run) beside the same on a queue with none. Delayed items live in a
 * table of their own and a turn reads them only when the queue's earliest due time has passed,
 * so the two should not differ.
 */
async function scenarioDelayed(target, roundNo) {
  if (!target.delayedFilled) {
    const counts = await queueCounts(target, [PLAIN_QUEUE, DELAYED_QUEUE]);
    const plan = new Map([
      [PLAIN_QUEUE, Math.max(0, CONFIG.shallowItems - counts.get(PLAIN_QUEUE))],
      [DELAYED_QUEUE, Math.max(0, CONFIG.shallowItems - counts.get(DELAYED_QUEUE))],
    ]);
    await addItems(target, plan, { priority: 0, label: 'delayed scenario fill' });
    const started = performance.now();
    progress(
      `  ${target.name} · delayed: pushing ${fmtNum(CONFIG.delayedItems)} items with delay_seconds ${BENCH_DELAY_SECONDS} to ${DELAYED_QUEUE} (batch pushes of ${CONFIG.batchSize}, not measured) ...`,
    );
    const batches = [];
    for (let off = 0; off < CONFIG.delayedItems; off += CONFIG.batchSize) batches.push(Math.min(CONFIG.batchSize, CONFIG.delayedItems - off));
    await forEachLimit(batches, 4, async (n) => {
      const entries = [];
      for (let i = 0; i < n; i++) entries.push(`{"item":${itemJson()},"priority":${randomPriority()},"delay_seconds":${BENCH_DELAY_SECONDS}}`);
      const { status, body } = await httpRequest(target.url, 'POST', `/queue/${DELAYED_QUEUE}/push/batch`, `{"items":[${entries.join(',')}]}`, 120_000);
      if (status !== 200 || body?.count !== n) throw new Error(`delayed batch push of ${n}: ${status} ${JSON.stringify(body).slice(0, 200)}`);
    });
    const { status, body } = await httpRequest(target.url, 'GET', `/queue/${DELAYED_QUEUE}`);
    if (status !== 200 || body?.delayed < CONFIG.delayedItems)
      throw new Error(`${DELAYED_QUEUE} shows ${JSON.stringify(body?.delayed)} delayed items, expected ${CONFIG.delayedItems}`);
    progress(`    pushed in ${round((performance.now() - started) / 1000, 1)} s; ${DELAYED_QUEUE} shows ${fmtNum(body.delayed)} delayed`);
    target.delayedFilled = true;
  }
  const ops = CONFIG.depthOps - (CONFIG.depthOps % 2);
  for (const [queue, name] of [
    [PLAIN_QUEUE, 'delayed-none'],
    [DELAYED_QUEUE, 'delayed-many'],
  ]) {
    try {
      progress(
        `  ${target.name} · ${scenarioTitle(name)}: ${ops.toLocaleString('en-US')} requests alternating push and pop (priority 0) after 200 unmeasured ...`,
      );
      const warm = newCounters();
      await cannon({ url: target.url, connections: 1, amount: 200, requests: [pushRequest(() => queue, warm, 0), popRequest(() => queue, warm)] });
      const counters = newCounters();
      const { r, cpu } = await measured(target, {
        connections: 1,
        amount: ops,
        requests: [pushRequest(() => queue, counters, 0), popRequest(() => queue, counters)],
        sequence: ['push', 'pop'],
      });
      const left = (await queueCounts(target, [queue])).get(queue);
      const ok = counters.emptyPops === 0 && warm.emptyPops === 0 && counters.unparsable === 0 && left === CONFIG.shallowItems && counters.popped === ops / 2;
      record(target, name, roundNo, r, cpu, {
        connections: 1,
        queue_depth: CONFIG.shallowItems,
        popped_items: counters.popped,
        empty_pops: counters.emptyPops,
        check: { ok, detail: `${counters.popped} popped of ${ops / 2} pops, ${left} items left (expected ${CONFIG.shallowItems})` },
      });
    } catch (error) {
      failed(target, name, roundNo, error);
    }
  }
}

const SCENARIO_FNS = {
  push: scenarioPush,
  pop: scenarioPop,
  hot: scenarioHot,
  depth: scenarioDepth,
  delayed: scenarioDelayed,
  longpoll: scenarioLongPoll,
  ackpop: scenarioAckPop,
};

/** Unmeasured: one push to every queue the scenarios use, so every target has created its queues (pg-boss: one partition each). */
async function setUpQueues(target) {
  const ids = [...(CONFIG.scenarios.some((s) => s === 'push' || s === 'pop') ? QUEUE_IDS : []), ...(CONFIG.scenarios.includes('hot') ? [HOT_QUEUE] : [])];
  if (ids.length === 0) return;
  progress(`  ${target.name}: one push to each of the ${ids.length} queues (creates them; not measured) ...`);
  const t0 = performance.now();
  const counts = await queueCounts(target, ids);
  const plan = new Map(ids.filter((id) => counts.get(id) === 0).map((id) => [id, 1]));
  if (target.kind === 'pushpop') {
    // through the single push route here too, like the peers
    const deadline = Date.now() + CONFIG.prefillTimeoutSeconds * 1000;
    await forEachLimit([...plan.keys()], 16, async (id) => {
      if (Date.now() > deadline) throw new Error(`creating the queues took longer than BENCH_PREFILL_TIMEOUT=${CONFIG.prefillTimeoutSeconds} s`);
      const { status, body } = await httpRequest(target.url, 'POST', `/queue/${encodeURIComponent(id)}/push`, pushBody());
      if (status !== 200) throw new Error(`push to ${id}: ${status} ${JSON.stringify(body).slice(0, 200)}`);
    });
  } else {
    await addItems(target, plan, { label: 'queue set-up' });
  }
  progress(`    done in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}

// ---------------------------------------------------------------------------------------------
// output

function fmtNum(n) {
  return n === null || n === undefined ? '-' : Math.round(n).toLocaleString('en-US');
}
function fmtMs(n) {
  return n === null || n === undefined ? '-' : n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : n.toFixed(0);
}
function fmtMb(kb) {
  return kb === null || kb === undefined ? '-' : `${(kb / 1024).toFixed(0)} MB`;
}
function fmtRatio(a, b) {
  return a && b ? `${(a / b).toFixed(2)}x` : '-';
}

function table(headers, body, alignRight) {
  const widths = headers.map((h, i) => Math.max(h.length, ...body.map((r) => String(r[i]).length)));
  const fmt = (cells) => cells.map((c, i) => (alignRight[i] ? String(c).padStart(widths[i]) : String(c).padEnd(widths[i]))).join('  ');
  return [fmt(headers), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(fmt)].map((line) => line.trimEnd()).join('\n');
}

function markdownTable(headers, body, alignRight) {
  const esc = (c) => String(c).replace(/\|/g, '\\|');
  return [
    `| ${headers.map(esc).join(' | ')} |`,
    `| ${alignRight.map((r) => (r ? '---:' : '---')).join(' | ')} |`,
    ...body.map((r) => `| ${r.map(esc).join(' | ')} |`),
  ].join('\n');
}

/** Per target x scenario: medians over rounds, sums of the problems. */
function summarizeRows(targets) {
  const scenarioNames = CONFIG.scenarios.flatMap((s) =>
    s === 'depth'
      ? ['depth-shallow', 'depth-deep']
      : s === 'delayed'
        ? ['delayed-none', 'delayed-many']
        : s === 'ackpop'
          ? ['ackpop-shared', 'ackpop-exclusive']
          : [s],
  );
  const out = [];
  for (const scenario of scenarioNames) {
    for (const t of targets) {
      const mine = runRows.filter((r) => r.target === t.name && r.scenario === scenario);
      if (mine.length === 0) continue;
      const okRows = mine.filter((r) => !r.failed);
      out.push({
        target: t.name,
        scenario,
        title: scenarioTitle(scenario),
        rounds: okRows.length,
        failed_rounds: mine.length - okRows.length,
        req_per_s: round(median(okRows.map((r) => r.req_per_s))),
        p50_ms: round(median(okRows.map((r) => r.latency_ms.p50)), 3),
        p99_ms: round(median(okRows.map((r) => r.latency_ms.p99)), 3),
        server_us_per_req: round(median(okRows.map((r) => r.cpu.server_us_per_req)), 1),
        store_us_per_req: round(median(okRows.map((r) => r.cpu.store_us_per_req)), 1),
        loadgen_us_per_req: round(median(okRows.map((r) => r.cpu.loadgen_us_per_req)), 1),
        store: t.redis ? 'redis' : 'postgres',
        store_location: t.pgLocation,
        non_2xx: okRows.reduce((n, r) => n + r.non_2xx, 0),
        http_429: okRows.reduce((n, r) => n + r.http_429, 0),
        errors: okRows.reduce((n, r) => n + r.errors + r.timeouts, 0),
        empty_pops: okRows.reduce((n, r) => n + (r.empty_pops ?? 0), 0),
        ran_dry: okRows.some((r) => r.ran_dry),
        checks_ok: okRows.every((r) => !r.check || r.check.ok),
        per_round_req_per_s: mine.map((r) => (r.failed ? null : r.req_per_s)),
      });
    }
  }
  for (const s of out) {
    const peer = (name) => out.find((x) => x.target === name && x.scenario === s.scenario)?.req_per_s;
    const ratio = (name) => (s.req_per_s && peer(name) ? round(s.req_per_s / peer(name), 3) : null);
    s.ratio_to_group_commit = ratio('group-commit');
    s.ratio_to_floor = ratio('floor');
    s.ratio_to_bullmq = ratio('bullmq-redis');
    s.ratio_to_pgboss = ratio('pgboss');
  }
  return out;
}

function storeCell(s) {
  if (s.store_location === 'in process') return 'in process¹';
  return fmtNum(s.store_us_per_req);
}

function notesOf(s) {
  const notes = [];
  if (s.failed_rounds) notes.push(`FAILED in ${s.failed_rounds} round(s)`);
  if (s.ran_dry) notes.push('RAN DRY');
  if (!s.checks_ok) notes.push('CHECK FAILED');
  if (s.http_429) notes.push(`429 x${s.http_429}`);
  if (s.scenario === 'hot' && s.empty_pops) notes.push(`${fmtNum(s.empty_pops)} empty pops`);
  if (s.rounds > 1) notes.push(`rounds: ${s.per_round_req_per_s.map((x) => fmtNum(x)).join(' / ')}`);
  return notes.join('; ');
}

// "vs pg-boss" is in latest.json (ratio_to_pgboss), not in the table, which is wide enough
const HEADERS = ['target', 'scenario', 'req/s', 'vs group-commit', 'vs floor', 'vs BullMQ', 'p50 ms', 'p99 ms', 'server CPU µs/req', 'store CPU µs/req'];
const RIGHT = [false, false, true, true, true, true, true, true, true, true];

function tableCells(s) {
  return [
    s.target,
    s.title,
    fmtNum(s.req_per_s),
    fmtRatio(s.ratio_to_group_commit, 1),
    fmtRatio(s.ratio_to_floor, 1),
    fmtRatio(s.ratio_to_bullmq, 1),
    fmtMs(s.p50_ms),
    fmtMs(s.p99_ms),
    fmtNum(s.server_us_per_req),
    storeCell(s),
  ];
}

function footnotes(meta, targets, summary) {
  const lines = [];
  const inProcess = summary.some((s) => s.store_location === 'in process');
  if (summary.some((s) => !s.scenario.startsWith('depth-') && !s.scenario.startsWith('delayed-'))) {
    lines.push(
      `Medians over ${CONFIG.rounds} round(s) of ${CONFIG.seconds} s per measurement (after ${CONFIG.warmupSeconds} s of unmeasured warm-up), ${CONFIG.connections} keep-alive connections, ${CONFIG.itemBytes}-byte JSON items at a random priority 0-${CONFIG.priorities - 1}, pop depth 1. "vs group-commit", "vs floor" and "vs BullMQ" divide req/s by the group-commit floor's, the raw-SQL floor's and BullMQ on Redis's in the same scenario (latest.json also has the ratio to pg-boss).`,
    );
  }
  if (summary.some((s) => s.scenario.startsWith('depth-'))) {
    lines.push(
      `Depth rows: medians over ${CONFIG.rounds} round(s) of ${CONFIG.depthOps} requests on one connection alternating push and pop (priority 0), after 200 unmeasured.`,
    );
  }
  if (summary.some((s) => s.scenario.startsWith('ackpop-'))) {
    lines.push(
      `Ack-pop rows: medians over ${CONFIG.rounds} round(s) of ${CONFIG.seconds} s (after ${CONFIG.warmupSeconds} s unmeasured) of ${CONFIG.ackConsumers} connections each looping pop?require_ack=true&depth=1&ttl_seconds=${ACK_TTL_SECONDS} then acknowledge, on one queue pre-filled with ${fmtNum(CONFIG.ackItems)} items (lock_mode shared, or the default exclusive: a pop while another connection's lock lives answers 423 and the connection pops again). req/s counts completed cycles (acknowledged items) per second; p50/p99 are of all responses (pops, 423s, acknowledges); CPU is per completed cycle.`,
    );
  }
  if (summary.some((s) => s.scenario.startsWith('delayed-'))) {
    lines.push(
      `Delayed rows: medians over ${CONFIG.rounds} round(s) of ${CONFIG.depthOps} requests on one connection alternating push and pop (priority 0), after 200 unmeasured, on a queue of ${fmtNum(CONFIG.shallowItems)} items with and without ${fmtNum(CONFIG.delayedItems)} more pushed with delay_seconds ${BENCH_DELAY_SECONDS} (not due during the run).`,
    );
  }
  lines.push(
    'CPU per request is read from /proc around each measured window: the server process alone (its children not included), and the whole tree of its store: the PostgreSQL postmaster (backends, background processes, children that exited), or for bullmq-redis the redis-server the benchmark started for it (its threads and its children).',
  );
  const shared = targets.filter((t) => t.pgLocation === 'machine PostgreSQL (shared)').map((t) => t.name);
  lines.push(
    'The load generator (autocannon) runs on the same machine and competes for its CPUs.' +
      (shared.length > 0
        ? ` The machine's PostgreSQL serves ${shared.join(', ')}; it is measured while only one target is loaded (the others idle), but anything else using that server at the time is counted too.`
        : ''),
  );
  const child = targets.find((t) => t.pgLocation === 'embedded server (child process)');
  if (child)
    lines.push(`${child.name}'s PostgreSQL column is its own embedded server (a child process of the service, ${child.pgVersion ?? 'version unknown'}).`);
  if (inProcess) lines.push('¹ the embedded database runs inside the service process (PGlite): its CPU is in the server column.');
  lines.push(
    `${meta.date}, ${meta.cpus} CPU(s), load average ${meta.loadavg_start.join(' / ')} at the start and ${(meta.loadavg_end ?? []).join(' / ')} at the end; pushpop ${meta.pushpop.git_commit ?? '(no git)'}${meta.pushpop.git_dirty ? ' (uncommitted changes)' : ''}${meta.pushpop.build_stale ? ' (build older than its sources)' : ''}; Node ${meta.node}; PostgreSQL ${meta.postgres.machine ?? '-'}${meta.postgres.embedded ? `, embedded: ${meta.postgres.embedded}` : ''}${meta.redis ? `; Redis ${meta.redis}` : ''}.`,
  );
  const rss = targets.filter((t) => t.rss.length > 0).map((t) => `${t.name} ${fmtMb(t.rss[t.rss.length - 1].kb)}`);
  if (rss.length) lines.push(`Server process RSS after its last scenario: ${rss.join(', ')}.`);
  return lines;
}

function depthCells(targets) {
  const out = [];
  for (const t of targets) {
    const sh = runRows.filter((r) => r.target === t.name && r.scenario === 'depth-shallow' && !r.failed);
    const dp = runRows.filter((r) => r.target === t.name && r.scenario === 'depth-deep' && !r.failed);
    if (sh.length === 0 && dp.length === 0 && !t.depthFill) continue;
    const m = (list, key) => median(list.map((r) => r.latency_ms[key]));
    const f = t.depthFill;
    out.push([
      t.name,
      `${fmtMs(m(sh, 'p50'))} / ${fmtMs(m(sh, 'p99'))}`,
      `${fmtMs(m(dp, 'p50'))} / ${fmtMs(m(dp, 'p99'))}`,
      `${fmtRatio(m(dp, 'p50'), m(sh, 'p50'))} / ${fmtRatio(m(dp, 'p99'), m(sh, 'p99'))}`,
      f ? `${fmtMb(f.rss_before_kb)} → ${fmtMb(f.rss_peak_kb)} peak → ${fmtMb(f.rss_after_kb)}` : '-',
    ]);
  }
  return out;
}
/** The longpoll rows: per target and process count, medians over the rounds. */
function longPollCells(targets) {
  const out = [];
  for (const t of targets) {
    for (const processes of CONFIG.longPollProcesses) {
      const rows = runRows.filter((r) => r.target === t.name && r.scenario === `longpoll-${processes}p` && !r.failed);
      if (rows.length === 0) continue;
      const m = (f) => median(rows.map(f));
      const pct = (x) => (x === null ? '-' : `${x.toFixed(1)}%`);
      out.push([
        t.name,
        processes === 2 ? 'a second process' : 'the same process',
        fmtNum(CONFIG.longPolls),
        fmtNum(m((r) => r.idle.transactions_per_s)),
        pct(m((r) => r.idle.server_cpu_pct)),
        pct(m((r) => r.idle.postgres_cpu_pct)),
        `${(m((r) => r.memory_per_poll_kb) ?? 0).toFixed(1)} KB`,
        `${fmtNum(Math.min(...rows.map((r) => r.received)))} / ${fmtNum(CONFIG.longPolls)}`,
        `${fmtMs(m((r) => r.latency_ms.p50))} / ${fmtMs(m((r) => r.latency_ms.p99))} / ${fmtMs(m((r) => r.latency_ms.max))}`,
        `${fmtNum(m((r) => r.wake_ups.local))} / ${fmtNum(m((r) => r.wake_ups.notification))} / ${fmtNum(m((r) => r.wake_ups.recheck))}`,
      ]);
    }
  }
  return out;
}
const LONGPOLL_HEADERS = [
  'target',
  'pushes through',
  'long polls',
  'idle: transactions/s',
  'idle: service CPU',
  'idle: PostgreSQL CPU',
  'RSS per waiting poll',
  'received',
  'poll − push p50 / p99 / max ms',
  'woken: local / notification / re-check',
];
const LONGPOLL_RIGHT = [false, false, true, true, true, true, true, true, true, true];
const longPollTitle = () =>
  `Long polls (pushpop only): ${fmtNum(CONFIG.longPolls)} polls (wait_seconds=20) on as many empty queues, idle for ${CONFIG.longPollIdleSeconds} s (database transactions from pg_stat_database, CPU as % of one core), then one push to each queue, ${CONFIG.longPollInFlight} in flight; latency = poll answered − that queue's push answered; medians over ${CONFIG.rounds} round(s)`;

const DEPTH_HEADERS = () => [
  'target',
  `p50 / p99 ms @${fmtCount(CONFIG.shallowItems)}`,
  `p50 / p99 ms @${fmtCount(CONFIG.deepItems)}`,
  'deep / shallow',
  'RSS while filling the deep queue',
];

function printAndWrite(meta, targets, summary) {
  const mainRows = summary.filter((s) => !s.scenario.startsWith('depth-'));
  const depthRows = depthCells(targets);
  const longPollRows = longPollCells(targets);
  const console_ = [];
  console_.push('');
  console_.push(`pushpop benchmark — median of ${CONFIG.rounds} round(s)`);
  if (summary.length)
    console_.push(
      table(
        [...HEADERS, 'non-2xx', 'errors', 'notes'],
        summary.map((s) => [...tableCells(s), s.non_2xx, s.errors, notesOf(s)]),
        [...RIGHT, true, true, false],
      ),
    );
  if (depthRows.length) {
    console_.push('');
    console_.push(
      `Queue depth (pushpop only): push+pop on one connection, ${CONFIG.depthOps} requests, ${fmtNum(CONFIG.shallowItems)} vs ${fmtNum(CONFIG.deepItems)} items in the queue`,
    );
    console_.push(table(DEPTH_HEADERS(), depthRows, [false, true, true, true, false]));
  }
  if (longPollRows.length) {
    console_.push('');
    console_.push(longPollTitle());
    console_.push(table(LONGPOLL_HEADERS, longPollRows, LONGPOLL_RIGHT));
  }
  console_.push('');
  for (const line of footnotes(meta, targets, summary)) console_.push(line);
  log(console_.join('\n'));

  const md = [];
  if (mainRows.length) md.push(markdownTable(HEADERS, mainRows.map(tableCells), RIGHT));
  if (depthRows.length) {
    md.push('');
    md.push(
      `Queue depth: push+pop latency on one connection, ${CONFIG.depthOps} requests, on a queue of ${fmtNum(CONFIG.shallowItems)} and of ${fmtNum(CONFIG.deepItems)} items.`,
    );
    md.push('');
    md.push(markdownTable(DEPTH_HEADERS(), depthRows, [false, true, true, true, false]));
  }
  if (longPollRows.length) {
    md.push('');
    md.push(`${longPollTitle()}.`);
    md.push('');
    md.push(markdownTable(LONGPOLL_HEADERS, longPollRows, LONGPOLL_RIGHT));
  }
  md.push('');
  for (const line of footnotes(meta, targets, summary)) md.push(`${line}\n`);
  const bad = summary.filter((s) => s.non_2xx - s.http_429 > 0 || s.errors > 0 || s.ran_dry || !s.checks_ok || s.failed_rounds);
  md.push(
    bad.length
      ? `Problems in this run: ${bad.map((s) => `${s.target} ${s.scenario}`).join(', ')} (see latest.json).\n`
      : 'Every response was 2xx, every count checked out, no queue ran dry.\n',
  );
  mkdirSync(resultsDir, { recursive: true });
  writeFileSync(join(resultsDir, 'latest.md'), `${md.join('\n').trimEnd()}\n`);
}

// ---------------------------------------------------------------------------------------------
// main

function gitInfo(dir) {
  const git = (...args) => execFileSync('git', ['-C', dir, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 10_000 }).trim();
  try {
    // uncommitted changes to what is measured (bench/ itself does not count)
    return {
      git_commit: git('rev-parse', '--short', 'HEAD'),
      git_dirty: git('status', '--porcelain', '--untracked-files=no', '--', '.', ':(exclude)bench').length > 0,
    };
  } catch {
    return { git_commit: null, git_dirty: null };
  }
}

async function main() {
  const meta = {
    date: new Date().toISOString(),
    node: process.versions.node,
    platform: `${os.platform()} ${os.release()}`,
    cpus: os.cpus().length,
    cpu_model: os.cpus()[0]?.model ?? null,
    clk_tck: CLK_TCK,
    loadavg_start: os.loadavg().map((x) => round(x, 2)),
    loadavg_end: null,
    pushpop: { dir: pushpopDir, ...gitInfo(pushpopDir), build_stale: buildIsStale, version: null },
    postgres: { machine: null, embedded: null },
    redis: /** @type {string | null} */ (null),
    versions: {
      autocannon: packageVersion('autocannon'),
      pg: packageVersion('pg'),
      'pg-boss': packageVersion('pg-boss'),
      bullmq: packageVersion('bullmq'),
      ioredis: packageVersion('ioredis'),
    },
    config: {
      targets: CONFIG.targets,
      scenarios: CONFIG.scenarios,
      seconds: CONFIG.seconds,
      warmup_seconds: CONFIG.warmupSeconds,
      rounds: CONFIG.rounds,
      connections: CONFIG.connections,
      queues: CONFIG.queues,
      item_bytes: CONFIG.itemBytes,
      priorities: `0-${CONFIG.priorities - 1}`,
      pop_depth: 1,
      hot_backlog: CONFIG.hotBacklog,
      max_prefill: CONFIG.maxPrefill,
      shallow_items: CONFIG.shallowItems,
      deep_items: CONFIG.deepItems,
      depth_ops: CONFIG.depthOps,
      long_polls: CONFIG.longPolls,
      longpoll_idle_seconds: CONFIG.longPollIdleSeconds,
      longpoll_in_flight: CONFIG.longPollInFlight,
      longpoll_processes: CONFIG.longPollProcesses,
      stall_seconds: CONFIG.stallSeconds,
      postgres_server: CONFIG.pgServer,
      db_prefix: CONFIG.dbPrefix,
      databases: Object.values(DATABASES),
    },
    notes: [
      'The load generator (autocannon) runs in the benchmark process on the same machine as the targets and PostgreSQL.',
      "The machine's PostgreSQL is shared by pushpop-postgres, group-commit, floor, bullmq-postgres and pgboss; it is measured while only one target is loaded (the others idle). Other clients of that server at the time are counted too.",
      'Server CPU is the server process alone (utime+stime, children excluded); PostgreSQL CPU is the whole postmaster tree.',
    ],
  };
  try {
    meta.pushpop.version = JSON.parse(readFileSync(join(pushpopDir, 'package.json'), 'utf8')).version ?? null;
  } catch {
    // no package.json
  }

  const perRun = CONFIG.scenarios.filter((s) => !PUSHPOP_ONLY_SCENARIOS.includes(s)).length * (CONFIG.warmupSeconds + CONFIG.seconds + 2);
  const estimate = CONFIG.rounds * CONFIG.targets.length * perRun;
  log(
    `pushpop benchmark: targets ${CONFIG.targets.join(', ')}; scenarios ${CONFIG.scenarios.join(', ')}; ${CONFIG.rounds} round(s) x ${CONFIG.seconds} s (+${CONFIG.warmupSeconds} s warm-up), ${CONFIG.connections} connections`,
  );
  log(`pushpop build: ${join(pushpopDir, 'dist/main.js')} (${meta.pushpop.git_commit ?? 'no git'}${meta.pushpop.git_dirty ? ', uncommitted changes' : ''})`);
  log(
    `about ${Math.ceil(estimate / 60)} min of load, plus start-up, queue creation and pre-fills${CONFIG.scenarios.includes('depth') ? ` and the depth scenario (${fmtNum(CONFIG.deepItems)} items per pushpop target)` : ''}${CONFIG.scenarios.includes('longpoll') ? ` and the longpoll scenario (about 30 s per pushpop target, round and process count)` : ''}`,
  );
  log(`load average now ${meta.loadavg_start.join(' / ')} on ${meta.cpus} CPU(s): numbers from a busy machine are noisy`);
  if (buildIsStale)
    log(
      `WARNING: ${join(pushpopDir, 'dist')} is older than its src/ — the benchmark runs the last build; run \`npm run build\` there to measure the current sources`,
    );

  let machine = { version: null, postmaster: null };
  if (needsMachinePostgres) {
    try {
      machine = await findMachinePostmaster();
      meta.postgres.machine = machine.version;
    } catch (error) {
      console.error(
        `cannot reach PostgreSQL at ${CONFIG.pgServer} (${errorText(error)}); set BENCH_PG_URL, or BENCH_TARGETS=pushpop-embedded to run without it`,
      );
      return 1;
    }
    if (!machine.postmaster) {
      problems.push('the postmaster of the machine PostgreSQL was not found in /proc: its CPU is not measured');
      log('WARNING: the postmaster of the machine PostgreSQL was not found in /proc; its CPU is not measured');
    }
  }

  const targets = [];
  try {
    // ---- start every target; they stay up for the whole run (the ones not being measured idle)
    for (const name of CONFIG.targets) {
      if (interrupted) break;
      if (!name.startsWith('pushpop-') && CONFIG.scenarios.every((sc) => PUSHPOP_ONLY_SCENARIOS.includes(sc))) {
        progress(`${name}: not started (${CONFIG.scenarios.join(' and ')} run on pushpop targets only)`);
        continue;
      }
      progress(`starting ${name} ...`);
      try {
        const t = await startTarget(name, machine);
        targets.push(t);
        progress(
          `  ${name} ready in ${t.readySeconds} s on ${t.url} (pid ${t.proc.pid}; PostgreSQL: ${t.pgLocation}${t.postmaster ? `, postmaster pid ${t.postmaster.pid}` : ''})`,
        );
        if (name === 'pushpop-embedded') meta.postgres.embedded = t.pgVersion;
        if (t.redis) meta.redis = t.redis.version;
      } catch (error) {
        problems.push(`${name}: FAILED to start: ${errorText(error)}`);
        progress(`  ${name} FAILED to start: ${error instanceof Error ? error.message : String(error)}`);
      }
    }

    // ---- unmeasured set-up: create the queues
    for (const t of targets) {
      if (interrupted) break;
      try {
        await setUpQueues(t);
      } catch (error) {
        t.dead = `set-up failed: ${errorText(error)}`;
        problems.push(`${t.name}: set-up FAILED: ${errorText(error)}`);
        progress(`  ${t.name} set-up FAILED: ${errorText(error)}`);
      }
    }

    // ---- rounds: every live target through every scenario, the starting target rotating
    for (let roundNo = 1; roundNo <= CONFIG.rounds && !interrupted; roundNo++) {
      const order = targets.map((_, i) => targets[(i + roundNo - 1) % targets.length]);
      progress(`round ${roundNo} of ${CONFIG.rounds}: ${order.map((t) => t.name).join(' → ')}`);
      for (const t of order) {
        if (interrupted) break;
        for (const scenario of CONFIG.scenarios) {
          if (interrupted || t.dead) break;
          if (PUSHPOP_ONLY_SCENARIOS.includes(scenario) && t.kind !== 'pushpop') continue;
          if (!t.proc.alive()) {
            const exit = t.proc.exitInfo();
            t.dead = `exited (code ${exit?.code}, signal ${exit?.signal})`;
            problems.push(`${t.name}: the server ${t.dead}; its remaining scenarios are skipped. Last output:\n${t.proc.output().slice(-2000)}`);
            break;
          }
          if (t.postmaster && !isAlive(t.postmaster)) {
            problems.push(`${t.name}: its PostgreSQL (pid ${t.postmaster.pid}) is gone`);
            t.postmaster = null;
          }
          try {
            await SCENARIO_FNS[scenario](t, roundNo);
          } catch (error) {
            failed(t, scenario, roundNo, error);
          }
        }
        if (t.proc.alive()) t.rss.push({ round: roundNo, kb: rssKb(t.proc.pid) });
      }
    }
  } finally {
    // ---- stop everything
    for (const t of targets) {
      const rss = t.proc.alive() ? rssKb(t.proc.pid) : null;
      if (rss !== null) t.rssEnd = rss;
      // a second process first: on the embedded database the first owns the server
      if (t.second) {
        await t.second.proc.stop();
        rmSync(t.second.dataDir, { recursive: true, force: true });
        tempDirs.delete(t.second.dataDir);
      }
      const exit = await t.proc.stop();
      if (t.pool) await t.pool.end().catch(() => undefined);
      if (t.redis) {
        const redisExit = await t.redis.stop();
        if (redisExit && redisExit.code !== 0 && !interrupted) problems.push(`${t.name}: its redis-server exited with code ${redisExit.code} when stopped`);
      }
      if (t.postmaster && t.name === 'pushpop-embedded' && isAlive(t.postmaster)) {
        await sleep(2000);
        if (await stopOrphanPostmaster(t.postmaster))
          problems.push(`${t.name}: its embedded PostgreSQL (pid ${t.postmaster.pid}) was still running after the service stopped; stopped it`);
      }
      if (t.dataDir) {
        rmSync(t.dataDir, { recursive: true, force: true });
        tempDirs.delete(t.dataDir);
      }
      // the servers log at LOG_LEVEL=warn; shown when something went wrong with the target, always kept in latest.json
      t.logLines = t.proc
        .output()
        .split('\n')
        .filter((l) => l.trim() && !/ (listening on|stopped \()/.test(l));
      const troubled = t.dead || problems.some((p) => p.startsWith(`${t.name} `) || p.startsWith(`${t.name}:`));
      if (t.logLines.length > 0 && troubled) {
        log(`${t.name} log (${t.logLines.length} line(s)${t.logLines.length > 15 ? ', last 15 shown' : ''}):`);
        for (const line of t.logLines.slice(-15)) log(`    ${line}`);
      } else if (t.logLines.length > 0) {
        log(`${t.name}: ${t.logLines.length} log line(s) at LOG_LEVEL=warn (the last 100 are in latest.json)`);
      }
      log(`${t.name} stopped (${exit ? `code ${exit.code}, signal ${exit.signal}` : 'already gone'})`);
      if (exit && exit.code !== 0 && exit.code !== null && !interrupted) problems.push(`${t.name}: the server exited with code ${exit.code} when stopped`);
    }
    if (needsMachinePostgres && !CONFIG.keepDatabases) {
      for (const t of targets) {
        if (t.db) await adminQuery(`DROP DATABASE IF EXISTS ${t.db} WITH (FORCE)`).catch((error) => log(`could not drop ${t.db}: ${errorText(error)}`));
      }
    }
    agent.destroy();
  }

  meta.loadavg_end = os.loadavg().map((x) => round(x, 2));
  meta.total_seconds = round((performance.now() - runStarted) / 1000, 1);
  const summary = summarizeRows(targets);
  printAndWrite(meta, targets, summary);
  const targetInfo = Object.fromEntries(
    targets.map((t) => [
      t.name,
      {
        url: t.url,
        pid: t.proc.pid,
        ready_seconds: t.readySeconds,
        database: t.db ?? (t.dataDir ? 'embedded (temporary DATA_DIR)' : null),
        postgres: t.pgLocation,
        postgres_version: t.pgVersion,
        postmaster_pid: t.postmaster?.pid ?? null,
        redis: t.redis ? { pid: t.redis.proc?.pid ?? null, port: t.redis.port, version: t.redis.version } : null,
        rss_kb_by_round: t.rss,
        rss_kb_end: t.rssEnd ?? null,
        depth_fill: t.depthFill,
        dead: t.dead,
        log_tail: (t.logLines ?? []).slice(-100),
      },
    ]),
  );
  writeFileSync(join(resultsDir, 'latest.json'), `${JSON.stringify({ meta, summary, targets: targetInfo, rounds: runRows, problems }, null, 2)}\n`);
  log('');
  if (problems.length) {
    log(`PROBLEMS (${problems.length}):`);
    for (const p of problems) log(`  - ${p}`);
  } else {
    log('No problems: every response was 2xx, every count checked out, no queue ran dry.');
  }
  log(`Total ${meta.total_seconds} s. Results: ${join(resultsDir, 'latest.md')} and latest.json`);
  if (interrupted) return 130;
  return problems.length === 0 ? 0 : 1;
}

main().then(
  (code) => {
    killEverything();
    process.exit(code);
  },
  (error) => {
    console.error(`\nbenchmark failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    killEverything();
    process.exit(1);
  },
);
