// pushpop only: fair pops over a prefix (`fair`): their cost against pops on known ids, and with
// many queues under the prefix that hold nothing against none.

import { Buffer } from 'node:buffer';
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { URL } from 'node:url';
import pg from 'pg';
import { CONFIG } from '../common/config.mjs';
import { fmtNum } from '../common/format.mjs';
import { problems, runRows, runState } from '../common/results.mjs';
import { errorText, forEachLimit, median, progress, round, summarize } from '../common/util.mjs';
import { pushpopDatabaseUrl } from '../targets/postgres.mjs';

/** Sizes, each configurable (bench/common/config.mjs): the full run is long (a million queues); a smoke run sets them small. */
const FAIR = {
  /** Queues under the prefix of the first comparison, of which `ready` hold items. */
  queues: CONFIG.fairQueues,
  ready: Math.min(CONFIG.fairReady, CONFIG.fairQueues),
  /** Empty queues under the prefix of the second comparison (against none). */
  empty: CONFIG.fairEmpty,
  /** Items pushed to each ready queue before a measurement. */
  items: CONFIG.fairItems,
  connections: CONFIG.fairConnections,
};

const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });

/** One POST without a body; resolves with the status and the parsed answer. */
function post(url, path) {
  return new Promise((resolve, reject) => {
    const req = http.request(new URL(path, url), { method: 'POST', agent }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * Queues that hold nothing, made by SQL in batches as `PUT /queue/{id}/settings` would make them
 * (set-up, not measured: a million HTTP requests would take longer than the measurement).
 */
async function makeEmptyQueues(db, prefix, n) {
  for (let from = 0; from < n; from += 100_000) {
    const to = Math.min(n, from + 100_000) - 1;
    await db.query(
      `INSERT INTO queues (queue_id, version, segment_size, buffer_segments)
       SELECT $1 || lpad(g::text, 7, '0'), (random() * 1e12)::bigint, 100, 1 FROM generate_series($2::int, $3::int) g`,
      [prefix, from, to],
    );
  }
}

/** `FAIR.items` items on each of `ids`, by batch pushes (set-up, not measured). */
async function fill(url, ids) {
  const body = JSON.stringify({ items: Array.from({ length: FAIR.items }, (_, i) => ({ item: { n: i, pad: 'x'.repeat(CONFIG.itemBytes) } })) });
  await forEachLimit(ids, 16, async (id) => {
    const res = await new Promise((resolve, reject) => {
      const req = http.request(new URL(`/queue/${id}/push/batch`, url), { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (r) => {
        r.resume();
        r.on('end', () => resolve(r.statusCode));
      });
      req.on('error', reject);
      req.end(body);
    });
    if (res !== 200) throw new Error(`push/batch to ${id}: ${res}`);
  });
}

/** `FAIR.connections` consumers popping for `CONFIG.seconds`, each pop's path from `pathOf(i)`; pops/s and latencies. */
async function measure(url, pathOf) {
  const latencies = [];
  let pops = 0;
  let empty = 0;
  const errors = [];
  const end = performance.now() + CONFIG.seconds * 1000;
  let next = 0;
  await Promise.all(
    Array.from({ length: FAIR.connections }, async () => {
      while (performance.now() < end && !runState.interrupted && errors.length < 20) {
        const t0 = performance.now();
        try {
          const res = await post(url, pathOf(next++));
          if (res.status !== 200) errors.push(`${res.status} ${JSON.stringify(res.body).slice(0, 200)}`);
          else if (res.body.count === 0) empty += 1;
          else pops += 1;
        } catch (error) {
          errors.push(errorText(error));
        }
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const seconds = CONFIG.seconds;
  return { pops_per_s: round(pops / seconds), empty_answers: empty, latency_ms: summarize(latencies), errors };
}

/**
 * pushpop only. Two comparisons, each on queues of its own (a prefix per round):
 * 1. `BENCH_FAIR_QUEUES` queues under a prefix, `BENCH_FAIR_READY` of them holding items: fair pops
 *    on the prefix against pops on the ready queues' ids, which the consumers know (round robin
 *    over them), with `BENCH_FAIR_CONNECTIONS` consumers for `BENCH_SECONDS` each.
 * 2. Fair pops with `BENCH_FAIR_READY` ready queues and `BENCH_FAIR_EMPTY` empty queues under the
 *    prefix, against the same with no empty queue: the ready set keeps the cost the same.
 * Each ready queue gets `BENCH_FAIR_ITEMS` items before each measurement, enough that no
 * measurement runs out (`empty_answers` says if one did).
 */
export async function scenarioFair(target, roundNo) {
  const stamp = `${roundNo}-${Date.now().toString(36)}`;
  const db = new pg.Client({ connectionString: pushpopDatabaseUrl(target), application_name: 'pushpop-bench-fair' });
  await db.connect();
  try {
    const rows = [];
    const record = (name, title, result) => {
      const row = { round: roundNo, target: target.name, scenario: 'fair', name, title, ...FAIR, seconds: CONFIG.seconds, ...result };
      if (result.errors.length > 0) problems.push(`${target.name} fair ${name} round ${roundNo}: ${result.errors.length} errors (${result.errors[0]})`);
      runRows.push(row);
      rows.push(row);
      progress(
        `    ${title}: ${fmtNum(result.pops_per_s)} pops/s, p50 ${result.latency_ms.p50} ms, p99 ${result.latency_ms.p99} ms${result.empty_answers ? `, ${result.empty_answers} empty answers` : ''}`,
      );
    };

    const a = `fair-${stamp}-a-`;
    progress(
      `  ${target.name} · fair: ${fmtNum(FAIR.queues)} queues under ${a}, ${fmtNum(FAIR.ready)} with ${FAIR.items} items each (set-up, not measured) ...`,
    );
    await makeEmptyQueues(db, a, FAIR.queues);
    const step = Math.max(1, Math.floor(FAIR.queues / FAIR.ready));
    const readyA = Array.from({ length: FAIR.ready }, (_, i) => `${a}${String(i * step).padStart(7, '0')}`);
    await fill(target.url, readyA);
    record(
      'fair-prefix',
      `fair pops, ${fmtNum(FAIR.ready)} of ${fmtNum(FAIR.queues)} queues ready`,
      await measure(target.url, () => `/queues/pop?prefix=${a}`),
    );
    await fill(target.url, readyA);
    record('known-ids', `pops on ${fmtNum(FAIR.ready)} known ids`, await measure(target.url, (i) => `/queue/${readyA[i % readyA.length]}/pop`));

    for (const [label, empty] of [
      ['none', 0],
      ['many', FAIR.empty],
    ]) {
      const p = `fair-${stamp}-${label}-`;
      progress(`  ${target.name} · fair: ${fmtNum(FAIR.ready)} ready and ${fmtNum(empty)} empty queues under ${p} (set-up, not measured) ...`);
      await makeEmptyQueues(db, p, empty);
      const ready = Array.from({ length: FAIR.ready }, (_, i) => `${p}r${String(i).padStart(6, '0')}`);
      await fill(target.url, ready);
      // Set-up, as a database in steady state would be: the bulk insert's one-time vacuum (which
      // autovacuum would otherwise run during the measurement, on the same two cores) and statistics.
      await db.query('VACUUM (ANALYZE) queues');
      record(
        `empty-${label}`,
        `fair pops, ${fmtNum(FAIR.ready)} ready queues and ${fmtNum(empty)} empty ones`,
        await measure(target.url, () => `/queues/pop?prefix=${p}`),
      );
    }
    const [fair, known, none, many] = rows;
    if (fair && known && none && many)
      progress(
        `    fair / known ids: ${round(fair.pops_per_s / known.pops_per_s, 2)}; with ${fmtNum(FAIR.empty)} empty queues / none: ${round(many.pops_per_s / none.pops_per_s, 2)}`,
      );
  } finally {
    await db.end().catch(() => undefined);
  }
}

/** The fair rows of the report: per target, medians over the rounds of each measurement and of the two ratios. */
export function fairTable(targets) {
  const rowsOut = [];
  for (const t of targets) {
    const rows = runRows.filter((r) => r.target === t.name && r.scenario === 'fair' && !r.failed);
    if (rows.length === 0) continue;
    const of = (name) => rows.filter((r) => r.name === name);
    const pops = (name) => median(of(name).map((r) => r.pops_per_s));
    const cell = (name) =>
      of(name).length === 0
        ? '-'
        : `${fmtNum(pops(name))} (${round(median(of(name).map((r) => r.latency_ms.p50)), 1)} / ${round(median(of(name).map((r) => r.latency_ms.p99)), 1)})`;
    const ratio = (a, b) => (of(a).length === 0 || of(b).length === 0 ? '-' : `${round(pops(a) / pops(b), 2)}×`);
    rowsOut.push([
      t.name,
      cell('fair-prefix'),
      cell('known-ids'),
      ratio('fair-prefix', 'known-ids'),
      cell('empty-none'),
      cell('empty-many'),
      ratio('empty-none', 'empty-many'),
    ]);
  }
  const title = `Fair pops (pushpop only): POST /queues/pop?prefix= with ${CONFIG.fairConnections} connections; ${fmtNum(FAIR.ready)} ready among ${fmtNum(FAIR.queues)} queues against pops on those known ids, then ${fmtNum(FAIR.ready)} ready queues alone against the same with ${fmtNum(FAIR.empty)} empty queues under the prefix; pops/s (p50 / p99 ms), medians over ${CONFIG.rounds} round(s); goals: fair ≥ 0.8× known ids, none ÷ many ≤ 1.2×`;
  const headers = [
    'target',
    'fair pops',
    'pops on known ids',
    'fair / known',
    'fair, no empty queues',
    `fair, ${fmtNum(FAIR.empty)} empty queues`,
    'none / many',
  ];
  return { title, mdTitle: `${title}.`, headers, rows: rowsOut, right: headers.map((_, i) => i > 0) };
}
