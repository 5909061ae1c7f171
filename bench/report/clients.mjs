// The client rows' tables: a column per system (and pushpop lock mode), a row per measurement,
// medians over the rounds; items/s, then the CPU each item cost. The last column, when the floor
// target ran, is a reference rather than a library: its raw SQL over plain HTTP.

import { CONFIG } from '../common/config.mjs';
import { fmtMs, fmtNum } from '../common/format.mjs';
import { runRows } from '../common/results.mjs';
import { median } from '../common/util.mjs';

const ROWS = [
  ['produce-single', `produce: single pushes, 64 awaited at once`],
  ['produce-linger', 'produce: Producer with lingerMs: 5, 64 awaited at once'],
  ['produce-batch', 'produce: batches of 1,000'],
  ['consume-1', 'consume: concurrency 1'],
  ['consume-8', 'consume: concurrency 8'],
  ['consume-32', 'consume: concurrency 32'],
  ['latency', 'push → handler latency p50 / p99 (ms), a waiting consumer, a push every 10 ms'],
];

/** The columns in table order (BullMQ, pg-boss, then pushpop's, the raw-SQL floor last), from the rows recorded. */
function columns() {
  const order = ['BullMQ', 'pg-boss', 'pushpop-postgres', 'pushpop-embedded', 'raw-SQL floor'];
  const names = [...new Set(runRows.filter((r) => r.scenario === 'clients' && !r.failed).map((r) => r.column))];
  return names.sort((a, b) => order.findIndex((o) => a.startsWith(o)) - order.findIndex((o) => b.startsWith(o)));
}

const rowsOf = (column, row) => runRows.filter((r) => r.scenario === 'clients' && r.column === column && r.row === row);

function rateCell(rows) {
  if (rows.length === 0) return '–';
  const rate = fmtNum(median(rows.map((r) => r.items_per_s)));
  return rows.some((r) => r.capped) ? `${rate}*` : rate;
}

function latencyCell(rows) {
  if (rows.length === 0) return '–';
  // a percentile no item reached in time is above anything measured: shown as such
  const p = (key) => (rows.some((r) => r.latency_ms[key] === null) ? '> wait' : fmtMs(median(rows.map((r) => r.latency_ms[key]))));
  const handled = Math.min(...rows.map((r) => r.handled));
  const pushes = rows[0].items;
  return `${p('p50')} / ${p('p99')}${handled < pushes ? ` (${fmtNum(handled)} of ${fmtNum(pushes)} handled)` : ''}`;
}

function cpuCell(rows) {
  if (rows.length === 0) return '–';
  const m = (key) => fmtNum(median(rows.map((r) => r.cpu[key])));
  return `${m('client_us_per_item')} / ${m('service_us_per_item')} / ${m('store_us_per_item')}`;
}

const title = () =>
  `Through each system's own client library (BullMQ's Queue and Worker on its Redis, pg-boss's send/insert/work, @pushpop/client's Producer, pushBatch and Consumer) and, as a reference, the raw-SQL floor over node:http with no library (a committed INSERT per push, a committed DELETE per item popped, an empty pop polled again at once), items/s, medians over ${CONFIG.rounds} round(s), after an unmeasured warm-up of ${fmtNum(CONFIG.clientItems)} single pushes consumed at concurrency 1, as many at 32, and as many pushes one every 5 ms to a consumer waiting for each: ${fmtNum(CONFIG.clientItems)} items per produce and consume row (batches: ${fmtNum(CONFIG.clientItems * 10)}), consumed from one queue by no-op handlers; – a row the column has no call for (a lingering Producer is pushpop's; the floor has no batch route); * the ${CONFIG.clientMaxSeconds} s a consume row may take ran out first (items/s of the items done by then); latency from the push call to the handler's start, ${fmtNum(CONFIG.clientLatencyPushes)} pushes ("> wait": not handled ${CONFIG.clientMaxSeconds} s after the last push)`;

const cpuTitle = () =>
  "The same rows' CPU per item, µs: the client's process / the HTTP server it speaks to (pushpop's service, the floor's peer; BullMQ and pg-boss have none) / the store (PostgreSQL's whole process tree, shared by the PostgreSQL targets, or Redis)";

const BULLMQ = 'BullMQ on Redis';

/** `column` ÷ BullMQ's Worker or Queue in each round both ran the row, in round order ('–' if none). */
function ratioCell(column, row) {
  const theirs = new Map(rowsOf(BULLMQ, row).map((r) => [r.round, r.items_per_s]));
  const ratios = rowsOf(column, row)
    .filter((r) => theirs.get(r.round) > 0)
    .sort((a, b) => a.round - b.round)
    .map((r) => `${(r.items_per_s / theirs.get(r.round)).toFixed(2)}×`);
  return ratios.length === 0 ? '–' : ratios.join(', ');
}

const ratioTitle = () =>
  `The same rates as ratios to BullMQ on Redis within each round, round 1 first: a machine's speed moves every system's rates between rounds far more than the ratio within one`;

/** The ratio table: each pushpop column ÷ BullMQ, per round (none without BullMQ or pushpop in the run). */
function ratioTable() {
  const cols = columns().filter((c) => c.startsWith('pushpop'));
  if (!columns().includes(BULLMQ) || cols.length === 0) return [];
  const rows = ROWS.filter(([row]) => row !== 'latency' && row !== 'produce-linger');
  return [
    {
      title: ratioTitle(),
      mdTitle: `${ratioTitle()}.`,
      headers: ['÷ BullMQ, per round', ...cols],
      rows: rows.map(([row, label]) => [label, ...cols.map((c) => ratioCell(c, row))]),
      right: [false, ...cols.map(() => true)],
    },
  ];
}

/** The client tables (no rows when the `clients` scenario did not run). */
export function clientTables() {
  const cols = columns();
  const headers = ['items/s', ...cols];
  const right = headers.map((_, i) => i > 0);
  const body = (cell, rows) => (cols.length === 0 ? [] : rows.map(([row, label]) => [label, ...cols.map((c) => cell(rowsOf(c, row)))]));
  return [
    {
      title: title(),
      mdTitle: `${title()}.`,
      headers,
      rows: body((rows) => (rows[0]?.row === 'latency' ? latencyCell(rows) : rateCell(rows)), ROWS),
      right,
    },
    {
      title: cpuTitle(),
      mdTitle: `${cpuTitle()}.`,
      headers: ['CPU µs/item', ...cols],
      rows: body(
        cpuCell,
        ROWS.filter(([row]) => row !== 'latency'),
      ),
      right,
    },
    ...ratioTable(),
  ];
}
