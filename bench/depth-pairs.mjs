// Push + pop pairs from several connections on a deep queue right after its bulk load, and on a
// shallow one, against a pushpop already running (no database of its own: point it at a service
// started on a database you own).
//
//   node bench/depth-pairs.mjs --url=http://127.0.0.1:8000 --pid=<service pid> [--items=200000]
//     [--connections=16] [--seconds=10] [--rounds=2] [--prefix=depth] [--db=<database>]
//
// Fills `<prefix>-deep` with --items items (batch pushes of 1000, one at a time, as the depth
// scenario of bench/run.mjs does) and `<prefix>-shallow` with 100, then measures, alternating,
// rounds of --seconds on each queue: every connection loops push then pop (depth 1). Reports
// pairs/s, p50/p99 of each request, the service's CPU µs per pair (from /proc/<pid>/stat; its main
// thread apart from its other threads: the garbage collector's helpers, the libuv pool),
// PostgreSQL's CPU µs per pair (the backends connected to --db, read from /proc), the rows it
// wrote per request (tuples inserted, updated and deleted in --db's tables, from
// pg_stat_user_tables, read 11 s after each round so that idle backends have reported theirs),
// and the RSS of the service before and after the fill.
import { execFileSync } from 'node:child_process';
import { Buffer } from 'node:buffer';
import console from 'node:console';
import { readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { URL } from 'node:url';
import { arg } from './common/args.mjs';

const url = new URL(arg('url', 'http://127.0.0.1:8000'));
const pid = Number(arg('pid', '0'));
const items = Number(arg('items', '200000'));
const connections = Number(arg('connections', '16'));
const seconds = Number(arg('seconds', '10'));
const rounds = Number(arg('rounds', '2'));
const prefix = arg('prefix', `depth-${Date.now()}`);
const order = arg('order', 'deep,shallow').split(',');

const database = arg('db', '');
/** CPU ticks of each backend connected to --db, by pid. */
const backendTicks = () => {
  const out = new Map();
  if (!database) return out;
  const pids = execFileSync('psql', ['-h', '127.0.0.1', '-U', 'postgres', '-Atc', `SELECT pid FROM pg_stat_activity WHERE datname = '${database}'`], {
    encoding: 'utf8',
  })
    .split('\n')
    .filter(Boolean);
  for (const p of pids) {
    try {
      const fields = readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1].split(' ');
      out.set(p, Number(fields[11]) + Number(fields[12]));
    } catch {
      // gone meanwhile
    }
  }
  return out;
};
/** Tuples inserted, updated and deleted so far in --db's tables (null without --db). */
const rowsWritten = () =>
  database
    ? Number(
        execFileSync(
          'psql',
          ['-h', '127.0.0.1', '-U', 'postgres', '-d', database, '-Atc', 'SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables'],
          { encoding: 'utf8' },
        ).trim(),
      )
    : null;
/** Ticks the backends spent between two readings (a backend that ended meanwhile is missed: the service's pool keeps them). */
const backendDelta = (before, after) => {
  let total = 0;
  for (const [p, t] of after) total += t - (before.get(p) ?? 0);
  return total;
};
const agent = new http.Agent({ keepAlive: true, maxSockets: connections + 2 });
const ticks = () => {
  if (!pid) return 0;
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return Number(fields[11]) + Number(fields[12]);
};
/** CPU ticks of the service's main thread and of all its other threads (GC helpers, libuv pool). */
const threadTicks = () => {
  const out = { main: 0, other: 0 };
  if (!pid) return out;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const fields = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8').split(') ')[1].split(' ');
      out[Number(tid) === pid ? 'main' : 'other'] += Number(fields[11]) + Number(fields[12]);
    } catch {
      // gone meanwhile
    }
  }
  return out;
};
const rssMb = () => (pid ? Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024 : 0);

function request(method, path, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        agent,
        headers: body ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {},
      },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

