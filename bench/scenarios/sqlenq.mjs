// pushpop only: enqueue from SQL (`pushpop_enqueue` inside the application's transaction), against
// the same transactions inserting a row into a table of their own (`sqlenq`).

import { Buffer } from 'node:buffer';
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { URL } from 'node:url';
import pg from 'pg';
import { CONFIG } from '../common/config.mjs';
import { fmtNum } from '../common/format.mjs';
import { problems, runRows, runState } from '../common/results.mjs';
import { errorText, median, progress, round, sleep, summarize } from '../common/util.mjs';
import { pushpopDatabaseUrl } from '../targets/postgres.mjs';

/** The goals: commit rate at least this share of the plain insert's, items poppable within this long of their commit (p99), a batch at most this many times the insert's time. */
export const SQLENQ_TARGETS = { rate: 0.8, p99Ms: 500, batch: 3 };

/** The application's own table: one row per transaction in the comparison, with an index besides its key, as an outbox or an orders table has. */
const OWN_TABLE = `CREATE TABLE IF NOT EXISTS bench_sqlenq_own (id bigserial PRIMARY KEY, queue_id text NOT NULL, item jsonb NOT NULL);
  CREATE INDEX IF NOT EXISTS bench_sqlenq_own_queue ON bench_sqlenq_own (queue_id)`;

const itemOf = (key) => JSON.stringify({ key, pad: 'x'.repeat(120) });

/** `CONFIG.sqlEnqueueTransactions` clients, each running `once(client, i)` in a loop for `ms`; the commits that ended in the window. */
async function loop(clients, ms, once) {
  const until = performance.now() + ms;
  let commits = 0;
  const errors = [];
  await Promise.all(
    clients.map(async (client, i) => {
      while (performance.now() < until && !runState.interrupted && errors.length < 20) {
        try {
          await once(client, i);
          if (performance.now() <= until) commits += 1;
        } catch (error) {
          errors.push(errorText(error));
          await client.query('ROLLBACK').catch(() => undefined);
        }
      }
    }),
  );
  return { commits, errors };
}

/** One long poll of up to 100 items (`wait_seconds=20`) on its own keep-alive connection. */
function popRequest(url, queueId, agent) {
  return new Promise((resolvePop) => {
    const req = http.request(new URL(`/queue/${encodeURIComponent(queueId)}/pop?wait_seconds=20&depth=100`, url), { method: 'POST', agent }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const at = performance.now();
        try {
          resolvePop({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8')), at });
        } catch {
          resolvePop({ status: res.statusCode ?? 0, body: null, at });
        }
      });
      res.on('error', (error) => resolvePop({ status: 0, error: errorText(error), at: performance.now() }));
    });
    req.setTimeout(45_000, () => req.destroy(new Error('no answer within 45 s')));
    req.on('error', (error) => resolvePop({ status: 0, error: errorText(error), at: performance.now() }));
    req.end();
  });
}

/** One transaction running `sql` `statements` times (one statement after the other), with `params(i)` for the i-th: its milliseconds. */
async function transaction(client, { sql, params, statements = 1 }) {
  const t0 = performance.now();
  await client.query('BEGIN');
  for (let i = 0; i < statements; i++) await client.query(sql, params(i));
  await client.query('COMMIT');
  return performance.now() - t0;
}

/**
 * The median milliseconds of `reps` transactions of `a` and of `b`, run alternately (a, b, a,
 * b, …) so that both meet the same moments of a shared machine. A form with `statements` runs
 * its statement that many times, one after the other, as an application does that enqueues as
 * it writes its rows.
 */
async function timedPair(client, a, b, reps) {
  const msA = [];
  const msB = [];
  for (let r = 0; r < reps; r++) {
    msA.push(await transaction(client, a));
    msB.push(await transaction(client, b));
  }
  return [median(msA), median(msB)];
}

