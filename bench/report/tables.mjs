// The tables beside the main one (queue depth, long polls) and the notes under them: what was
// measured, how, and on what machine.

import { CONFIG } from '../common/config.mjs';
import { fmtCount, fmtMb, fmtMs, fmtNum, fmtRatio } from '../common/format.mjs';
import { BENCH_DELAY_SECONDS } from '../common/items.mjs';
import { runRows } from '../common/results.mjs';
import { median } from '../common/util.mjs';
import { ACK_TTL_SECONDS } from '../scenarios/ackpop.mjs';
import { sqlEnqueueTable } from '../scenarios/sqlenq.mjs';
import { fairTable } from '../scenarios/fair.mjs';
import { clientTables } from './clients.mjs';
import { IDLE_TRANSACTIONS_TARGET } from '../scenarios/idle.mjs';

export function footnotes(meta, targets, summary) {
  const lines = [];
  const inProcess = summary.some((s) => s.store_location === 'in process');
  if (summary.some((s) => !s.scenario.startsWith('depth-') && !s.scenario.startsWith('delayed-'))) {
    lines.push(
      `Medians over ${CONFIG.rounds} round(s) of ${CONFIG.seconds} s per measurement (after ${CONFIG.warmupSeconds} s of unmeasured warm-up), ${CONFIG.connections} keep-alive connections, ${CONFIG.itemBytes}-byte JSON items at a random priority 0-${CONFIG.priorities - 1}, pop depth 1. "vs group-commit", "vs floor" and "vs BullMQ" divide req/s by the group-commit floor's, the raw-SQL floor's and BullMQ on Redis's in the same scenario (latest.json also has the ratio to pg-boss).`,
    );
  }
  if (summary.some((s) => s.scenario.startsWith('depth-'))) {
    lines.push(
      `Depth rows: medians over ${CONFIG.rounds} round(s) of ${CONFIG.depthOps} requests on one connection alternating push and pop (priority 0), after 200 unmeasured; odd rounds measure the shallow queue first, even rounds the deep one. The means are over every measured request of every round (goal: deep at most 1.1x shallow); rows written per request are the database's tuples inserted, updated and deleted (pg_stat_database), which a busy machine does not change.`,
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
    // The mean over every measured request of every round (the rounds have as many requests each).
    const mean = (list) => (list.length === 0 ? null : list.reduce((sum, r) => sum + r.latency_ms.mean, 0) / list.length);
    const rows = (list) => {
      const known = list.map((r) => r.rows_written_per_req).filter((x) => typeof x === 'number');
      return known.length === 0 ? '-' : median(known).toFixed(2);
    };
    const f = t.depthFill;
    out.push([
      t.name,
      `${fmtMs(m(sh, 'p50'))} / ${fmtMs(m(sh, 'p99'))}`,
      `${fmtMs(m(dp, 'p50'))} / ${fmtMs(m(dp, 'p99'))}`,
      `${fmtRatio(m(dp, 'p50'), m(sh, 'p50'))} / ${fmtRatio(m(dp, 'p99'), m(sh, 'p99'))}`,
      `${fmtMs(mean(sh))} / ${fmtMs(mean(dp))}`,
      // The goal: at most 1.1x.
      fmtRatio(mean(dp), mean(sh)),
      `${rows(sh)} / ${rows(dp)}`,
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
  `mean ms @${fmtCount(CONFIG.shallowItems)} / @${fmtCount(CONFIG.deepItems)}`,
  'deep / shallow (mean)',
  'rows written per request',
  'RSS while filling the deep queue',
];

/** The idle rows: per target, medians over the rounds (and each round's transactions/s). */
function idleCells(targets) {
  const out = [];
  for (const t of targets) {
    const rows = runRows.filter((r) => r.target === t.name && r.scenario === 'idle' && !r.failed);
    if (rows.length === 0) continue;
    const m = (f) => median(rows.map(f));
    const ms = (x) => (x === null ? '-' : x.toFixed(1));
    out.push([
      t.name,
      fmtNum(CONFIG.idlePolls),
      ms(m((r) => r.transactions_per_s)),
      ms(m((r) => r.server_cpu_ms_per_s)),
      ms(m((r) => r.postgres_cpu_ms_per_s)),
      fmtNum(m((r) => r.repolls_in_window)),
      rows.map((r) => r.transactions_per_s.toFixed(1)).join(' / '),
    ]);
  }
  return out;
}
const IDLE_HEADERS = [
  'target',
  'long polls',
  'transactions/s',
  'service CPU ms/s',
  'PostgreSQL CPU ms/s',
  'polls re-issued in the window',
  'transactions/s per round',
];
const idleTitle = () =>
  `Idle cost (pushpop only): ${fmtNum(CONFIG.idlePolls)} long polls (wait_seconds=20, each issued again when it ends) on as many empty queues and no other traffic; over ${CONFIG.idleSeconds} s, the database's transactions per second (xact_commit + xact_rollback of pg_stat_database) and CPU milliseconds per second; medians over ${CONFIG.rounds} round(s); goal: at most ${IDLE_TRANSACTIONS_TARGET} transactions/s`;

/**
 * The tables after the main one, each with its console title and its Markdown title; a table
 * without rows is left out.
 * @returns {{ title: string, mdTitle: string, headers: string[], rows: string[][], right: boolean[] }[]}
 */
export function sideTables(targets) {
  return [
    {
      title: `Queue depth (pushpop only): push+pop on one connection, ${CONFIG.depthOps} requests, ${fmtNum(CONFIG.shallowItems)} vs ${fmtNum(CONFIG.deepItems)} items in the queue`,
      mdTitle: `Queue depth: push+pop latency on one connection, ${CONFIG.depthOps} requests, on a queue of ${fmtNum(CONFIG.shallowItems)} and of ${fmtNum(CONFIG.deepItems)} items.`,
      headers: DEPTH_HEADERS(),
      rows: depthCells(targets),
      right: [false, true, true, true, true, true, true, false],
    },
    { title: longPollTitle(), mdTitle: `${longPollTitle()}.`, headers: LONGPOLL_HEADERS, rows: longPollCells(targets), right: LONGPOLL_RIGHT },
    { title: idleTitle(), mdTitle: `${idleTitle()}.`, headers: IDLE_HEADERS, rows: idleCells(targets), right: IDLE_HEADERS.map((_, i) => i > 0) },
    fairTable(targets),
    sqlEnqueueTable(targets),
    ...clientTables(),
  ];
}
