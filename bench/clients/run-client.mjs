#!/usr/bin/env node
// One system through its own client library, row after row (the `clients` scenario of
// bench/run.mjs starts this as a child process with an IPC channel, per system and round):
//
//   produce-single   single pushes, `inFlight` (64) awaited at once, `items` (3,000) of them
//   produce-linger   the same through a Producer that gathers pushes (pushpop only: lingerMs 5)
//   produce-batch    batches of `batchSize` (1,000), one at a time, `batchItems` (30,000) items
//   consume-1/8/32   `items` items on one queue, consumed at concurrency 1, 8, 32 by no-op handlers
//   latency          a waiting consumer and a push every `everyMs` (10 ms): push → handler
//
// A system runs the rows its adapter lists (`rows`; the raw-SQL floor has no batch and no
// lingering producer). Each row on a queue of its own, deleted afterwards. Items are the
// benchmark's 200-byte JSON objects, at each system's default priority.
//
// Before the rows, an unmeasured warm-up, the same for every system: `items` single pushes
// consumed at concurrency 1, then `items` more consumed at concurrency 32, each part at most
// `maxSeconds`, then up to `items` pushes, one every `everyMs / 2`, to a consumer waiting for
// each. A service and a client compile a path only after it ran thousands of times, and at
// concurrency 1 each path runs once per item: without this, consume-1 (the first consume row)
// would measure code still being compiled, and each system a different share of it; and so would
// the latency row, whose path (a consumer woken by each push) no other row takes.
//
// Options: one JSON argument (bench/scenarios/clients.mjs).

import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { itemJson } from '../common/items.mjs';
import { consumeAll, inFlight, measuredRow, pushToHandler } from './measure.mjs';

const options = JSON.parse(process.argv[2] ?? '{}');
const ADAPTERS = { pushpop: './pushpop.mjs', bullmq: './bullmq.mjs', pgboss: './pgboss.mjs', floor: './floor.mjs' };
const ITEM = JSON.parse(itemJson());
const itemOf = (n) => ({ ...ITEM, n });
const stamp = Date.now().toString(36);
const say = (line) => process.send({ type: 'progress', line });

const { createAdapter } = await import(ADAPTERS[options.system]);
const adapter = await createAdapter(options);

/** A fresh queue for `row`, given to `use`, deleted afterwards. */
async function withQueue(row, use) {
  const queue = `client-${row}-${stamp}`;
  await adapter.newQueue(queue);
  try {
    return await use(queue);
  } finally {
    await adapter.dropQueue(queue);
  }
}

/** Unmeasured: `count` items onto `queue` by batches (the floor's: single pushes, 64 at once). */
async function fill(queue, count) {
  for (let i = 0; i < count; i += options.batchSize)
    await adapter.pushBatch(
      queue,
      Array.from({ length: Math.min(options.batchSize, count - i) }, (_, k) => itemOf(i + k)),
    );
}

/** A measured row, reported with the library's error events during it and, where the library counts them, its requests. */
const row = (name, run) =>
  measuredRow(name, async () => {
    const requests = adapter.requests?.();
    const result = await run();
    return { ...result, errors: adapter.takeErrors(), ...(requests === undefined ? {} : { requests: adapter.requests() - requests }) };
  });

/**
 * Unmeasured: for each concurrency of 1 and 32, `items` single pushes, then a consumer at that
 * concurrency until they are done; the pushes and the consuming each stop after `maxSeconds`.
 * Then the latency row's path: a consumer that waits for each item (with items waiting, as
 * above, it never does), woken by `items` pushes one every `everyMs / 2` ms, as many as fit in
 * `maxSeconds`.
 */
async function warmUp() {
  const { items, inFlight: width, maxSeconds } = options;
  for (const concurrency of [1, 32]) {
    say(`warming up (unmeasured): ${items} single pushes, consumed at concurrency ${concurrency} (at most ${maxSeconds} s each) ...`);
    await withQueue(`warm-up-${concurrency}`, async (queue) => {
      const until = performance.now() + maxSeconds * 1000;
      let pushed = 0;
      await inFlight(items, width, async (i) => {
        if (performance.now() > until) return;
        await adapter.pushOne(queue, itemOf(i));
        pushed += 1;
      });
      if (pushed > 0) await consumeAll(adapter, queue, pushed, concurrency, maxSeconds);
    });
  }
  const everyMs = options.everyMs / 2;
  const pushes = Math.min(items, Math.floor((maxSeconds * 1000) / everyMs));
  say(`warming up (unmeasured): ${pushes} pushes, one every ${everyMs} ms, to a waiting consumer ...`);
  await withQueue('warm-up-latency', (queue) => pushToHandler(adapter, queue, pushes, everyMs, maxSeconds, itemOf));
  adapter.takeErrors();
}

async function rows() {
  const { items, inFlight: width } = options;
  const has = (name) => adapter.rows.includes(name);
  await warmUp();

  if (has('produce-single')) {
    say(`produce: ${items} single pushes, ${width} awaited at once ...`);
    await withQueue('produce-single', (queue) =>
      row('produce-single', () => inFlight(items, width, (i) => adapter.pushOne(queue, itemOf(i))).then(() => ({ items }))),
    );
  }
  if (has('produce-linger')) {
    say(`produce: ${items} pushes through a lingering Producer, ${width} awaited at once ...`);
    await withQueue('produce-linger', (queue) => {
      const push = adapter.lingeringPusher(queue);
      return row('produce-linger', () => inFlight(items, width, (i) => push(itemOf(i))).then(() => ({ items })));
    });
  }
  if (has('produce-batch')) {
    say(`produce: ${options.batchItems} items in batches of ${options.batchSize}, one batch at a time ...`);
    await withQueue('produce-batch', (queue) => row('produce-batch', () => fill(queue, options.batchItems).then(() => ({ items: options.batchItems }))));
  }

  for (const concurrency of [1, 8, 32]) {
    if (!has(`consume-${concurrency}`)) continue;
    say(`consume: ${items} items at concurrency ${concurrency} (at most ${options.maxSeconds} s) ...`);
    await withQueue(`consume-${concurrency}`, async (queue) => {
      await fill(queue, items);
      await row(`consume-${concurrency}`, () => consumeAll(adapter, queue, items, concurrency, options.maxSeconds));
    });
  }

  if (has('latency')) {
    say(`latency: ${options.latencyPushes} pushes, one every ${options.everyMs} ms, to a waiting consumer (concurrency 1) ...`);
    await withQueue('latency', (queue) =>
      row('latency', () => pushToHandler(adapter, queue, options.latencyPushes, options.everyMs, options.maxSeconds, itemOf)),
    );
  }
}

const outcome = await rows().then(
  () => ({ type: 'done', system: adapter.system, options: adapter.options }),
  (error) => ({ type: 'failed', error: String(error instanceof Error ? (error.stack ?? error.message) : error) }),
);
await adapter.close().catch(() => undefined);
// once the benchmark has the outcome; a library's timers or sockets left behind must not keep this process up
process.send(outcome, () => process.exit(outcome.type === 'done' ? 0 : 1));
