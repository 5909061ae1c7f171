#!/usr/bin/env node
// The client's own CPU per single push, against raw fetch and the generated client, and through a Producer: 64 pushes in
// flight, rounds interleaved in one process (so the machine's load falls on all alike), medians.
// Point it at a running service, or at a stub that answers every request at once to see the
// client's cost alone:
//   npm run build --workspace=@pushpop/client
//   PUSHPOP_URL=http://127.0.0.1:8000 node libs/client/bench/push-cost.mjs [rounds] [pushes-per-round]
// The queue is named bench-push-cost-* and deleted at the end (on a real service).
import { performance } from 'node:perf_hooks';

import process from 'node:process';
import console from 'node:console';
import { PushpopClient } from '../dist/index.js';

const { fetch } = globalThis;
const url = process.env.PUSHPOP_URL ?? 'http://127.0.0.1:8000';
const rounds = Number(process.argv[2] ?? 5);
const perRound = Number(process.argv[3] ?? 2000);
const q = `bench-push-cost-${Date.now().toString(36)}`;
const client = new PushpopClient({ baseUrl: url });
const producer = client.producer(q);
const headers = { 'content-type': 'application/json', ...(process.env.PUSHPOP_API_KEY ? { authorization: `Bearer ${process.env.PUSHPOP_API_KEY}` } : {}) };
const ways = {
  'raw fetch': async (n) => {
    const response = await fetch(`${url}/queue/${q}/push`, { method: 'POST', headers, body: JSON.stringify({ item: { n } }) });
    if (!response.ok) throw new Error(`push: ${response.status}`);
    await response.json();
  },
  'generated client (openapi-fetch)': async (n) => {
    const { error } = await client.raw.POST('/queue/{queue_id}/push', { params: { path: { queue_id: q } }, body: { item: { n } } });
    if (error) throw new Error('push failed');
  },
  '@pushpop/client queue.push': (n) => client.queue(q).push({ n }),
  '@pushpop/client producer.push (defaults)': (n) => producer.push({ n }),
};

async function round(push) {
  let next = 0;
  const cpu = process.cpuUsage();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next < perRound) await push(next++);
    }),
  );
  const used = process.cpuUsage(cpu);
  return { cpuUs: (used.user + used.system) / perRound, perSecond: perRound / ((performance.now() - started) / 1000) };
}

for (const push of Object.values(ways)) await round(push); // warm up
const results = Object.fromEntries(Object.keys(ways).map((name) => [name, []]));
for (let r = 0; r < rounds; r++) for (const [name, push] of Object.entries(ways)) results[name].push(await round(push));
const median = (values) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)];
console.table(
  Object.fromEntries(
    Object.entries(results).map(([name, runs]) => [
      name,
      { 'client CPU µs per push': Math.round(median(runs.map((r) => r.cpuUs))), 'pushes/s': Math.round(median(runs.map((r) => r.perSecond))) },
    ]),
  ),
);
await client
  .queue(q)
  .delete()
  .catch(() => {});
