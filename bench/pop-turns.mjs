// Pops of depth 1 from many queues deeper than their buffer, against a pushpop already running:
// pops per second, the service's CPU µs per pop and pops per turn (how many pops shared a turn of
// their queue). Run it alternating between two builds to tell a change in what a pop costs from a
// change in how pops share turns (see docs/performance.md, "Segments read ahead").
//
//   node bench/pop-turns.mjs --url=http://127.0.0.1:8000 --pid=<service pid> [--queues=64]
//     [--items=1100] [--pops=1000] [--connections=32]
//
// Fills --queues new queues with --items items each (batches of 100), then --connections
// callers over keep-alive connections (bench/common/http.mjs) pop --pops items from each queue:
// every caller takes the next pop of one shared sequence (queue k mod --queues), so no two go
// through the queues in step. Turns are read from the service's `pushpop_store_transaction_duration_seconds_count`
// before and after; the queues are deleted at the end.
import console from 'node:console';
import { performance } from 'node:perf_hooks';
import { arg } from './common/args.mjs';
import { httpRequest, metricsOf } from './common/http.mjs';
import { CLK_TCK, ownTicks } from './targets/proc.mjs';

const url = arg('url', 'http://127.0.0.1:8000');
const pid = Number(arg('pid', '0'));
const queues = Number(arg('queues', '64'));
const items = Number(arg('items', '1100'));
const pops = Number(arg('pops', '1000'));
const connections = Number(arg('connections', '32'));

/** Turns the service ran so far (every outcome). */
async function turns() {
  let sum = 0;
  for (const [name, value] of await metricsOf(url)) if (name.startsWith('pushpop_store_transaction_duration_seconds_count')) sum += value;
  return sum;
}

const prefix = `pop-turns-${Date.now()}`;
for (let q = 0; q < queues; q++) {
  for (let i = 0; i < items; i += 100) {
    const entries = Array.from({ length: Math.min(100, items - i) }, (_, j) => ({ item: { n: i + j, pad: 'x'.repeat(40) } }));
    const { status } = await httpRequest(url, 'POST', `/queue/${prefix}-${q}/push/batch`, JSON.stringify({ items: entries }));
    if (status !== 200) throw new Error(`push/batch answered ${status}`);
  }
}

const turns0 = await turns();
const ticks0 = pid ? ownTicks(pid) : 0;
const t0 = performance.now();
const total = queues * pops;
let next = 0;
let empty = 0;
await Promise.all(
  Array.from({ length: connections }, async () => {
    while (next < total) {
      const k = next++;
      const { status, body } = await httpRequest(url, 'POST', `/queue/${prefix}-${k % queues}/pop`);
      if (status !== 200) throw new Error(`pop answered ${status}`);
      if (body?.count !== 1) empty++;
    }
  }),
);
const seconds = (performance.now() - t0) / 1000;
const cpu = pid ? ((ownTicks(pid) - ticks0) * 1e6) / CLK_TCK / total : null;
const turnsTaken = (await turns()) - turns0;
for (let q = 0; q < queues; q++) await httpRequest(url, 'DELETE', `/queue/${prefix}-${q}`);
console.log(
  JSON.stringify({
    pops_per_s: Math.round(total / seconds),
    service_us_per_pop: cpu === null ? null : Math.round(cpu),
    pops_per_turn: +(total / turnsTaken).toFixed(2),
    empty_pops: empty,
  }),
);
