// `clients`: each system through its own client library, side by side (bench/clients/): BullMQ's
// Queue and Worker on the bullmq-redis target's Redis, pg-boss on the pgboss target's database,
// @pushpop/client against each pushpop target with its queues in exclusive and in shared lock
// mode, and as a reference the floor target's raw SQL over plain node:http, no library. The
// library runs in a child process per system and round; this side samples the target's CPU
// around each of its measured parts and records the rows.

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import process from 'node:process';
import { benchDir, CONFIG, dbUrl } from '../common/config.mjs';
import { fmtMs, fmtNum } from '../common/format.mjs';
import { problems, runRows, runState } from '../common/results.mjs';
import { progress, round, sleep, summarize } from '../common/util.mjs';
import { cpuPerRequest, sampleCpu } from '../targets/cpu.mjs';
import { killGroup, track } from '../targets/processes.mjs';
import { failed } from './record.mjs';

/** Batch size of the produce-batch row and of the fills; pushes awaited at once in the single-push rows; the latency row's push interval. */
const BATCH_SIZE = 1000;
const IN_FLIGHT = 64;
const EVERY_MS = 10;

/** The client runs of each target: the library, and pushpop's lock modes. */
const RUNS = {
  'bullmq-redis': [{ system: 'bullmq', column: 'BullMQ on Redis' }],
  pgboss: [{ system: 'pgboss', column: 'pg-boss' }],
  'pushpop-postgres': [
    { system: 'pushpop', lockMode: 'exclusive', column: 'pushpop-postgres (exclusive)' },
    { system: 'pushpop', lockMode: 'shared', column: 'pushpop-postgres (shared)' },
  ],
  'pushpop-embedded': [
    { system: 'pushpop', lockMode: 'exclusive', column: 'pushpop-embedded (exclusive)' },
    { system: 'pushpop', lockMode: 'shared', column: 'pushpop-embedded (shared)' },
  ],
  floor: [{ system: 'floor', column: 'raw-SQL floor (HTTP, no library)' }],
};
/** The systems whose client speaks the target's HTTP: the target's server process is the service they use (else the library talks to the store). */
const OVER_HTTP = ['pushpop', 'floor'];
/** The targets that have a client run, in the table's column order. */
export const CLIENT_TARGETS = Object.keys(RUNS);

export async function scenarioClients(target, roundNo) {
  for (const run of RUNS[target.name] ?? []) {
    if (runState.interrupted) break;
    try {
      await clientRun(target, roundNo, run);
    } catch (error) {
      failed(target, `clients ${run.column}`, roundNo, error);
    }
  }
}

