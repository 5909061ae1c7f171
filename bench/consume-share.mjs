// Two Consumers of @pushpop/client sharing one shared queue, against a pushpop already running:
// how the items split between them and how long the queue takes to drain when the handlers are
// slow, which is where a consumer that pops far ahead of its handlers holds items the other
// could run now.
//
//   node bench/consume-share.mjs --url=http://127.0.0.1:8000 [--items=150] [--concurrency=4]
//     [--handler-ms=50] [--stagger-ms=100] [--prefetch=<n>] [--client=<path of a client build's dist/index.js>]
//
// Fills a new shared queue with --items items, starts consumer A, then consumer B --stagger-ms
// later (both with --concurrency slots, handlers that wait --handler-ms, the client's defaults
// unless --prefetch is given), and reports the seconds from A's start until every item was
// handled, the items each consumer handled, and the most items locked at once (the queue's own
// count, read every 10 ms: the handlers' and the buffered ones of both). Then deletes the queue.
import console from 'node:console';
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL, URL } from 'node:url';
import { arg } from './common/args.mjs';

const url = arg('url', 'http://127.0.0.1:8000');
const items = Number(arg('items', '150'));
const concurrency = Number(arg('concurrency', '4'));
const handlerMs = Number(arg('handler-ms', '50'));
const staggerMs = Number(arg('stagger-ms', '100'));
const prefetchArg = arg('prefetch', '');
const clientPath = resolve(arg('client', new URL('../libs/client/dist/index.js', import.meta.url).pathname));
const { PushpopClient } = await import(pathToFileURL(clientPath).href);

const client = new PushpopClient({ baseUrl: url });
const queueId = `share-${Date.now()}`;
const queue = client.queue(queueId);
await queue.updateSettings({ lock_mode: 'shared' });
await queue.pushBatch(Array.from({ length: items }, (_, n) => ({ item: { n } })));

const options = { concurrency, waitSeconds: 1, ...(prefetchArg === '' ? {} : { prefetch: Number(prefetchArg) }) };
let handled = 0;
let allHandled;
const done = new Promise((r) => (allHandled = r));
/** A consumer with its own count of the items it handled. */
function start(name) {
  const own = { handled: 0 };
  const consumer = client.consume(
    queueId,
    async () => {
      await sleep(handlerMs);
      own.handled += 1;
      if (++handled === items) allHandled();
    },
    options,
  );
  consumer.on('error', (error) => console.error(`${name}: ${error?.message ?? error}`));
  return { own, consumer };
}

const t0 = performance.now();
const a = start('A');
await sleep(staggerMs);
const b = start('B');
// Locks held at once over both, from the service's side (the queue's own count), every 10 ms.
let mostLocked = 0;
let sampling = true;
const sampler = (async () => {
  while (sampling) {
    const info = await queue.info();
    mostLocked = Math.max(mostLocked, info.locks?.item_count ?? 0);
    await sleep(10);
  }
})();
await done;
const seconds = (performance.now() - t0) / 1000;
sampling = false;
await sampler;
await Promise.all([a.consumer.close(), b.consumer.close()]);
await queue.delete().catch(() => undefined);
console.log(
  JSON.stringify({
    items,
    concurrency,
    handler_ms: handlerMs,
    prefetch: prefetchArg === '' ? 'default' : Number(prefetchArg),
    seconds: Number(seconds.toFixed(3)),
    ideal_seconds: Number(((items * handlerMs) / (2 * concurrency) / 1000).toFixed(3)),
    handled: { A: a.own.handled, B: b.own.handled },
    most_locked: mostLocked,
  }),
);
