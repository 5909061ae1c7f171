// Exclusive consumers of many queues (one queue per entity), against a pushpop already running:
// --queues exclusive queues, one keep-alive connection each, each acknowledging its lock and
// popping the next in one request (`POST /queue/{id}/acknowledge {"lock_id": …, "next": {}}`)
// in a loop. Requests per second, and CPU µs per request of the service and of PostgreSQL. Run it
// alternating between two builds to tell whether a change moves the turns of many queues (the
// turn writes that share statements across queues).
//
//   node bench/exclusive-queues.mjs --url=http://127.0.0.1:8000 --pid=<service pid> [--queues=64]
//     [--seconds=8] [--items=8000]
//
// Fills each queue with --items items (batches of 1,000), takes a lock on each, runs the loops
// for 2 s unmeasured, then --seconds measured, and deletes the queues. PostgreSQL's CPU is every
// `postgres` process of the machine and their reaped children (so run it alone), read from /proc
// like the service's (--pid).
import { Buffer } from 'node:buffer';
import console from 'node:console';
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { URL } from 'node:url';
import { arg } from './common/args.mjs';
import { allStats, CLK_TCK, ownTicks } from './targets/proc.mjs';

const url = new URL(arg('url', 'http://127.0.0.1:8000'));
const pid = Number(arg('pid', '0'));
const queues = Number(arg('queues', '64'));
const seconds = Number(arg('seconds', '8'));
const items = Number(arg('items', '8000'));

const agent = new http.Agent({ keepAlive: true, maxSockets: queues });
/** One request: its status and parsed answer. */
const call = (method, path, body) =>
  new Promise((resolve, reject) => {
    const text = body === undefined ? undefined : JSON.stringify(body);
    const headers = text === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) };
    const request = http.request({ agent, hostname: url.hostname, port: url.port, path, method, headers }, (response) => {
      let answer = '';
      response.setEncoding('utf8');
      response.on('data', (chunk) => (answer += chunk));
      response.on('end', () => resolve({ status: response.statusCode, body: answer ? JSON.parse(answer) : null }));
    });
    request.on('error', reject);
    request.end(text);
  });
/** CPU ticks of every `postgres` process, with those of backends that exited meanwhile (reaped by the postmaster). */
const postgresTicks = () => allStats().reduce((sum, s) => (s.comm === 'postgres' ? sum + s.utime + s.stime + s.cutime + s.cstime : sum), 0);

const ids = Array.from({ length: queues }, (_, i) => `exclusive-${Date.now()}-${i}`);
const batch = (from) => ({ items: Array.from({ length: Math.min(1000, items - from) }, (_, n) => ({ item: { n: from + n, payload: 'x'.repeat(100) } })) });
for (const id of ids) for (let from = 0; from < items; from += 1000) await call('POST', `/queue/${id}/push/batch`, batch(from));
const locks = [];
for (const [i, id] of ids.entries()) locks[i] = (await call('POST', `/queue/${id}/pop?require_ack=true&depth=1`, {})).body.lock_id;

let running = true;
let requests = 0;
const failures = [];
const consume = async (i) => {
  while (running) {
    const answer = await call('POST', `/queue/${ids[i]}/acknowledge`, { lock_id: locks[i], next: {} });
    if (answer.status !== 200 || !answer.body.next?.lock_id) {
      failures.push(`${answer.status} ${JSON.stringify(answer.body).slice(0, 200)}`);
      return;
    }
    locks[i] = answer.body.next.lock_id;
    requests++;
  }
};
const phase = async (ms) => {
  running = true;
  requests = 0;
  const loops = ids.map((_, i) => consume(i));
  await sleep(ms);
  running = false;
  await Promise.all(loops);
};
await phase(2000);
const pg0 = postgresTicks();
const service0 = pid ? ownTicks(pid) : 0;
const t0 = performance.now();
await phase(seconds * 1000);
const elapsed = (performance.now() - t0) / 1000;
const perRequest = (ticks) => Math.round((ticks * 1e6) / CLK_TCK / requests);
console.log(
  JSON.stringify({
    queues,
    requests_per_s: Math.round(requests / elapsed),
    service_us_per_request: pid ? perRequest(ownTicks(pid) - service0) : null,
    postgres_us_per_request: perRequest(postgresTicks() - pg0),
    failures: failures.length,
    ...(failures.length > 0 ? { first_failure: failures[0] } : {}),
  }),
);
for (const id of ids) await call('DELETE', `/queue/${id}`);
agent.destroy();
