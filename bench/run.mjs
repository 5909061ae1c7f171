#!/usr/bin/env node
// pushpop benchmark: `npm run build && npm run bench`. What each scenario measures, the
// knobs and how to read the pg-boss comparison: bench/README.md.
//
// Runs pushpop (`node dist/main.js`) as a child process on PostgreSQL and on embedded PGlite,
// drives it over loopback HTTP with autocannon, then measures pg-boss in-process on the same
// PostgreSQL. Prints a table and writes bench/results/latest.json. Every loop here is bounded
// both in count and in time.

/* global fetch, AbortSignal */
import autocannon from 'autocannon';
import PgBoss from 'pg-boss';
import pg from 'pg';
import { spawn, execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import console from 'node:console';
import { createServer } from 'node:net';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { clearInterval, setInterval, setTimeout } from 'node:timers';
import { fileURLToPath, URL } from 'node:url';

const benchDir = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(benchDir, '..');
const resultsDir = join(benchDir, 'results');
const requireFromRoot = createRequire(join(repoRoot, 'package.json'));

// ---------------------------------------------------------------------------------------------
// configuration

function envInt(name, fallback, min, max) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    console.error(`${name} must be an integer between ${min} and ${max} (got ${JSON.stringify(raw)})`);
    process.exit(2);
  }
  return value;
}

const CONFIG = {
  seconds: envInt('BENCH_SECONDS', 10, 1, 300),
  connections: envInt('BENCH_CONNECTIONS', 16, 1, 256),
  manyQueues: 100,
  itemBytes: 200,
  batchSize: 1000,
  depthOps: envInt('BENCH_DEPTH_OPS', 2000, 100, 100_000),
  shallowItems: 1000,
  deepItems: envInt('BENCH_DEEP_ITEMS', 200_000, 1000, 2_000_000),
  maxPrefill: envInt('BENCH_MAX_PREFILL', 400_000, 10_000, 5_000_000),
  prefillTimeoutSeconds: envInt('BENCH_PREFILL_TIMEOUT', 180, 10, 3600),
  backends: (process.env.BENCH_BACKENDS ?? 'postgres,pglite').split(',').map((s) => s.trim()).filter(Boolean),
  pgboss: process.env.BENCH_PGBOSS !== '0',
  pgServer: (process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432').replace(/\/+$/, ''),
  pushpopDb: 'pushpop_bench',
  pgbossDb: 'pgboss_bench',
};

for (const backend of CONFIG.backends) {
  if (backend !== 'postgres' && backend !== 'pglite') {
    console.error(`BENCH_BACKENDS: unknown backend ${JSON.stringify(backend)} (use postgres, pglite or both)`);
    process.exit(2);
  }
}
if (!/^postgres(ql)?:\/\/[^/]+$/.test(CONFIG.pgServer)) {
  console.error('BENCH_PG_URL must be a server URL without a database, e.g. postgres://postgres@127.0.0.1:5432');
  process.exit(2);
}
const serverHost = new URL(CONFIG.pgServer).hostname;
if (!['127.0.0.1', 'localhost', '::1', '[::1]'].includes(serverHost)) {
  console.error(`BENCH_PG_URL must point at a loopback PostgreSQL (got host ${serverHost}): this benchmark only makes loopback traffic`);
  process.exit(2);
}

const dbUrl = (name) => `${CONFIG.pgServer}/${name}`;
const MAX_SAMPLES = 5_000_000; // latency samples kept per scenario (memory bound)
const STALL_SECONDS = envInt('BENCH_STALL_SECONDS', 15, 2, 600); // a request slower than this counts as a timeout

// ---------------------------------------------------------------------------------------------
// preconditions: the build

const BUILD_OUTPUTS = ['dist/main.js', 'libs/keyed-mutex/dist/index.js'];
const BUILD_INPUTS = ['src', 'libs/keyed-mutex/src'];

const missing = BUILD_OUTPUTS.filter((p) => !existsSync(join(repoRoot, p)));
if (missing.length > 0) {
  console.error(`pushpop is not built (missing ${missing.join(', ')}). The benchmark builds nothing itself; run:\n\n  npm run build && npm run bench\n`);
  process.exit(1);
}

function newestMtime(path, budget = { entries: 20_000 }) {
  if (!existsSync(path) || budget.entries-- <= 0) return 0;
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = stat.mtimeMs;
  for (const entry of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, entry), budget));
  return newest;
}
const buildIsStale =
  Math.max(...BUILD_INPUTS.map((p) => newestMtime(join(repoRoot, p)))) >
  Math.min(...BUILD_OUTPUTS.map((p) => statSync(join(repoRoot, p)).mtimeMs));

// ---------------------------------------------------------------------------------------------
// small helpers

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const round = (x, digits = 0) => (x === null || x === undefined || Number.isNaN(x) ? null : Number(x.toFixed(digits)));

function log(line) {
  process.stdout.write(`${line}\n`);
}

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

/** A JSON object item whose serialisation is exactly CONFIG.itemBytes bytes (sequence number included). */
const ITEM_TEMPLATE = { seq: '000000000000', kind: 'order.created', customer: 'customer-000042', sku: 'SKU-7731-XL', quantity: 3, price_cents: 129900, note: '' };
const NOTE = 'x'.repeat(CONFIG.itemBytes - JSON.stringify(ITEM_TEMPLATE).length);
function makeItem(seq) {
  return { ...ITEM_TEMPLATE, seq: String(seq % 1e12).padStart(12, '0'), note: NOTE };
}
if (JSON.stringify(makeItem(123)).length !== CONFIG.itemBytes) throw new Error('item template is not the configured size');

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