let seq = 0;
/** The service's RSS (MB) at each tenth of a fill of 100,000 items or more. */
const rssTrail = [];
const item = () => `{"item":{"seq":"${++seq}","payload":"${'x'.repeat(150)}"},"priority":0}`;

async function fill(queue, n) {
  const started = performance.now();
  for (let done = 0; done < n; done += 1000) {
    const k = Math.min(1000, n - done);
    const body = `{"items":[${Array.from({ length: k }, item).join(',')}]}`;
    const res = await request('POST', `/queue/${queue}/push/batch`, body);
    if (res.status !== 200) throw new Error(`batch push: ${res.status} ${res.body.slice(0, 200)}`);
    if (n >= 100_000 && (done + k) % (n / 10) === 0) rssTrail.push(`${(done + k) / 1000}k ${rssMb().toFixed(1)}`);
  }
  return (performance.now() - started) / 1000;
}

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? 0;

async function pairs(queue) {
  const deadline = performance.now() + seconds * 1000;
  const push = [];
  const pop = [];
  let empty = 0;
  let failed = 0;
  const cpu0 = ticks();
  const db0 = backendTicks();
  const th0 = threadTicks();
  const rows0 = rowsWritten();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (performance.now() < deadline) {
        let t = performance.now();
        const a = await request('POST', `/queue/${queue}/push`, item());
        push.push(performance.now() - t);
        t = performance.now();
        const b = await request('POST', `/queue/${queue}/pop?depth=1`);
        pop.push(performance.now() - t);
        if (a.status !== 200 || b.status !== 200) failed += 1;
        else if (b.body.includes('"count":0')) empty += 1;
      }
    }),
  );
  const elapsed = (performance.now() - t0) / 1000;
  // A backend reports its counts at most every second, an idle one within 10 s.
  if (rows0 !== null) await sleep(11_000);
  const rows1 = rowsWritten();
  const cpuUs = ((ticks() - cpu0) / 100) * 1e6;
  const dbUs = (backendDelta(db0, backendTicks()) / 100) * 1e6;
  const th1 = threadTicks();
  push.sort((x, y) => x - y);
  pop.sort((x, y) => x - y);
  return {
    queue,
    pairs_per_s: Math.round(pop.length / elapsed),
    push_p50: pct(push, 50).toFixed(1),
    push_p99: pct(push, 99).toFixed(1),
    pop_p50: pct(pop, 50).toFixed(1),
    pop_p99: pct(pop, 99).toFixed(1),
    cpu_us_per_pair: Math.round(cpuUs / pop.length),
    main_us_per_pair: Math.round((((th1.main - th0.main) / 100) * 1e6) / pop.length),
    other_threads_us_per_pair: Math.round((((th1.other - th0.other) / 100) * 1e6) / pop.length),
    pg_us_per_pair: Math.round(dbUs / pop.length),
    ...(rows0 !== null ? { rows_per_request: ((rows1 - rows0) / (push.length + pop.length)).toFixed(2) } : {}),
    empty,
    failed,
  };
}

const deep = `${prefix}-deep`;
const shallow = `${prefix}-shallow`;
console.log(`fill starts at ${new Date().toISOString().slice(11, 19)}`);
const rss0 = rssMb();
const fillSeconds = await fill(deep, items);
const rss1 = rssMb();
await fill(shallow, 100);
console.log(`filled ${deep} with ${items} items in ${fillSeconds.toFixed(1)} s; RSS ${rss0.toFixed(1)} -> ${rss1.toFixed(1)} MB`);
if (rssTrail.length) console.log(`RSS (MB) along the fill: ${rssTrail.join(', ')}`);
const rows = [];
for (let r = 0; r < rounds; r++) {
  for (const which of order) {
    const row = await pairs(which === 'deep' ? deep : shallow);
    rows.push({ round: r + 1, ...row, ended: new Date().toISOString().slice(11, 19) });
    console.log(JSON.stringify(rows.at(-1)));
  }
}
console.table(rows);
agent.destroy();
