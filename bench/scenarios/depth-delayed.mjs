// pushpop only: push+pop latency on one connection, a queue beside another that should cost the
// same: a shallow and a deep queue (`depth`), a queue with and without many delayed items
// (`delayed`). Both fill their queues once per target, not measured.

import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { clearInterval, setInterval } from 'node:timers';
import { CONFIG } from '../common/config.mjs';
import { fmtMb, fmtNum } from '../common/format.mjs';
import { httpRequest } from '../common/http.mjs';
import { BENCH_DELAY_SECONDS, DEEP_QUEUE, DELAYED_QUEUE, itemJson, PLAIN_QUEUE, randomPriority, SHALLOW_QUEUE } from '../common/items.mjs';
import { forEachLimit, progress, round } from '../common/util.mjs';
import { cannon, newCounters, popRequest, pushRequest } from '../load/cannon.mjs';
import { addItems, queueCounts } from '../targets/counts.mjs';
import { pushpopDatabaseUrl } from '../targets/postgres.mjs';
import { rssKb } from '../targets/proc.mjs';
import { closeIdleServiceConnections } from './long-polls.mjs';
import { failed, measured, record, scenarioTitle } from './record.mjs';

/**
 * The database's row changes so far (tuples inserted, updated and deleted in pg_stat_database), or
 * null for a target whose database the benchmark cannot read. Work that does not depend on how
 * busy the machine is: a deep queue should write no more rows per request than a shallow one.
 * PostgreSQL reports a busy backend's counts up to 10 s late, so the service's idle connections
 * are closed first (a backend reports everything when it ends; the pool opens new ones).
 */
async function rowsWritten(target) {
  const client = new pg.Client({ connectionString: pushpopDatabaseUrl(target), application_name: 'pushpop-bench-monitor' });
  try {
    await client.connect();
    await closeIdleServiceConnections(client, [target.proc]);
    const { rows } = await client.query(
      'SELECT pg_stat_clear_snapshot(), tup_inserted + tup_updated + tup_deleted AS n FROM pg_stat_database WHERE datname = current_database()',
    );
    return Number(rows[0].n);
  } catch {
    return null;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * One connection alternating push and pop (priority 0) on `queue`, BENCH_DEPTH_OPS requests after
 * 200 unmeasured; the queue must hold `depth` items afterwards and every pop must find one.
 */
async function alternate(target, roundNo, queue, name, depth) {
  const ops = CONFIG.depthOps - (CONFIG.depthOps % 2);
  try {
    progress(
      `  ${target.name} · ${scenarioTitle(name)}: ${ops.toLocaleString('en-US')} requests alternating push and pop (priority 0) after 200 unmeasured ...`,
    );
    // Rows are counted over the warm-up and the measured requests together (the same requests).
    const rows0 = await rowsWritten(target);
    const warm = newCounters();
    await cannon({ url: target.url, connections: 1, amount: 200, requests: [pushRequest(() => queue, warm, 0), popRequest(() => queue, warm)] });
    const counters = newCounters();
    const { r, cpu } = await measured(target, {
      connections: 1,
      amount: ops,
      requests: [pushRequest(() => queue, counters, 0), popRequest(() => queue, counters)],
      sequence: ['push', 'pop'],
    });
    const rows1 = await rowsWritten(target);
    const left = (await queueCounts(target, [queue])).get(queue);
    const ok = counters.emptyPops === 0 && warm.emptyPops === 0 && counters.unparsable === 0 && left === depth && counters.popped === ops / 2;
    record(target, name, roundNo, r, cpu, {
      connections: 1,
      queue_depth: depth,
      popped_items: counters.popped,
      empty_pops: counters.emptyPops,
      rows_written_per_req: rows0 === null || rows1 === null ? null : round((rows1 - rows0) / (r.responses + 200), 2),
      check: { ok, detail: `${counters.popped} popped of ${ops / 2} pops, ${left} items left (expected ${depth})` },
    });
  } catch (error) {
    failed(target, name, roundNo, error);
  }
}

/** pushpop only: push+pop latency on one connection at a shallow and at a deep queue, and the service's RSS while the deep queue fills. */
export async function scenarioDepth(target, roundNo) {
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
  // Side by side, in turns: odd rounds measure the shallow queue first, even rounds the deep one, so
  // that what follows the fill (autovacuum of its dead rows) or a busy moment of the machine does
  // not always fall on the same queue.
  const both = [
    () => alternate(target, roundNo, SHALLOW_QUEUE, 'depth-shallow', CONFIG.shallowItems),
    () => alternate(target, roundNo, DEEP_QUEUE, 'depth-deep', CONFIG.deepItems),
  ];
  for (const measure of roundNo % 2 === 1 ? both : both.reverse()) await measure();
}

/**
 * pushpop only: push+pop latency on one connection on a queue with BENCH_DELAYED_ITEMS delayed
 * items (not due during the run) beside the same on a queue with none. Delayed items live in a
 * table of their own and a turn reads them only when the queue's earliest due time has passed,
 * so the two should not differ.
 */
export async function scenarioDelayed(target, roundNo) {
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
  await alternate(target, roundNo, PLAIN_QUEUE, 'delayed-none', CONFIG.shallowItems);
  await alternate(target, roundNo, DELAYED_QUEUE, 'delayed-many', CONFIG.shallowItems);
}