async function recreateDatabase(name) {
  const client = new pg.Client({ connectionString: dbUrl('postgres'), connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
}

async function httpJson(url, init = {}, timeoutMs = 60_000) {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
  const text = await res.text();
  return { status: res.status, body: parseJsonOr(text) };
}

function parseJsonOr(text) {
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

// ---------------------------------------------------------------------------------------------
// the pushpop child process

const children = new Set();
const tempDirs = new Set();

async function startPushpop(backend) {
  const port = await freePort();
  const env = { ...process.env };
  // Only what the benchmark sets configures the child: everything else stays at its default.
  for (const key of ['DATABASE_URL', 'DATA_DIR', 'SEGMENT_SIZE', 'BUFFER_SEGMENTS', 'MAX_PENDING_PER_QUEUE', 'DB_POOL_SIZE', 'NODE_OPTIONS', 'ACTOR_IDLE_TIMEOUT_MS', 'MAX_ITEM_BYTES', 'MAX_BODY_BYTES', 'LOCK_SWEEP_INTERVAL_MS', 'MAX_PRIORITY']) delete env[key];
  Object.assign(env, { PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', NODE_ENV: 'production' });
  let dataDir = null;
  if (backend === 'postgres') {
    await recreateDatabase(CONFIG.pushpopDb);
    env.DATABASE_URL = dbUrl(CONFIG.pushpopDb);
  } else {
    dataDir = mkdtempSync(join(os.tmpdir(), 'pushpop-bench-'));
    tempDirs.add(dataDir);
    env.DATA_DIR = dataDir;
  }

  const started = performance.now();
  const child = spawn(process.execPath, [join(repoRoot, 'dist/main.js')], { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let output = '';
  const keep = (chunk) => {
    output += chunk.toString();
    if (output.length > 200_000) output = output.slice(-100_000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  let exitInfo = null;
  const exited = new Promise((r) => child.on('exit', (code, signal) => r((exitInfo = { code, signal }))));
  void exited.then(() => children.delete(child));

  const url = `http://127.0.0.1:${port}`;
  const service = {
    backend,
    url,
    dataDir,
    output: () => output,
    alive: () => exitInfo === null,
    async stop() {
      if (exitInfo === null) {
        child.kill('SIGTERM');
        const timedOut = await Promise.race([exited.then(() => false), sleep(15_000).then(() => true)]);
        if (timedOut) {
          child.kill('SIGKILL');
          await exited;
        }
      }
      if (dataDir) {
        rmSync(dataDir, { recursive: true, force: true });
        tempDirs.delete(dataDir);
      }
      return exitInfo;
    },
  };

  const deadline = Date.now() + 90_000;
  for (let attempt = 0; attempt < 2000; attempt++) {
    if (exitInfo !== null) throw new Error(`pushpop exited before it was ready (code ${exitInfo.code}, signal ${exitInfo.signal}):\n${output}`);
    try {
      const res = await fetch(`${url}/health/ready`, { signal: AbortSignal.timeout(2000) });
      if (res.status === 200) return { service, readyMs: performance.now() - started };
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) break;
    await sleep(100);
  }
  await service.stop();
  throw new Error(`pushpop not ready within 90 s:\n${output}`);
}

/** Last-resort clean-up (exit, signal): kill the children, remove their temporary data directories. */
function killChildren() {
  for (const child of children) {
    try {
      child.kill('SIGKILL');
    } catch {
      // already gone
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
process.on('exit', killChildren);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    log(`\n${signal}: stopping`);
    killChildren();
    process.exit(130);
  });
}

// ---------------------------------------------------------------------------------------------
// autocannon runs against pushpop

const JSON_HEADERS = { 'content-type': 'application/json' };

/** A push request; `queueFor(seq)` picks the queue of each request. */
function pushRequest(queueFor) {
  let seq = 0;
  return {
    method: 'POST',
    path: '/',
    headers: JSON_HEADERS,
    setupRequest: (req) => {
      seq += 1;
      return { ...req, path: `/queue/${queueFor(seq)}/push`, body: JSON.stringify({ item: makeItem(seq), priority: 0 }) };
    },
  };
}

/** A pop request (depth 1, no ack); counts responses that came back with no item. */
function popRequest(queue, counters) {
  return {
    method: 'POST',
    path: `/queue/${queue}/pop?depth=1`,
    onResponse: (status, body) => {
      if (status !== 200) return;
      try {
        const parsed = JSON.parse(body);
        if (parsed.count === 0) counters.emptyPops += 1;
        else counters.poppedItems += parsed.count;
      } catch {
        counters.unparsable += 1;
      }
    },
  };
}

/**
 * One autocannon run. Latencies come from autocannon's per-response timings (float ms, write of
 * the request to end of the response), kept whole so that the percentiles are exact. With
 * `sequence` set and one connection, responses alternate between the named operations.
 */
async function cannon({ url, connections, seconds, amount, requests, sequence }) {
  const all = [];
  const byOp = sequence ? Object.fromEntries(sequence.map((op) => [op, []])) : null;
  let index = 0;
  const wallStart = performance.now();
  const instance = autocannon({
    url,
    connections,
    pipelining: 1,
    timeout: STALL_SECONDS,
    ...(amount ? { amount } : { duration: seconds }),
    requests,
  });
  let lastResponse = performance.now();
  instance.on('response', (_client, _status, _bytes, ms) => {
    lastResponse = performance.now();
    if (all.length < MAX_SAMPLES) all.push(ms);
    if (byOp && byOp[sequence[index % sequence.length]].length < MAX_SAMPLES) byOp[sequence[index % sequence.length]].push(ms);
    index += 1;
  });
  // Watchdog: a run with `amount` stops after a time cap, and any run stops when nothing has
  // answered for STALL_SECONDS (a stuck queue must not hang the benchmark).
  /** @type {string | null} */
  let stoppedBy = null;
  const hardCapMs = (amount ? Math.max(60, amount / 10) : seconds + 30) * 1000;
  const watchdog = setInterval(() => {
    const now = performance.now();
    if (stoppedBy) return;
    if (now - lastResponse > STALL_SECONDS * 1000) stoppedBy = `stalled: no response for ${STALL_SECONDS} s`;
    else if (now - wallStart > hardCapMs) stoppedBy = `time cap of ${Math.round(hardCapMs / 1000)} s reached`;
    if (stoppedBy) instance.stop();
  }, 500);
  let result;
  try {
    result = await instance;
  } finally {
    clearInterval(watchdog);
  }
  const wallSeconds = (performance.now() - wallStart) / 1000;
  const statusCodes = Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([code, v]) => [code, v.count]));
  const non2xx = Object.entries(statusCodes).filter(([code]) => !code.startsWith('2')).reduce((n, [, c]) => n + c, 0);
  const count429 = statusCodes['429'] ?? 0;
  return {
    durationSeconds: result.duration || wallSeconds,
    responses: index,
    ok: result['2xx'],
    statusCodes,
    non2xx,
    non2xxExcept429: non2xx - count429,
    count429,
    errors: result.errors,
    timeouts: result.timeouts,
    resets: result.resets ?? 0,
    latency: summarize(all),
    stoppedBy: /** @type {string | null} */ (stoppedBy),
    latencyByOp: byOp ? Object.fromEntries(Object.entries(byOp).map(([op, s]) => [op, summarize(s)])) : undefined,
  };
}

async function queueCount(url, queue) {
  let status;
  let body;
  try {
    ({ status, body } = await httpJson(`${url}/queue/${encodeURIComponent(queue)}`, {}, STALL_SECONDS * 1000));
  } catch (error) {
    throw new Error(`GET /queue/${queue} got no answer within ${STALL_SECONDS} s (${error.name})`, { cause: error });
  }
  if (status === 404) return 0;
  if (status !== 200 || typeof body?.count !== 'number') throw new Error(`GET /queue/${queue}: ${status} ${JSON.stringify(body)}`);
  return body.count + (body.lock?.item_count ?? 0);
}

/** Batch pushes of CONFIG.batchSize to fill `queue` with `total` items; several queues may fill at once. */
async function prefill(url, queue, total, deadline) {
  const batches = Math.ceil(total / CONFIG.batchSize);
  const started = performance.now();
  let seq = 0;
  for (let b = 0; b < batches; b++) {
    if (Date.now() > deadline) throw new Error(`pre-filling ${queue} took longer than BENCH_PREFILL_TIMEOUT=${CONFIG.prefillTimeoutSeconds} s (${b} of ${batches} batches done)`);
    const n = Math.min(CONFIG.batchSize, total - b * CONFIG.batchSize);
    const items = [];
    for (let i = 0; i < n; i++) items.push({ item: makeItem(++seq), priority: 0 });
    const { status, body } = await httpJson(`${url}/queue/${queue}/push/batch`, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify({ items }) });
    if (status !== 200 || body?.count !== n) throw new Error(`batch push to ${queue} failed: ${status} ${JSON.stringify(body).slice(0, 300)}`);
  }
  return { items: total, seconds: (performance.now() - started) / 1000 };
}

async function prefillAll(tag, url, targets) {
  const started = performance.now();
  const total = targets.reduce((n, t) => n + t.items, 0);
  log(`${tag} pre-filling ${targets.map((t) => `${t.queue} with ${t.items.toLocaleString('en-US')}`).join(', ')} items (batch pushes of ${CONFIG.batchSize}) ...`);
  const deadline = Date.now() + CONFIG.prefillTimeoutSeconds * 1000;
  await Promise.all(targets.map((t) => prefill(url, t.queue, t.items, deadline)));
  const seconds = (performance.now() - started) / 1000;
  for (const t of targets) {
    const count = await queueCount(url, t.queue);
    if (count !== t.items) throw new Error(`${t.queue} holds ${count} items after pre-filling ${t.items}`);
  }
  log(`${tag}   done in ${seconds.toFixed(1)} s (${Math.round(total / seconds).toLocaleString('en-US')} items/s by batch push, counts verified)`);
  return { items: total, seconds: round(seconds, 2), items_per_s: Math.round(total / seconds) };
}

function row(fields) {
  return {
    system: 'pushpop',
    transport: 'HTTP (loopback, autocannon)',
    ...fields,
  };
}

function fromCannon(r, items, extra = {}) {
  return {
    duration_s: round(r.durationSeconds, 2),
    requests: r.responses,
    req_per_s: Math.round(r.responses / r.durationSeconds),
    items,
    items_per_s: Math.round(items / r.durationSeconds),
    latency_ms: r.latency,
    ...(r.latencyByOp ? { latency_ms_by_op: r.latencyByOp } : {}),
    status_codes: r.statusCodes,
    non_2xx: r.non2xx,
    non_2xx_except_429: r.non2xxExcept429,
    http_429: r.count429,
    errors: r.errors,
    timeouts: r.timeouts,
    stopped_by: r.stoppedBy,
    ...extra,
  };
}

async function benchPushpop(backend, problems) {
  const tag = `[pushpop/${backend}]`;
  const C = CONFIG.connections;
  const S = CONFIG.seconds;
  const results = [];
  log(`${tag} starting node dist/main.js on ${backend === 'postgres' ? `PostgreSQL (${dbUrl(CONFIG.pushpopDb)}, recreated)` : 'embedded PGlite (temporary DATA_DIR)'} ...`);
  const { service, readyMs } = await startPushpop(backend);
  const url = service.url;
  log(`${tag}   ready in ${(readyMs / 1000).toFixed(1)} s on ${url}`);
  const checkAlive = () => {
    if (!service.alive()) throw new Error(`pushpop exited during the benchmark:\n${service.output()}`);
  };
  const record = (r) => {
    results.push(r);
    const bad = [];
    if (r.stopped_by) bad.push(`run stopped early (${r.stopped_by})`);
    if (r.non_2xx_except_429 > 0) bad.push(`${r.non_2xx_except_429} non-2xx responses other than 429 (${JSON.stringify(r.status_codes)})`);
    if (r.errors > 0) bad.push(`${r.errors} connection errors`);
    if (r.timeouts > 0) bad.push(`${r.timeouts} requests timed out after ${STALL_SECONDS} s`);
    if (r.check && r.check.ok === false) bad.push(`check failed: ${r.check.detail}`);
    for (const b of bad) problems.push(`${tag} ${r.scenario}: ${b}`);
    log(
      `${tag}   ${fmtNum(r.req_per_s)} req/s, ${fmtNum(r.items_per_s)} items/s, p50 ${fmtMs(r.latency_ms.p50)} ms, p99 ${fmtMs(r.latency_ms.p99)} ms, non-2xx ${r.non_2xx}` +
        (r.http_429 ? ` (429: ${r.http_429})` : '') +
        (r.ran_dry ? ' — RAN DRY' : '') +
        (bad.length ? ` — PROBLEM: ${bad.join('; ')}` : ''),
    );
  };
  /** Runs one scenario; a failure is recorded (row and problem) and the next scenario still runs. */
  const scenario = async (name, title, connections, fn) => {
    try {
      checkAlive();
      await fn();
    } catch (error) {
      const message = String(error?.message ?? error).split('\n')[0];
      problems.push(`${tag} ${name}: FAILED: ${message}`);
      results.push(row({ backend, scenario: name, title, connections, failed: message, latency_ms: summarize([]) }));
      log(`${tag}   FAILED: ${message}`);
    }
  };

  try {
    // warm-up: JIT, connection pools, first actor activations (not measured)
    await scenario('warm_up', 'warm-up (not measured)', 4, async () => {
      log(`${tag} warm-up: 1,000 push/pop requests on one queue, 4 connections (not measured) ...`);
      const counters = { emptyPops: 0, poppedItems: 0, unparsable: 0 };
      const w = await cannon({ url, connections: 4, amount: 1000, requests: [pushRequest(() => 'bench-warmup'), popRequest('bench-warmup', counters)] });
      if (w.stoppedBy || w.non2xxExcept429 > 0 || w.errors > 0 || w.timeouts > 0) {
        throw new Error(`warm-up: ${w.responses} of 1000 responses, ${JSON.stringify(w.statusCodes)}, ${w.errors} errors, ${w.timeouts} timeouts${w.stoppedBy ? `, ${w.stoppedBy}` : ''}`);
      }
    });

    // 1. push to many queues
    await scenario('push_many_queues', `push, random queue of ${CONFIG.manyQueues}`, C, async () => {
      log(`${tag} push to many queues (${CONFIG.manyQueues} queues, random per request, ${C} connections): ${S} s ...`);
      const queues = Array.from({ length: CONFIG.manyQueues }, (_, i) => `bench-many-${i}`);
      const r = await cannon({ url, connections: C, seconds: S, requests: [pushRequest(() => queues[Math.floor(Math.random() * queues.length)])] });
      checkAlive();
      let stored = 0;
      const unanswered = [];
      for (const q of queues) {
        try {
          stored += await queueCount(url, q);
        } catch (error) {
          unanswered.push(`${q} (${error.message})`);
        }
      }
      // a request cut off when the run stopped may have committed without its response being counted
      const ok = unanswered.length === 0 && stored >= r.ok && stored <= r.ok + C;
      record(
        row({
          backend,
          scenario: 'push_many_queues',
          title: `push, random queue of ${CONFIG.manyQueues}`,
          connections: C,
          ...fromCannon(r, r.ok, {
            check: {
              ok,
              detail: unanswered.length
                ? `GET /queue/{id} did not answer for ${unanswered.length} of ${CONFIG.manyQueues} queues: ${unanswered.slice(0, 5).join(', ')}${unanswered.length > 5 ? ', ...' : ''}`
                : `${stored} items stored in the ${CONFIG.manyQueues} queues for ${r.ok} 2xx pushes`,
            },
          }),
        }),
      );
    });

    // 2. push to one queue
    await scenario('push_one_queue', 'push, one queue', C, async () => {
      log(`${tag} push to one queue (${C} connections, actor serialisation): ${S} s ...`);
      const r = await cannon({ url, connections: C, seconds: S, requests: [pushRequest(() => 'bench-one')] });
      checkAlive();
      const stored = await queueCount(url, 'bench-one');
      const ok = stored >= r.ok && stored <= r.ok + C;
      record(
        row({
          backend,
          scenario: 'push_one_queue',
          title: 'push, one queue',
          connections: C,
          ...fromCannon(r, r.ok, { check: { ok, detail: `${stored} items stored for ${r.ok} 2xx pushes` } }),
        }),
      );
    });

    // 3. pop from one pre-filled queue, depth 1
    await scenario('pop_one_queue', 'pop depth 1, one pre-filled queue', C, async () => {
      const pushRates = results.filter((r) => typeof r.items_per_s === 'number').map((r) => r.items_per_s);
      // enough that the queue does not run dry even if popping is 3x as fast as the fastest push
      const wanted = Math.ceil((Math.max(0, ...pushRates) * S * 3) / CONFIG.batchSize) * CONFIG.batchSize;
      const fillTo = Math.min(CONFIG.maxPrefill, Math.max(10_000, wanted));
      const fill = await prefillAll(tag, url, [{ queue: 'bench-pop', items: fillTo }]);
      log(`${tag} pop from one pre-filled queue (${fillTo.toLocaleString('en-US')} items, depth 1, ${C} connections): ${S} s ...`);
      const counters = { emptyPops: 0, poppedItems: 0, unparsable: 0 };
      const r = await cannon({ url, connections: C, seconds: S, requests: [popRequest('bench-pop', counters)] });
      checkAlive();
      const left = await queueCount(url, 'bench-pop');
      const removed = fillTo - left;
      const ranDry = counters.emptyPops > 0 || left === 0;
      const ok = counters.unparsable === 0 && removed >= counters.poppedItems && removed <= counters.poppedItems + C;
      record(
        row({
          backend,
          scenario: 'pop_one_queue',
          title: 'pop depth 1, one pre-filled queue',
          connections: C,
          ...fromCannon(r, counters.poppedItems, {
            prefill: { queue: 'bench-pop', ...fill },
            ran_dry: ranDry,
            empty_pops: counters.emptyPops,
            items_left: left,
            check: { ok, detail: `${removed} items removed from the queue, ${counters.poppedItems} received in 2xx pops, ${counters.unparsable} unparsable bodies` },
          }),
        }),
      );
      if (ranDry) problems.push(`${tag} pop_one_queue: the queue ran dry (${counters.emptyPops} empty pops): raise BENCH_MAX_PREFILL`);
      await httpJson(`${url}/queue/bench-pop`, { method: 'DELETE' }, 60_000);
    });

    // 4. push+pop latency at depth 1, one connection
    await scenario('push_pop_latency', 'push+pop, 1 connection', 1, async () => {
      log(`${tag} push+pop latency (1 connection, alternating push and pop on one queue): ${S} s ...`);
      const counters = { emptyPops: 0, poppedItems: 0, unparsable: 0 };
      const r = await cannon({ url, connections: 1, seconds: S, requests: [pushRequest(() => 'bench-pingpong'), popRequest('bench-pingpong', counters)], sequence: ['push', 'pop'] });
      checkAlive();
      const left = await queueCount(url, 'bench-pingpong');
      const ok = counters.emptyPops === 0 && counters.unparsable === 0 && left <= 1;
      record(
        row({
          backend,
          scenario: 'push_pop_latency',
          title: 'push+pop, 1 connection',
          connections: 1,
          ...fromCannon(r, counters.poppedItems, {
            items_note: 'items moved through the queue (pushed and popped)',
            check: { ok, detail: `${counters.emptyPops} empty pops, ${left} item(s) left` },
          }),
        }),
      );
    });

    // 5. queue depth does not matter
    let filled = false;
    await scenario('depth_prefill', 'pre-fill for the depth scenarios', 1, async () => {
      await prefillAll(tag, url, [
        { queue: 'bench-shallow', items: CONFIG.shallowItems },
        { queue: 'bench-deep', items: CONFIG.deepItems },
      ]);
      filled = true;
    });
    if (filled) {
      for (const [queue, depth, name] of [
        ['bench-shallow', CONFIG.shallowItems, 'depth_shallow'],
        ['bench-deep', CONFIG.deepItems, 'depth_deep'],
      ]) {
        const title = `push+pop on ${depth >= 1000 ? `${depth / 1000}k` : depth} items`;
        await scenario(name, title, 1, async () => {
          log(`${tag} push+pop latency on a queue of ${depth.toLocaleString('en-US')} items (1 connection, ${CONFIG.depthOps.toLocaleString('en-US')} ops) ...`);
          const counters = { emptyPops: 0, poppedItems: 0, unparsable: 0 };
          const ops = CONFIG.depthOps - (CONFIG.depthOps % 2);
          const r = await cannon({ url, connections: 1, amount: ops, requests: [pushRequest(() => queue), popRequest(queue, counters)], sequence: ['push', 'pop'] });
          checkAlive();
          const left = await queueCount(url, queue);
          const ok = counters.emptyPops === 0 && counters.unparsable === 0 && left === depth && counters.poppedItems === ops / 2;
          record(
            row({
              backend,
              scenario: name,
              title,
              connections: 1,
              queue_depth: depth,
              ...fromCannon(r, counters.poppedItems, { check: { ok, detail: `${counters.poppedItems} popped of ${ops / 2} pops, ${left} items left (expected ${depth})` } }),
            }),
          );
        });
      }
    }
  } finally {
    const exit = await service.stop();
    const out = service.output().trim();
    const lines = out ? out.split('\n') : [];
    if (lines.length > 0) {
      log(`${tag} service log (${lines.length} line(s) at LOG_LEVEL=warn${lines.length > 20 ? ', last 20 shown' : ''}):`);
      for (const line of lines.slice(-20)) log(`    ${line}`);
    }
    log(`${tag} stopped (${exit ? `code ${exit.code}, signal ${exit.signal}` : 'already gone'})`);
  }
  return results.filter((r) => r.scenario !== 'warm_up' || r.failed);
}

// ---------------------------------------------------------------------------------------------
// pg-boss, in-process, on the same PostgreSQL

/** `workers` concurrent async loops calling `op` until the deadline (or a hard cap on operations). */
async function closedLoop({ workers, seconds, op }) {
  const samples = [];
  let items = 0;
  let calls = 0;
  let errors = 0;
  let lastError = null;
  let empty = 0;
  const cap = seconds * 200_000;
  const started = performance.now();
  const end = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      for (let i = 0; i < cap && performance.now() < end && calls < cap; i++) {
        calls += 1;
        const t0 = performance.now();
        try {
          const n = await op();
          if (samples.length < MAX_SAMPLES) samples.push(performance.now() - t0);
          if (n === 0) empty += 1;
          items += n;
        } catch (error) {
          errors += 1;
          lastError = error;
          if (errors > 1000) throw error;
        }
      }
    }),
  );
  const duration = (performance.now() - started) / 1000;
  return { duration, calls, items, errors, lastError, empty, latency: summarize(samples) };
}

async function benchPgBoss(problems, prefillHint) {
  const tag = '[pg-boss/postgres]';
  const C = CONFIG.connections;
  const S = CONFIG.seconds;
  const results = [];
  log(`${tag} in-process pg-boss ${packageVersion('pg-boss')} on ${dbUrl(CONFIG.pgbossDb)} (recreated), pool max 10 ...`);
  await recreateDatabase(CONFIG.pgbossDb);
  const boss = new PgBoss({ connectionString: dbUrl(CONFIG.pgbossDb), max: 10, schedule: false, application_name: 'pushpop-bench' });
  let bossErrors = 0;
  boss.on('error', (error) => {
    bossErrors += 1;
    if (bossErrors <= 5) log(`${tag}   pg-boss error event: ${error.message}`);
  });
  await boss.start();
  const record = (r) => {
    results.push(r);
    const bad = [];
    if (r.errors > 0) bad.push(`${r.errors} failed operations (${r.last_error})`);
    if (r.check && r.check.ok === false) bad.push(`check failed: ${r.check.detail}`);
    for (const b of bad) problems.push(`${tag} ${r.scenario}: ${b}`);
    log(
      `${tag}   ${fmtNum(r.req_per_s)} calls/s, ${fmtNum(r.items_per_s)} items/s, p50 ${fmtMs(r.latency_ms.p50)} ms, p99 ${fmtMs(r.latency_ms.p99)} ms, errors ${r.errors}` +
        (r.ran_dry ? ' — RAN DRY' : '') +
        (bad.length ? ` — PROBLEM: ${bad.join('; ')}` : ''),
    );
  };
  const base = { system: 'pg-boss', backend: 'postgres', transport: 'in-process (no HTTP)', connections: C };
  const fromLoop = (r, extra) => ({
    duration_s: round(r.duration, 2),
    requests: r.calls,
    req_per_s: Math.round(r.calls / r.duration),
    items: r.items,
    items_per_s: Math.round(r.items / r.duration),
    latency_ms: r.latency,
    non_2xx: null,
    errors: r.errors,
    last_error: r.lastError ? String(r.lastError.message ?? r.lastError) : null,
    ...extra,
  });
  try {
    await boss.createQueue('bench-warmup');
    await boss.createQueue('bench-send');
    await boss.createQueue('bench-fetch');

    log(`${tag} warm-up: 500 send + fetch/complete (not measured) ...`);
    for (let i = 0; i < 500; i++) {
      await boss.send('bench-warmup', makeItem(i));
      const [job] = await boss.fetch('bench-warmup');
      if (job) await boss.complete('bench-warmup', job.id);
    }

    {
      log(`${tag} send to one queue (${C} concurrent senders): ${S} s ...`);
      let seq = 0;
      const r = await closedLoop({
        workers: C,
        seconds: S,
        op: async () => {
          const id = await boss.send('bench-send', makeItem(++seq));
          if (!id) throw new Error('send returned no id');
          return 1;
        },
      });
      const stored = await boss.getQueueSize('bench-send');
      record({ ...base, scenario: 'send', title: 'send, one queue', ...fromLoop(r, { check: { ok: stored === r.items, detail: `${stored} jobs in the queue for ${r.items} successful sends` } }) });
    }

    {
      // The same depth as pushpop's pop queue where possible, so that both dequeue from the same
      // backlog (pg-boss 10's fetch sorts the whole backlog on every call, so its rate depends on
      // the depth); deeper only when that could run dry: fetch+complete (two statements) is
      // taken to be no faster than 1.2x send (one statement).
      const sendRate = results[0].items_per_s;
      const roundUp = (n) => Math.ceil(n / CONFIG.batchSize) * CONFIG.batchSize;
      const fillTo = Math.min(CONFIG.maxPrefill, Math.max(10_000, prefillHint ?? roundUp(sendRate * S * 3), roundUp(sendRate * S * 1.2)));
      log(`${tag} pre-filling bench-fetch with ${fillTo.toLocaleString('en-US')} jobs (insert() of ${CONFIG.batchSize}) ...`);
      const t0 = performance.now();
      const deadline = Date.now() + CONFIG.prefillTimeoutSeconds * 1000;
      let seq = 0;
      for (let b = 0; b < fillTo / CONFIG.batchSize; b++) {
        if (Date.now() > deadline) throw new Error(`pre-filling bench-fetch took longer than ${CONFIG.prefillTimeoutSeconds} s`);
        const jobs = [];
        for (let i = 0; i < CONFIG.batchSize; i++) jobs.push({ name: 'bench-fetch', data: makeItem(++seq) });
        await boss.insert(jobs);
      }
      const fillSeconds = (performance.now() - t0) / 1000;
      const before = await boss.getQueueSize('bench-fetch');
      if (before !== fillTo) throw new Error(`bench-fetch holds ${before} jobs after inserting ${fillTo}`);
      log(`${tag}   done in ${fillSeconds.toFixed(1)} s (${Math.round(fillTo / fillSeconds).toLocaleString('en-US')} jobs/s by insert, count verified)`);

      log(`${tag} fetch+complete from one pre-filled queue (${fillTo.toLocaleString('en-US')} jobs, batchSize 1, ${C} concurrent workers): ${S} s ...`);
      const r = await closedLoop({
        workers: C,
        seconds: S,
        op: async () => {
          const jobs = await boss.fetch('bench-fetch');
          if (jobs.length === 0) return 0;
          await boss.complete('bench-fetch', jobs[0].id);
          return 1;
        },
      });
      const left = await boss.getQueueSize('bench-fetch');
      const states = Object.fromEntries(
        (await boss.getDb().executeSql('SELECT state, count(*)::int AS n FROM pgboss.job WHERE name = $1 GROUP BY state', ['bench-fetch'])).rows.map((x) => [x.state, x.n]),
      );
      // fetch() swallows query errors and answers [], so an empty fetch with jobs left is reported too
      const ranDry = left === 0;
      record({
        ...base,
        scenario: 'fetch_complete',
        title: 'fetch+complete, one pre-filled queue',
        ...fromLoop(r, {
          prefill: { queue: 'bench-fetch', items: fillTo, seconds: round(fillSeconds, 2), items_per_s: Math.round(fillTo / fillSeconds) },
          ran_dry: ranDry,
          empty_fetches: r.empty,
          items_left: left,
          job_states: states,
          check: {
            ok: fillTo - left === r.items && (states.completed ?? 0) === r.items && r.empty === 0,
            detail: `${fillTo - left} jobs left the queue, ${states.completed ?? 0} in state completed, ${r.items} fetched and completed by the workers, ${r.empty} empty fetches`,
          },
        }),
      });
      if (ranDry) problems.push(`${tag} fetch_complete: the queue ran dry: raise BENCH_MAX_PREFILL`);
    }
  } finally {
    await Promise.race([boss.stop({ graceful: true, wait: true, timeout: 10_000 }), sleep(20_000)]);
    if (bossErrors > 0) problems.push(`${tag} ${bossErrors} pg-boss error event(s)`);
  }
  return results;
}

function packageVersion(name) {
  try {
    return requireFromRoot(`${name}/package.json`).version;
  } catch {
    return 'unknown';
  }
}

// ---------------------------------------------------------------------------------------------
// output

function fmtNum(n) {
  return n === null || n === undefined ? '-' : Math.round(n).toLocaleString('en-US');
}
function fmtMs(n) {
  return n === null || n === undefined ? '-' : n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : n.toFixed(0);
}

function table(headers, rows, alignRight) {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const fmt = (cells) => cells.map((c, i) => (alignRight[i] ? String(c).padStart(widths[i]) : String(c).padEnd(widths[i]))).join('  ');
  return [fmt(headers), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(fmt)].map((line) => line.trimEnd()).join('\n');
}

function printTables(all, meta) {
  log('');
  log(`pushpop benchmark — ${meta.date}, Node ${meta.node}, ${meta.cpus} CPU(s), load average at start ${meta.loadavg_start.join(' / ')}, BENCH_SECONDS=${CONFIG.seconds}, ${CONFIG.connections} connections`);
  log('pushpop is measured over HTTP (loopback, autocannon in the benchmark process, pushpop in a child process);');
  log('pg-boss is measured IN-PROCESS (direct library calls, no HTTP), on the same PostgreSQL: the comparison is conservative for pushpop.');
  log('');
  const rows = all.map((r) => {
    const by = r.latency_ms_by_op;
    const lat = by ? `push ${fmtMs(by.push.p50)}/${fmtMs(by.push.p99)}, pop ${fmtMs(by.pop.p50)}/${fmtMs(by.pop.p99)}` : '';
    const notes = [];
    if (r.http_429) notes.push(`429 x${r.http_429}`);
    if (r.ran_dry) notes.push('RAN DRY');
    if (r.failed) notes.push(`FAILED: ${r.failed.slice(0, 80)}`);
    if (r.stopped_by) notes.push(`STOPPED EARLY: ${r.stopped_by}`);
    if (r.timeouts) notes.push(`${r.timeouts} timeouts`);
    if (r.errors && r.system === 'pushpop') notes.push(`${r.errors} errors`);
    if (r.check && !r.check.ok) notes.push('CHECK FAILED (see problems)');
    if (lat) notes.push(lat);
    if (r.prefill) notes.push(`pre-filled ${fmtNum(r.prefill.items)}, ${fmtNum(r.items_left)} left`);
    return [
      `${r.system}/${r.backend}`,
      r.title,
      r.connections,
      fmtNum(r.req_per_s),
      fmtNum(r.items_per_s),
      fmtMs(r.latency_ms.p50),
      fmtMs(r.latency_ms.p99),
      r.failed ? 'FAILED' : r.non_2xx === null ? `err ${r.errors}` : String(r.non_2xx),
      notes.join('; '),
    ];
  });
  log(table(['system/backend', 'scenario', 'conns', 'req/s', 'items/s', 'p50 ms', 'p99 ms', 'non-2xx', 'notes (latency p50/p99 ms by op)'], rows, [false, false, true, true, true, true, true, true, false]));
  log('req/s for pg-boss counts library calls: one send, or one fetch followed by one complete (one item) per call.');

  // queue depth
  const depthRows = [];
  for (const backend of CONFIG.backends) {
    const shallow = all.find((r) => r.system === 'pushpop' && r.backend === backend && r.scenario === 'depth_shallow');
    const deep = all.find((r) => r.system === 'pushpop' && r.backend === backend && r.scenario === 'depth_deep');
    if (!shallow || !deep) continue;
    const ratio = (a, b) => (a && b ? `${(b / a).toFixed(2)}x` : '-');
    depthRows.push([
      `pushpop/${backend}`,
      `${fmtMs(shallow.latency_ms.p50)} / ${fmtMs(shallow.latency_ms.p99)}`,
      `${fmtMs(deep.latency_ms.p50)} / ${fmtMs(deep.latency_ms.p99)}`,
      `${ratio(shallow.latency_ms.p50, deep.latency_ms.p50)} / ${ratio(shallow.latency_ms.p99, deep.latency_ms.p99)}`,
      `${fmtNum(shallow.req_per_s)} / ${fmtNum(deep.req_per_s)}`,
    ]);
  }
  if (depthRows.length) {
    log('');
    log(`Queue depth does not matter: push+pop on one connection, ${CONFIG.depthOps} ops, ${fmtNum(CONFIG.shallowItems)} vs ${fmtNum(CONFIG.deepItems)} items in the queue`);
    log(table(['system/backend', `p50 / p99 ms @${fmtNum(CONFIG.shallowItems)}`, `p50 / p99 ms @${fmtNum(CONFIG.deepItems)}`, 'deep / shallow', 'req/s shallow / deep'], depthRows, [false, true, true, true, true]));
  }

  // comparison
  const boss = (s) => all.find((r) => r.system === 'pg-boss' && r.scenario === s);
  const pp = (s) => all.find((r) => r.system === 'pushpop' && r.backend === 'postgres' && r.scenario === s);
  if (boss('send') && pp('push_one_queue')) {
    const cmpRows = [
      ['enqueue (items/s)', 'push, 100 queues', fmtNum(pp('push_many_queues')?.items_per_s), 'send, one queue', fmtNum(boss('send').items_per_s), ratio(pp('push_many_queues')?.items_per_s, boss('send').items_per_s)],
      ['enqueue (items/s)', 'push, one queue', fmtNum(pp('push_one_queue').items_per_s), 'send, one queue', fmtNum(boss('send').items_per_s), ratio(pp('push_one_queue').items_per_s, boss('send').items_per_s)],
    ];
    if (pp('pop_one_queue') && boss('fetch_complete')) {
      cmpRows.push(['dequeue (items/s)', 'pop depth 1, one queue', fmtNum(pp('pop_one_queue').items_per_s), 'fetch+complete, one queue', fmtNum(boss('fetch_complete').items_per_s), ratio(pp('pop_one_queue').items_per_s, boss('fetch_complete').items_per_s)]);
    }
    log('');
    log(`pushpop (HTTP, PostgreSQL) vs pg-boss ${meta.versions['pg-boss']} (IN-PROCESS, no HTTP, same PostgreSQL), ${CONFIG.connections} concurrent clients each, ${CONFIG.seconds} s`);
    log(table(['operation', 'pushpop', 'items/s', 'pg-boss', 'items/s', 'pushpop / pg-boss'], cmpRows, [false, false, true, false, true, true]));
    log('pushpop pays for HTTP parsing, validation and loopback TCP on every item (and shares the CPU with its load generator); pg-boss pays none of that here.');
  }

  function ratio(a, b) {
    return a && b ? `${(a / b).toFixed(2)}x` : '-';
  }
}

// ---------------------------------------------------------------------------------------------
// main

async function main() {
  const started = performance.now();
  let commit = null;
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: repoRoot, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    // not a git checkout
  }
  const meta = {
    date: new Date().toISOString(),
    node: process.versions.node,
    platform: `${os.platform()} ${os.release()}`,
    cpus: os.cpus().length,
    cpu_model: os.cpus()[0]?.model ?? null,
    loadavg_start: os.loadavg().map((x) => round(x, 2)),
    loadavg_end: null,
    git_commit: commit,
    build_stale: buildIsStale,
    versions: { autocannon: packageVersion('autocannon'), 'pg-boss': packageVersion('pg-boss'), postgres: null },
    config: {
      seconds: CONFIG.seconds,
      connections: CONFIG.connections,
      item_bytes: CONFIG.itemBytes,
      many_queues: CONFIG.manyQueues,
      batch_size: CONFIG.batchSize,
      depth_ops: CONFIG.depthOps,
      shallow_items: CONFIG.shallowItems,
      deep_items: CONFIG.deepItems,
      max_prefill: CONFIG.maxPrefill,
      backends: CONFIG.backends,
      pgboss: CONFIG.pgboss,
      postgres: CONFIG.pgServer,
    },
    comparison_note:
      'pushpop is measured over HTTP (loopback, autocannon in the benchmark process, the service in a child process); pg-boss is measured in-process (direct library calls, no HTTP) on the same PostgreSQL, so the comparison is conservative for pushpop.',
  };

  log(`pushpop benchmark: ${CONFIG.seconds} s per timed scenario, ${CONFIG.connections} connections, ${CONFIG.itemBytes}-byte JSON items, backends ${CONFIG.backends.join(', ')}${CONFIG.pgboss ? ' + pg-boss' : ''}`);
  log(`load average now ${meta.loadavg_start.join(' / ')} on ${meta.cpus} CPU(s): numbers from a busy machine are noisy`);
  if (buildIsStale) log('WARNING: dist/ is older than src/ — the benchmark runs the last build; run `npm run build` to measure the current sources');

  const needsPostgres = CONFIG.backends.includes('postgres') || CONFIG.pgboss;
  if (needsPostgres) {
    try {
      const client = new pg.Client({ connectionString: dbUrl('postgres'), connectionTimeoutMillis: 10_000 });
      await client.connect();
      meta.versions.postgres = (await client.query('SHOW server_version')).rows[0].server_version;
      await client.end();
    } catch (error) {
      console.error(`cannot reach PostgreSQL at ${CONFIG.pgServer} (${error.message}); set BENCH_PG_URL, or BENCH_BACKENDS=pglite BENCH_PGBOSS=0 to run without it`);
      process.exit(1);
    }
  }

  const problems = [];
  const all = [];
  const guarded = async (label, fn) => {
    try {
      all.push(...(await fn()));
    } catch (error) {
      problems.push(`[${label}] FAILED: ${String(error?.message ?? error).split('\n')[0]}`);
      log(`[${label}] FAILED: ${error?.stack ?? error}`);
    }
  };
  for (const backend of CONFIG.backends) {
    await guarded(`pushpop/${backend}`, () => benchPushpop(backend, problems));
    if (backend === 'postgres' && CONFIG.pgboss) {
      const hint = all.find((r) => r.system === 'pushpop' && r.backend === 'postgres' && r.scenario === 'pop_one_queue')?.prefill?.items;
      await guarded('pg-boss/postgres', () => benchPgBoss(problems, hint));
    }
  }
  if (CONFIG.pgboss && !CONFIG.backends.includes('postgres')) await guarded('pg-boss/postgres', () => benchPgBoss(problems, undefined));

  meta.loadavg_end = os.loadavg().map((x) => round(x, 2));
  meta.total_seconds = round((performance.now() - started) / 1000, 1);
  printTables(all, meta);

  mkdirSync(resultsDir, { recursive: true });
  const file = join(resultsDir, 'latest.json');
  writeFileSync(file, `${JSON.stringify({ meta, results: all, problems }, null, 2)}\n`);
  log('');
  if (problems.length) {
    log(`PROBLEMS (${problems.length}):`);
    for (const p of problems) log(`  - ${p}`);
  } else {
    log('No problems: every pushpop response was 2xx, every count checked out, no queue ran dry.');
  }
  log(`Load average at the end ${meta.loadavg_end.join(' / ')}. Total ${meta.total_seconds} s. Results: ${file}`);
  return problems.length === 0 ? 0 : 1;
}

main().then(
  (code) => {
    killChildren();
    process.exit(code);
  },
  (error) => {
    console.error(`\nbenchmark failed: ${error?.stack ?? error}`);
    killChildren();
    process.exit(1);
  },
);