async function clientRun(target, roundNo, { system, lockMode, column }) {
  if (system === 'pushpop' && !existsSync(join(CONFIG.pushpopDir, 'libs/client/dist/index.js')))
    throw new Error(`@pushpop/client is not built in ${CONFIG.pushpopDir} (run npm run build there)`);
  const options = {
    system,
    lockMode,
    url: target.url,
    // the library's store: the Redis or the database of the peer's target (pushpop's client and the floor's requests speak HTTP)
    storeUrl: OVER_HTTP.includes(system) ? null : target.redis ? target.redis.url : dbUrl(target.db),
    pushpopDir: CONFIG.pushpopDir,
    items: CONFIG.clientItems,
    batchItems: CONFIG.clientItems * 10,
    batchSize: BATCH_SIZE,
    inFlight: IN_FLIGHT,
    everyMs: EVERY_MS,
    maxSeconds: CONFIG.clientMaxSeconds,
    latencyPushes: CONFIG.clientLatencyPushes,
  };
  progress(`  ${target.name} · clients, ${column}: ${system === 'floor' ? 'over node:http' : 'through its own client library'} (a process of its own) ...`);
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  const child = spawn(process.execPath, [join(benchDir, 'clients', 'run-client.mjs'), JSON.stringify(options)], {
    env,
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    detached: true,
  });
  const exited = track(child);
  let output = '';
  const keep = (chunk) => (output = (output + chunk.toString()).slice(-20_000));
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const before = new Map();
  let outcome = null;
  child.on('message', (message) => {
    if (message.type === 'progress') progress(`    ${message.line}`);
    else if (message.type === 'begin') {
      before.set(message.row, sampleCpu(target));
      child.send({ type: 'go' });
    } else if (message.type === 'end')
      recordRow(target, roundNo, column, OVER_HTTP.includes(system), message, cpuPerRequest(before.get(message.row), sampleCpu(target), message.items));
    else if (message.type === 'done' || message.type === 'failed') outcome = message;
  });
  // bounded: the warm-up's six parts and seven rows, the slow ones capped at BENCH_CLIENT_MAX_SECONDS, plus fills and start-up
  const capSeconds = 16 * CONFIG.clientMaxSeconds + 600;
  const exit = await Promise.race([exited, sleep(capSeconds * 1000).then(() => null)]);
  if (exit === null) {
    killGroup(child.pid, 'SIGKILL');
    throw new Error(`the client process did not finish within ${capSeconds} s`);
  }
  if (outcome?.type !== 'done')
    throw new Error(`the client process failed: ${outcome?.error ?? `exit code ${exit.code}, signal ${exit.signal}`}\n${output.slice(-2000)}`);
  for (const row of runRows) if (row.scenario === 'clients' && row.round === roundNo && row.column === column) row.options = outcome.options;
}

function recordRow(target, roundNo, column, overHttp, m, cpu) {
  const latency = m.latencies_ms ? summarize(m.latencies_ms.map((x) => x ?? Infinity)) : null;
  const row = {
    round: roundNo,
    target: target.name,
    scenario: 'clients',
    column,
    row: m.row,
    items: m.items,
    seconds: round(m.seconds, 3),
    items_per_s: m.row === 'latency' ? null : round(m.items_per_s),
    capped: m.capped ?? false,
    ...(m.requests === undefined ? {} : { requests: m.requests, requests_per_item: round(m.requests / m.items, 2) }),
    ...(latency ? { latency_ms: latency, handled: m.handled, push_failures: m.push_failure_count } : {}),
    cpu: {
      // the server process of the target the client speaks HTTP to (pushpop's service, the floor's peer); a library on a store has none
      service_us_per_item: overHttp ? cpu.server_us_per_req : null,
      store_us_per_item: cpu.store_us_per_req,
      client_us_per_item: round(m.client_us_per_item, 1),
    },
    errors: m.errors ?? [],
  };
  runRows.push(row);
  const bad = [];
  if (row.errors.length > 0) bad.push(`${row.errors.length} error event(s) of the client library (${row.errors[0]})`);
  if (m.push_failure_count > 0) bad.push(`${m.push_failure_count} pushes failed (${m.push_failures[0]})`);
  for (const b of bad) problems.push(`${target.name} clients ${column} ${m.row} round ${roundNo}: ${b}`);
  const what = latency
    ? `push → handler p50 ${latency.p50 === null ? 'not handled' : `${fmtMs(latency.p50)} ms`}, p99 ${latency.p99 === null ? 'not handled' : `${fmtMs(latency.p99)} ms`} (${fmtNum(m.handled)} of ${fmtNum(m.items)} handled)`
    : `${fmtNum(row.items_per_s)} items/s${row.capped ? ` (${fmtNum(row.items)} items done when the ${CONFIG.clientMaxSeconds} s ran out)` : ''}${row.requests_per_item === undefined ? '' : `, ${row.requests_per_item} requests/item`}`;
  progress(
    `    = ${m.row}: ${what}; CPU µs/item: client ${fmtNum(row.cpu.client_us_per_item)}, service ${fmtNum(row.cpu.service_us_per_item)}, ${target.redis ? 'Redis' : 'PostgreSQL'} ${fmtNum(row.cpu.store_us_per_item)}` +
      (bad.length ? ` — PROBLEM: ${bad.join('; ')}` : ''),
  );
}