/**
 * pushpop only. `BENCH_SQLENQ_TRANSACTIONS` clients (64) connect to pushpop's database as an
 * application sharing it would. For `BENCH_SECONDS` each first commits transactions that insert
 * one row into a table of their own (a key and one more index), then transactions that each call
 * `pushpop_enqueue` once (an item of ~150 bytes, into one of `BENCH_SQLENQ_QUEUES` queues), each
 * measured after `BENCH_WARMUP_SECONDS` of the same. While the second runs, one long poll per
 * queue (`depth=100`, issued again as it ends) pops the items: commit → poppable is the time
 * from the `COMMIT`'s answer to the answer of the poll that brought the item (0 when the poll
 * answered first). Then `BENCH_SQLENQ_BATCH` calls in one transaction against inserting as many
 * rows into the table, both ways: in one statement (set-based) and as that many statements, one
 * per call (median of 5 each, the two alternating).
 */
export async function scenarioSqlEnqueue(target, roundNo) {
  const n = CONFIG.sqlEnqueueTransactions;
  const stamp = Date.now().toString(36);
  const queues = Array.from({ length: CONFIG.sqlEnqueueQueues }, (_, i) => `sqlenq-${roundNo}-${i}-${stamp}`);
  const connectionString = pushpopDatabaseUrl(target);
  const clients = Array.from({ length: n }, () => new pg.Client({ connectionString, application_name: 'pushpop-bench-sqlenq' }));
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  let stopping = false;
  const pollers = [];
  try {
    await Promise.all(clients.map((c) => c.connect()));
    await clients[0].query(OWN_TABLE);
    const insert = (client, i) =>
      client
        .query('BEGIN')
        .then(() => client.query('INSERT INTO bench_sqlenq_own (queue_id, item) VALUES ($1, $2::jsonb)', [queues[i % queues.length], itemOf('own')]))
        .then(() => client.query('COMMIT'));

    progress(`  ${target.name} · sqlenq: ${n} transactions at once inserting one row each (${CONFIG.warmupSeconds} + ${CONFIG.seconds} s) ...`);
    await loop(clients, CONFIG.warmupSeconds * 1000, insert);
    const own = await loop(clients, CONFIG.seconds * 1000, insert);

    // the consumers: one long poll per queue, issued again as it ends
    const committedAt = new Map();
    const poppedAt = new Map();
    const pollErrors = [];
    for (const queueId of queues) {
      pollers.push(
        (async () => {
          while (!stopping && pollErrors.length < 20) {
            const res = await popRequest(target.url, queueId, agent);
            if (res.status !== 200) {
              if (!stopping) pollErrors.push(`${queueId}: ${res.status} ${res.error ?? JSON.stringify(res.body).slice(0, 200)}`);
              await sleep(100);
              continue;
            }
            for (const item of res.body?.items ?? []) poppedAt.set(item.key, res.at);
          }
        })(),
      );
    }
    let seq = 0;
    let measuring = false;
    const enqueue = async (client, i) => {
      const key = `${i}-${seq++}`;
      await client.query('BEGIN');
      await client.query('SELECT pushpop_enqueue($1, $2::jsonb)', [queues[i % queues.length], itemOf(key)]);
      await client.query('COMMIT');
      committedAt.set(key, measuring ? performance.now() : null);
    };
    progress(`  ${target.name} · sqlenq: ${n} transactions at once calling pushpop_enqueue once each, ${queues.length} queues long-polled ...`);
    await loop(clients, CONFIG.warmupSeconds * 1000, enqueue);
    measuring = true;
    const enq = await loop(clients, CONFIG.seconds * 1000, enqueue);
    measuring = false;
    // every committed item must come out of its queue
    const drainUntil = performance.now() + 30_000;
    while (poppedAt.size < committedAt.size && performance.now() < drainUntil) await sleep(50);
    const latencies = [];
    for (const [key, at] of committedAt) {
      const popped = poppedAt.get(key);
      if (at !== null && popped !== undefined) latencies.push(Math.max(0, popped - at));
    }
    const missing = committedAt.size - [...committedAt.keys()].filter((k) => poppedAt.has(k)).length;
    const lat = summarize(latencies);

    progress(`  ${target.name} · sqlenq: ${fmtNum(CONFIG.sqlEnqueueBatch)} calls in one transaction against inserting as many rows ...`);
    const batchQueue = `sqlenq-batch-${roundNo}-${stamp}`;
    const b = CONFIG.sqlEnqueueBatch;
    const setBased = (fn) => ({ sql: fn, params: () => [batchQueue, b, 'key', 'pad', 'x'.repeat(120)] });
    const [batchInsert, batchEnqueue] = await timedPair(
      clients[0],
      setBased('INSERT INTO bench_sqlenq_own (queue_id, item) SELECT $1, jsonb_build_object($3::text, g, $4::text, $5::text) FROM generate_series(1, $2) g'),
      setBased('SELECT count(pushpop_enqueue($1, jsonb_build_object($3::text, g, $4::text, $5::text))) FROM generate_series(1, $2) g'),
      5,
    );
    const [statementsInsert, statementsEnqueue] = await timedPair(
      clients[0],
      { sql: 'INSERT INTO bench_sqlenq_own (queue_id, item) VALUES ($1, $2::jsonb)', params: (i) => [batchQueue, itemOf(`own-${i}`)], statements: b },
      { sql: 'SELECT pushpop_enqueue($1, $2::jsonb)', params: (i) => [batchQueue, itemOf(`batch-${i}`)], statements: b },
      5,
    );

    const ownRate = own.commits / CONFIG.seconds;
    const enqRate = enq.commits / CONFIG.seconds;
    const row = {
      round: roundNo,
      target: target.name,
      scenario: 'sqlenq',
      title: `sqlenq, ${n} transactions`,
      transactions: n,
      queues: queues.length,
      seconds: CONFIG.seconds,
      own_commits_per_s: round(ownRate, 1),
      enqueue_commits_per_s: round(enqRate, 1),
      rate_ratio: round(enqRate / ownRate, 3),
      poppable_ms: { p50: round(lat.p50, 1), p99: round(lat.p99, 1), max: round(lat.max, 1), count: lat.count },
      not_popped: missing,
      batch: b,
      batch_insert_ms: round(batchInsert, 2),
      batch_enqueue_ms: round(batchEnqueue, 2),
      batch_ratio: round(batchEnqueue / batchInsert, 2),
      statements_insert_ms: round(statementsInsert, 2),
      statements_enqueue_ms: round(statementsEnqueue, 2),
      statements_ratio: round(statementsEnqueue / statementsInsert, 2),
      errors: [...own.errors, ...enq.errors, ...pollErrors].slice(0, 20),
    };
    row.target_missed = [
      ...(row.rate_ratio < SQLENQ_TARGETS.rate ? [`commit rate ${row.rate_ratio}× of the insert's < ${SQLENQ_TARGETS.rate}×`] : []),
      ...(row.poppable_ms.p99 === null || row.poppable_ms.p99 > SQLENQ_TARGETS.p99Ms
        ? [`commit → poppable p99 ${row.poppable_ms.p99} ms > ${SQLENQ_TARGETS.p99Ms} ms`]
        : []),
      ...(row.batch_ratio > SQLENQ_TARGETS.batch ? [`${b} calls in one statement ${row.batch_ratio}× the insert's time > ${SQLENQ_TARGETS.batch}×`] : []),
      ...(row.statements_ratio > SQLENQ_TARGETS.batch
        ? [`${b} calls as statements ${row.statements_ratio}× the inserts' time > ${SQLENQ_TARGETS.batch}×`]
        : []),
    ];
    const bad = [
      ...(missing > 0 ? [`${missing} committed item(s) not popped within 30 s`] : []),
      ...(row.errors.length ? [`${row.errors.length} error(s): ${row.errors[0]}`] : []),
    ];
    for (const x of bad) problems.push(`${target.name} sqlenq round ${roundNo}: ${x}`);
    runRows.push(row);
    progress(
      `    insert ${row.own_commits_per_s} commits/s, pushpop_enqueue ${row.enqueue_commits_per_s} commits/s (${row.rate_ratio}×); commit → poppable p50 ${row.poppable_ms.p50} / p99 ${row.poppable_ms.p99} / max ${row.poppable_ms.max} ms over ${fmtNum(lat.count)} items; ${b} in one transaction: ${row.batch_enqueue_ms} ms vs ${row.batch_insert_ms} ms in one statement (${row.batch_ratio}×), ${row.statements_enqueue_ms} ms vs ${row.statements_insert_ms} ms as ${b} statements (${row.statements_ratio}×)` +
        (row.target_missed.length ? ` — target missed: ${row.target_missed.join('; ')}` : '') +
        (bad.length ? ` — PROBLEM: ${bad.join('; ')}` : ''),
    );
  } finally {
    stopping = true;
    agent.destroy();
    await Promise.race([Promise.all(pollers), sleep(5000)]);
    await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
  }
}

