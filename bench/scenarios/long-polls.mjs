// What the long-poll scenarios (`longpoll`, `idle`) share: one long poll on its own connection,
// opening thousands of them without flooding the service, a quiet database to measure, the idle
// window itself, and a second pushpop process on the same database.

import { Buffer } from 'node:buffer';
import { mkdtempSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { clearTimeout, setTimeout } from 'node:timers';
import { URL } from 'node:url';
import { CONFIG } from '../common/config.mjs';
import { fmtNum } from '../common/format.mjs';
import { httpRequest, metricsOf } from '../common/http.mjs';
import { errorText, forEachLimit, freePort, progress, sleep } from '../common/util.mjs';
import { transactionsOf, pushpopDatabaseUrl } from '../targets/postgres.mjs';
import { ownTicks, treeTicks } from '../targets/proc.mjs';
import { startServer, tempDirs } from '../targets/processes.mjs';
import { pushpopEnv } from '../targets/targets.mjs';

const pushpopDir = CONFIG.pushpopDir;

/** A second pushpop process on the target's database (pushes go through it), started on first use and kept to the end. */
export async function secondProcess(target) {
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
export function longPollRequest(url, queueId, pollAgent, onSent) {
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

/** Long polls waiting in a pushpop process now (its `pushpop_long_polls_waiting` gauge). */
export const pollsWaiting = async (url) => (await metricsOf(url)).get('pushpop_long_polls_waiting') ?? 0;

/** Unmeasured, once per target: a fresh service opens its first thousands of polls slower (code not yet optimised by V8). */
export async function warmLongPolls(target, polls) {
  if (target.longPollWarm) return;
  target.longPollWarm = true;
  const warm = Array.from({ length: Math.min(2000, polls) }, (_, i) => `lp-warm-${i}-${Date.now().toString(36)}`);
  await forEachLimit(warm, 200, async (id) => {
    await httpRequest(target.url, 'POST', `/queue/${encodeURIComponent(id)}/pop?wait_seconds=1`, null, 30_000);
  });
}

/**
 * Opens one long-polling consumer per queue id of `ids` and waits until their polls wait in the
 * service. `consume(i, firstPoll)` is consumer i's own loop, given its first poll's promise.
 * At most 256 connections open at a time (the listen backlog is finite), and at most 400 polls
 * are sent and not yet waiting (in their first turn), read from the service's gauge: more would
 * only queue for the service's database connections. Throws when a consumer reported an error
 * (pushed to `errors`) or 60 s passed before they all waited.
 * @returns {Promise<{ consumers: Promise<void>[], firstSentAt: number | null, waitingAtStart: number }>}
 */
export async function openPolls({ url, ids, pollAgent, errors, consume }) {
  const n = ids.length;
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
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      parked = await pollsWaiting(url).catch(() => parked);
      await sleep(100);
    }
  })();
  let firstSentAt = null;
  try {
    for (let i = 0; i < n; i++) {
      while (i - parked > 400 && errors.length === 0) await sleep(20);
      if (errors.length > 0) break;
      await slot();
      firstSentAt ??= performance.now();
      consumers.push(consume(i, longPollRequest(url, ids[i], pollAgent, release)));
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
  } finally {
    sampling = false;
    await sampler;
  }
  return { consumers, firstSentAt, waitingAtStart: parked };
}

/** Waits until no long poll of an earlier run waits (they end when their connections close); throws if some still do. */
export async function noPollsWaiting(url) {
  for (let i = 0; i < 100 && (await pollsWaiting(url)) !== 0; i++) await sleep(250);
  const baseline = await pollsWaiting(url);
  if (baseline !== 0) throw new Error(`${baseline} long polls already waiting before the run`);
}

/**
 * Makes the database's transaction count trustworthy from now on. PostgreSQL reports a backend's
 * transactions up to 10 s late when it went idle less than a second after its last report, so
 * what the polls' first turns ran could land in a window measured next. A backend reports
 * everything when it exits: the service's idle connections are closed (the pool opens new ones
 * when it needs them; the notification connection comes back by itself, and this waits until it
 * listens again in each of `procs`). Answers how many connections were closed.
 */
/**
 * The application names of the service's connections, of any release (`pushpop` and
 * `pushpop-notifications`, with `/<release>` since the fourth), so that the build measured may be
 * an older one.
 */
const SERVICE_CONNECTION_NAMES = '^pushpop(-notifications)?(/[0-9]+)?$';

export async function closeIdleServiceConnections(monitor, procs) {
  const { rowCount } = await monitor.query(
    `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name ~ '${SERVICE_CONNECTION_NAMES}' AND state = 'idle' AND pid <> pg_backend_pid()`,
  );
  for (const proc of procs) {
    for (let i = 0; i < 50 && (await metricsOf(proc.url)).get('pushpop_notifications_listening') !== 1; i++) await sleep(20);
  }
  await sleep(200);
  return rowCount;
}

/** CPU ticks of the target's service, of a second process (or null) and of its PostgreSQL's tree (or null). */
export function cpuTicks(target, pusher = null) {
  return {
    server: ownTicks(target.proc.pid),
    pusher: pusher ? ownTicks(pusher.pid) : null,
    postgres: target.postmaster ? treeTicks(target.postmaster) : null,
  };
}

/**
 * An idle window of `ms`: the database's transactions (pg_stat_database, through `monitor`) and
 * the CPU ticks of `sample()` before and after it.
 */
export async function idleWindow(monitor, sample, ms) {
  const t0 = performance.now();
  const xact0 = await transactionsOf(monitor);
  const cpu0 = sample();
  await sleep(ms);
  const xact1 = await transactionsOf(monitor);
  const cpu1 = sample();
  return { seconds: (performance.now() - t0) / 1000, transactions: xact1 - xact0, cpu0, cpu1 };
}
