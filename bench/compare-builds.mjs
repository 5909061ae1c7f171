// Compares two builds of pushpop under the same load, alternating between them round by round,
// to tell whether a change costs anything measurable (e.g. tracing off, item headers unused):
//
//   node bench/compare-builds.mjs <dir A> <dir B>   (each with dist/main.js built)
//
// Both run at once on the machine's PostgreSQL (COMPARE_DATABASE_URL, default
// postgres://postgres@127.0.0.1:5432/test), each in a schema of its own that is dropped at the end.
// Per round and build: COMPARE_SECONDS (default 8) of single-item pushes over 64 queues, then as
// long of pops (depth 1) draining them, 32 connections; it reports requests per second and the
// server process's CPU time per request (user + system, from /proc), whose median over
// COMPARE_ROUNDS (default 4) rounds is the number to compare. Extra environment for a build:
// COMPARE_ENV_A / COMPARE_ENV_B as `NAME=value,NAME=value`.
import { spawn } from 'node:child_process';
import console from 'node:console';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { resolve } from 'node:path';
import process from 'node:process';
import { setTimeout } from 'node:timers';
import autocannon from 'autocannon';
import pg from 'pg';

const [dirA, dirB] = process.argv.slice(2).map((d) => resolve(d));
if (!dirA || !dirB) {
  console.error('usage: node bench/compare-builds.mjs <dir A> <dir B>');
  process.exit(2);
}
const databaseUrl = process.env.COMPARE_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const seconds = Number(process.env.COMPARE_SECONDS ?? 8);
const rounds = Number(process.env.COMPARE_ROUNDS ?? 4);
const QUEUES = 64;
const extraEnv = (text) =>
  Object.fromEntries(
    (text ?? '')
      .split(',')
      .filter(Boolean)
      .map((kv) => kv.split('=')),
  );

const freePort = () =>
  new Promise((ok) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });

/** CPU seconds (user + system) of a process so far. */
function cpuSeconds(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function start(label, dir, env) {
  const port = await freePort();
  const schema = `compare_${label.toLowerCase()}_${process.pid}`;
  const child = spawn(process.execPath, [resolve(dir, 'dist/main.js')], {
    cwd: dir,
    env: { ...process.env, ...env, PORT: String(port), DATABASE_URL: databaseUrl, DATABASE_SCHEMA: schema, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300; i++) {
    const ok = await globalThis.fetch(`${url}/health/ready`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return { label, child, url, schema };
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${label} did not get ready`);
}

async function load(target, kind, round) {
  const requests = Array.from({ length: QUEUES }, (_, i) =>
    kind === 'push'
      ? {
          method: 'POST',
          path: `/queue/cmp-${round}-${i}/push`,
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ item: { n: i, text: 'x'.repeat(100) } }),
        }
      : { method: 'POST', path: `/queue/cmp-${round}-${i}/pop` },
  );
  const before = cpuSeconds(target.child.pid);
  const result = await autocannon({ url: target.url, connections: 32, duration: seconds, requests });
  const cpu = cpuSeconds(target.child.pid) - before;
  const total = result.requests.total;
  return { rps: total / seconds, cpuUsPerRequest: (cpu / total) * 1e6, errors: result.non2xx + result.errors };
}

const median = (values) => {
  const s = [...values].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const a = await start('A', dirA, extraEnv(process.env.COMPARE_ENV_A));
const b = await start('B', dirB, extraEnv(process.env.COMPARE_ENV_B));
const results = { A: { push: [], pop: [] }, B: { push: [], pop: [] } };
try {
  for (let round = 0; round < rounds; round++) {
    // Alternate which build goes first.
    for (const target of round % 2 === 0 ? [a, b] : [b, a]) {
      for (const kind of ['push', 'pop']) {
        const r = await load(target, kind, `${target.label}${round}`);
        results[target.label][kind].push(r);
        console.log(
          `round ${round + 1} ${target.label} ${kind}: ${r.rps.toFixed(0)} req/s, ${r.cpuUsPerRequest.toFixed(1)} µs CPU/request, ${r.errors} errors`,
        );
      }
    }
  }
} finally {
  for (const t of [a, b]) t.child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 1500));
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  for (const t of [a, b]) await client.query(`DROP SCHEMA IF EXISTS ${t.schema} CASCADE`);
  await client.end();
}
console.log('\n| build | push req/s | push µs CPU/req | pop req/s | pop µs CPU/req |\n| --- | --- | --- | --- | --- |');
for (const [label, dir] of [
  ['A', dirA],
  ['B', dirB],
]) {
  const r = results[label];
  console.log(
    `| ${label} (${dir}) | ${median(r.push.map((x) => x.rps)).toFixed(0)} | ${median(r.push.map((x) => x.cpuUsPerRequest)).toFixed(1)} | ${median(r.pop.map((x) => x.rps)).toFixed(0)} | ${median(r.pop.map((x) => x.cpuUsPerRequest)).toFixed(1)} |`,
  );
}