/** The table of the sqlenq rows: per target, medians over the rounds. */
export function sqlEnqueueTable(targets) {
  const rowsOut = [];
  for (const t of targets) {
    const rows = runRows.filter((r) => r.target === t.name && r.scenario === 'sqlenq' && !r.failed);
    if (rows.length === 0) continue;
    const m = (f) => median(rows.map(f));
    const f1 = (x) => (x === null ? '-' : x.toFixed(1));
    const ratio = (x) => (x === null ? '-' : `${x.toFixed(2)}×`);
    rowsOut.push([
      t.name,
      fmtNum(m((r) => r.own_commits_per_s)),
      fmtNum(m((r) => r.enqueue_commits_per_s)),
      `${m((r) => r.rate_ratio).toFixed(2)}×`,
      `${f1(m((r) => r.poppable_ms.p50))} / ${f1(m((r) => r.poppable_ms.p99))} / ${f1(m((r) => r.poppable_ms.max))}`,
      `${f1(m((r) => r.batch_insert_ms))} / ${f1(m((r) => r.batch_enqueue_ms))}`,
      `${m((r) => r.batch_ratio).toFixed(2)}×`,
      `${f1(m((r) => r.statements_insert_ms))} / ${f1(m((r) => r.statements_enqueue_ms))}`,
      ratio(m((r) => r.statements_ratio)),
    ]);
  }
  const title = `Enqueue from SQL (pushpop only): ${CONFIG.sqlEnqueueTransactions} transactions at once on pushpop's database, each inserting one row into a table of its own (key + one index) or calling pushpop_enqueue once (${CONFIG.sqlEnqueueQueues} queues, one long poll each); commit → poppable = the poll's answer − the COMMIT's; then ${fmtNum(CONFIG.sqlEnqueueBatch)} calls in one transaction against inserting as many rows, in one statement and as one statement each (median of 5); medians over ${CONFIG.rounds} round(s); goals: ≥ ${SQLENQ_TARGETS.rate}× the insert's rate, p99 ≤ ${SQLENQ_TARGETS.p99Ms} ms, batch ≤ ${SQLENQ_TARGETS.batch}×`;
  const headers = [
    'target',
    'insert commits/s',
    'enqueue commits/s',
    'enqueue / insert',
    'commit → poppable p50 / p99 / max ms',
    `${fmtNum(CONFIG.sqlEnqueueBatch)} in one statement: insert / enqueue ms`,
    'one statement: enqueue / insert',
    `${fmtNum(CONFIG.sqlEnqueueBatch)} statements: insert / enqueue ms`,
    'statements: enqueue / insert',
  ];
  return { title, mdTitle: `${title}.`, headers, rows: rowsOut, right: headers.map((_, i) => i > 0) };
}
