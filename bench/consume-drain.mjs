// A Consumer of @pushpop/client draining one queue, against a pushpop already running: items per
// second and CPU µs per item of the service, of PostgreSQL and of the client. Run it alternating
// between two builds (or two clients) to tell whether a change moves the Consumer's rows of
// `npm run bench` without that scenario's peers.
//
//   node bench/consume-drain.mjs --url=http://127.0.0.1:8000 --pid=<service pid> [--items=20000]
//     [--concurrency=32] [--mode=shared|exclusive] [--handler=sync|async] [--client=<path of a client build's dist/index.js>]
//
// Fills a new queue with --items items (batches of 1,000), then times a Consumer with a no-op
// handler (returning at once, or with --handler=async an async function, so a promise; the
// client's defaults, `waitSeconds: 1`) until every item completed, and deletes the
// queue. PostgreSQL's CPU is every `postgres` process of the machine (so run it alone), read from
// /proc like the service's (--pid); the client's is its own (process.cpuUsage).
import console from 'node:console';
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { pathToFileURL, URL } from 'node:url';
import { arg } from './common/args.mjs';
import { allStats, CLK_TCK, ownTicks } from './targets/proc.mjs';

const url = arg('url', 'http://127.0.0.1:8000');
const pid = Number(arg('pid', '0'));
const items = Number(arg('items', '20000'));
const concurrency = Number(arg('concurrency', '32'));
const mode = arg('mode', 'shared');
const handler = arg('handler', 'sync') === 'async' ? async () => undefined : () => undefined;
const clientPath = resolve(arg('client', new URL('../libs/client/dist/index.js', import.meta.url).pathname));
const { PushpopClient } = await import(pathToFileURL(clientPath).href);

/** CPU ticks of every `postgres` process of the machine. */
const postgresTicks = () => allStats().reduce((sum, s) => (s.comm === 'postgres' ? sum + s.utime + s.stime : sum), 0);

const client = new PushpopClient({ baseUrl: url });
const queueId = `drain-${mode}-${Date.now()}`;
const queue = client.queue(queueId);
if (mode !== 'exclusive') await queue.updateSettings({ lock_mode: mode });
for (let i = 0; i < items; i += 1000) await queue.pushBatch(Array.from({ length: Math.min(1000, items - i) }, (_, j) => ({ item: { n: i + j } })));

const requestsBefore = client.requests;
const pg0 = postgresTicks();
const service0 = pid ? ownTicks(pid) : 0;
const own0 = process.cpuUsage();
const t0 = performance.now();
let completed = 0;
await new Promise((done) => {
  const consumer = client.consume(queueId, handler, { concurrency, waitSeconds: 1 });
  consumer.on('completed', () => {
    if (++completed === items) void consumer.close().then(done);
  });
  consumer.on('error', (error) => console.error(`consumer: ${error?.message ?? error}`));
});
const seconds = (performance.now() - t0) / 1000;
const own = process.cpuUsage(own0);
const perItem = (ticks) => Math.round((ticks * 1e6) / CLK_TCK / items);
console.log(
  JSON.stringify({
    mode,
    handler: arg('handler', 'sync'),
    concurrency,
    items,
    items_per_s: Math.round(items / seconds),
    service_us_per_item: pid ? perItem(ownTicks(pid) - service0) : null,
    postgres_us_per_item: perItem(postgresTicks() - pg0),
    client_us_per_item: Math.round((own.user + own.system) / items),
    requests_per_item: Number(((client.requests - requestsBefore) / items).toFixed(3)),
  }),
);
await queue.delete();
