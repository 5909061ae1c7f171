// The client rows' measurements, the same for every system: what a system supplies is an
// adapter (bench/clients/<system>.mjs) with its own client library's calls. Runs in the client
// process (bench/clients/run-client.mjs); every measured part is announced to the benchmark
// (`begin`/`end` messages), which samples the target's CPU around it.

import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';

/** Every client row, in the order they run; an adapter lists those it has (`rows`), the table shows '–' for the others. */
export const ALL_ROWS = ['produce-single', 'produce-linger', 'produce-batch', 'consume-1', 'consume-8', 'consume-32', 'latency'];

/** Waits until the benchmark has sampled the CPU (its answer to `begin`). */
function parentSaysGo() {
  return new Promise((resolveGo) => {
    const onMessage = (message) => {
      if (message?.type !== 'go') return;
      process.off('message', onMessage);
      resolveGo();
    };
    process.on('message', onMessage);
  });
}

/**
 * A measured part: `begin` (the benchmark samples the target's CPU, then answers), `run()`, `end`
 * with what `run()` answered, this process's CPU per item and the seconds it took.
 * `run()` answers `{ items, ...more }`; `items` is what the rate and the CPU are divided by.
 */
export async function measuredRow(row, run) {
  process.send({ type: 'begin', row });
  await parentSaysGo();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const result = await run();
  const seconds = result.seconds ?? (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  process.send({
    type: 'end',
    row,
    ...result,
    seconds,
    items_per_s: result.items / seconds,
    client_us_per_item: result.items > 0 ? (cpu.user + cpu.system) / result.items : null,
  });
}

/** Runs `one(i)` for i in 0..count-1 with `width` calls awaited at once. */
export async function inFlight(count, width, one) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, count) }, async () => {
      while (next < count) await one(next++);
    }),
  );
}

/**
 * Consumes `items` items already on `queue` with `adapter.consumer` at `concurrency`, a
 * no-op handler; the time runs from the consumer's start to the last item done (acknowledged,
 * completed) or to `maxSeconds`, whichever comes first.
 */
export async function consumeAll(adapter, queue, items, concurrency, maxSeconds) {
  let done = 0;
  let resolveAll;
  const all = new Promise((r) => (resolveAll = r));
  const consumer = await adapter.consumer(queue, concurrency, {
    onStart: () => undefined,
    onDone: (n) => {
      done += n;
      if (done >= items) resolveAll();
    },
  });
  const t0 = performance.now();
  await consumer.start();
  const capped = await Promise.race([all.then(() => false), sleep(maxSeconds * 1000).then(() => true)]);
  const seconds = (performance.now() - t0) / 1000;
  const handled = done;
  await consumer.stop();
  return { items: Math.min(handled, items), seconds, capped };
}

/**
 * A waiting consumer (concurrency 1) and a push every `everyMs` (`count` pushes, not awaited
 * one by one, so a slow answer does not hold the next push back): per item, the time from the
 * push call to the start of its handler. `itemOf(i)` is the i-th item, carrying `n: i`. Items not
 * handled `maxSeconds` after the last push are counted as not handled (their latency is above
 * anything measured).
 */
export async function pushToHandler(adapter, queue, count, everyMs, maxSeconds, itemOf) {
  const pushedAt = new Array(count).fill(null);
  const startedAt = new Array(count).fill(null);
  let handled = 0;
  let resolveAll;
  const all = new Promise((r) => (resolveAll = r));
  const consumer = await adapter.consumer(queue, 1, {
    onStart: (item) => {
      if (typeof item?.n !== 'number' || startedAt[item.n] !== null) return;
      startedAt[item.n] = performance.now();
      handled += 1;
      if (handled === count) resolveAll();
    },
    onDone: () => undefined,
  });
  await consumer.start();
  // the consumer waits before the first push
  await sleep(500);
  const failures = [];
  const pushes = [];
  const t0 = performance.now();
  for (let i = 0; i < count; i++) {
    const wait = t0 + i * everyMs - performance.now();
    if (wait > 0) await sleep(wait);
    pushedAt[i] = performance.now();
    pushes.push(adapter.pushOne(queue, itemOf(i)).catch((error) => failures.push(String(error?.message ?? error))));
  }
  await Promise.all(pushes);
  await Promise.race([all, sleep(maxSeconds * 1000)]);
  await consumer.stop();
  // null: not handled in time (JSON, which carries this to the benchmark, has no Infinity)
  const latencies = startedAt.map((s, i) => (s === null ? null : s - pushedAt[i]));
  return { items: count, handled, latencies_ms: latencies, push_failures: failures.slice(0, 5), push_failure_count: failures.length };
}
