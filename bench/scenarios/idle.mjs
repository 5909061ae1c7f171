// pushpop only: what waiting consumers cost when nothing happens (`idle`).

import http from 'node:http';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { CONFIG } from '../common/config.mjs';
import { fmtNum } from '../common/format.mjs';
import { problems, runRows, runState } from '../common/results.mjs';
import { progress, round, sleep } from '../common/util.mjs';
import { pushpopDatabaseUrl } from '../targets/postgres.mjs';
import { CLK_TCK } from '../targets/proc.mjs';
import { closeIdleServiceConnections, cpuTicks, idleWindow, longPollRequest, noPollsWaiting, openPolls, pollsWaiting, warmLongPolls } from './long-polls.mjs';

/** The most database transactions per second that idle consumers should cost: idle costs (next to) nothing. */
export const IDLE_TRANSACTIONS_TARGET = 5;

/**
 * pushpop only. `BENCH_IDLE_POLLS` consumers each long-poll (`wait_seconds=20`) a queue of their
 * own that nothing is ever pushed to, and poll again whenever a poll ends, as a real consumer
 * does. Once every poll waits and the service's idle database connections were closed (so that
 * PostgreSQL has reported what the opening cost), nothing else happens for `BENCH_IDLE_SECONDS`
 * while the database's transactions (`xact_commit + xact_rollback` of pg_stat_database for
 * pushpop's database), the service's CPU and PostgreSQL's are measured. No schedules exist.
 * The window comes right after the opening, so on a machine that opens the polls within
 * 20 − BENCH_IDLE_SECONDS s no poll ends in it; otherwise the polls re-issued in it are counted
 * and shown beside the figures.
 */
export async function scenarioIdle(target, roundNo) {
  const n = CONFIG.idlePolls;
  await warmLongPolls(target, n);
  const stamp = Date.now().toString(36);
  const ids = Array.from({ length: n }, (_, i) => `idle-${roundNo}-${i}-${stamp}`);
  const pollAgent = new http.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: n + 16 });
  const monitor = new pg.Client({ connectionString: pushpopDatabaseUrl(target), application_name: 'pushpop-bench-monitor' });
  await monitor.connect();
  let stopping = false;
  let consumers = [];
  try {
    progress(`  ${target.name} · idle: opening ${fmtNum(n)} long polls on empty queues (re-issued as they end) ...`);
    await noPollsWaiting(target.url);
    const opened = performance.now();
    const errors = [];
    let repolls = 0;
    let storeUnavailable = 0;
    let repollsInWindow = 0;
    let inWindow = false;
    const consume = async (i, first) => {
      let res = await first;
      while (!stopping) {
        if (res.status === 200 && res.body?.count > 0) errors.push(`${ids[i]}: received ${res.body.count} item(s) from a queue nothing was pushed to`);
        // a poll whose turn ran on a connection the benchmark closed (closeIdleServiceConnections) is
        // answered 503 STORE_UNAVAILABLE, "retry shortly": counted apart, and polled again as a client would
        else if (res.status === 503 && res.body?.error_code === 'STORE_UNAVAILABLE') storeUnavailable += 1;
        else if (res.status !== 200) errors.push(`${ids[i]}: ${res.status} ${res.error ?? JSON.stringify(res.body).slice(0, 200)}`);
        if (stopping || runState.interrupted || errors.length > 100) return;
        repolls += 1;
        if (inWindow) repollsInWindow += 1;
        if (res.status !== 200) await sleep(100);
        res = await longPollRequest(target.url, ids[i], pollAgent);
      }
    };
    const open = await openPolls({ url: target.url, ids, pollAgent, errors, consume });
    consumers = open.consumers;
    const openSeconds = (performance.now() - opened) / 1000;
    const waitingSince = performance.now();
    progress(
      `    ${fmtNum(open.waitingAtStart)} polls waiting after ${openSeconds.toFixed(1)} s; idle for ${CONFIG.idleSeconds} s (measured: database transactions, CPU) ...`,
    );
    await sleep(Math.max(0, 1000 - (performance.now() - waitingSince)));
    const closedConnections = await closeIdleServiceConnections(monitor, [target.proc]);
    inWindow = true;
    const window = await idleWindow(monitor, () => cpuTicks(target), CONFIG.idleSeconds * 1000);
    inWindow = false;
    const waitingAfter = await pollsWaiting(target.url);
    const { cpu0, cpu1, seconds } = window;
    const msPerS = (a, b) => (a === null || b === null ? null : round(((b - a) / CLK_TCK / seconds) * 1000, 1));
    const row = {
      round: roundNo,
      target: target.name,
      scenario: 'idle',
      title: `idle, ${fmtNum(n)} long polls`,
      polls: n,
      waiting_at_start: open.waitingAtStart,
      open_seconds: round(openSeconds, 2),
      pool_connections_closed_before: closedConnections,
      seconds: round(seconds, 2),
      transactions: window.transactions,
      transactions_per_s: round(window.transactions / seconds, 1),
      server_cpu_ms_per_s: msPerS(cpu0.server, cpu1.server),
      postgres_cpu_ms_per_s: msPerS(cpu0.postgres, cpu1.postgres),
      repolls_in_window: repollsInWindow,
      repolls,
      store_unavailable_503: storeUnavailable,
      waiting_after: waitingAfter,
      errors: errors.slice(0, 20),
      error_count: errors.length,
      cpu: {},
    };
    const bad = [];
    if (errors.length > 0) bad.push(`${errors.length} failed polls (${errors[0]})`);
    for (const b of bad) problems.push(`${target.name} idle round ${roundNo}: ${b}`);
    row.target_missed = row.transactions_per_s > IDLE_TRANSACTIONS_TARGET ? [`${row.transactions_per_s} transactions/s > ${IDLE_TRANSACTIONS_TARGET}`] : [];
    runRows.push(row);
    progress(
      `    ${row.transactions_per_s} transactions/s (${row.transactions} in ${row.seconds} s), service CPU ${row.server_cpu_ms_per_s ?? '-'} ms/s, PostgreSQL CPU ${row.postgres_cpu_ms_per_s ?? '-'} ms/s, ${repollsInWindow} polls re-issued in the window` +
        (repollsInWindow > 0 ? ` (the first polls' 20 s ended in it: opening took ${row.open_seconds} s)` : '') +
        (row.target_missed.length ? ` — target missed: ${row.target_missed.join('; ')}` : '') +
        (bad.length ? ` — PROBLEM: ${bad.join('; ')}` : ''),
    );
  } finally {
    // the consumers stop polling again; closing their connections ends the polls in the service
    stopping = true;
    pollAgent.destroy();
    await Promise.race([Promise.all(consumers), sleep(5000)]);
    await monitor.end().catch(() => undefined);
  }
}
