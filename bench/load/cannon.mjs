// The load driver: autocannon runs (keep-alive connections, one request in flight each, a
// watchdog), the push and pop requests of the scenarios with their counters, and every
// response's latency kept for exact percentiles.

import autocannon from 'autocannon';
import { performance } from 'node:perf_hooks';
import { clearInterval, setInterval } from 'node:timers';
import { CONFIG, MAX_SAMPLES } from '../common/config.mjs';
import { pushBody, randomPriority } from '../common/items.mjs';
import { runState } from '../common/results.mjs';
import { summarize } from '../common/util.mjs';

export const JSON_HEADERS = { 'content-type': 'application/json' };

/** A push request; `queueFor()` picks the queue of each request. */
export function pushRequest(queueFor, counters, priority = null) {
  return {
    method: 'POST',
    path: '/',
    headers: JSON_HEADERS,
    setupRequest: (req) => ({ ...req, path: `/queue/${queueFor()}/push`, body: pushBody(priority === null ? randomPriority() : priority) }),
    onResponse: (status) => {
      if (status === 200) counters.pushed += 1;
    },
  };
}

/** A pop request, depth 1; counts items received and pops that came back empty. */
export function popRequest(queueFor, counters) {
  return {
    method: 'POST',
    path: '/',
    setupRequest: (req) => ({ ...req, path: `/queue/${queueFor()}/pop?depth=1` }),
    onResponse: (status, body) => {
      if (status !== 200) return;
      try {
        const parsed = JSON.parse(body);
        if (parsed.count === 0) counters.emptyPops += 1;
        else counters.popped += parsed.count;
      } catch {
        counters.unparsable += 1;
      }
    },
  };
}

export const newCounters = () => ({ pushed: 0, popped: 0, emptyPops: 0, unparsable: 0 });

/**
 * One autocannon run (keep-alive connections, one request in flight per connection). Latencies
 * are autocannon's per-response timings (float ms, write of the request to end of the
 * response), all kept, so the percentiles are exact. With `sequence` set and one connection,
 * responses alternate between the named operations.
 */
export async function cannon({ url, connections, seconds, amount, requests, sequence }) {
  const all = [];
  const byOp = sequence ? Object.fromEntries(sequence.map((op) => [op, []])) : null;
  let index = 0;
  const wallStart = performance.now();
  const instance = autocannon({ url, connections, pipelining: 1, timeout: CONFIG.stallSeconds, ...(amount ? { amount } : { duration: seconds }), requests });
  let lastResponse = performance.now();
  instance.on('response', (_client, _status, _bytes, ms) => {
    lastResponse = performance.now();
    if (all.length < MAX_SAMPLES) all.push(ms);
    if (byOp && byOp[sequence[index % sequence.length]].length < MAX_SAMPLES) byOp[sequence[index % sequence.length]].push(ms);
    index += 1;
  });
  // Watchdog: any run stops when nothing has answered for BENCH_STALL_SECONDS, and a run with
  // `amount` stops at a time cap (a stuck server must not hang the benchmark).
  let stoppedBy = null;
  const hardCapMs = (amount ? Math.max(120, amount / 10) : seconds + 60) * 1000;
  const watchdog = setInterval(() => {
    const now = performance.now();
    if (stoppedBy) return;
    if (runState.interrupted) stoppedBy = 'interrupted';
    else if (now - lastResponse > CONFIG.stallSeconds * 1000) stoppedBy = `stalled: no response for ${CONFIG.stallSeconds} s`;
    else if (now - wallStart > hardCapMs) stoppedBy = `time cap of ${Math.round(hardCapMs / 1000)} s reached`;
    if (stoppedBy) instance.stop();
  }, 250);
  let result;
  try {
    result = await instance;
  } finally {
    clearInterval(watchdog);
  }
  // autocannon ends an `amount` run only at its next 1-second tick (and reports that duration):
  // such a run lasts until its last response
  const activeSeconds = amount ? (lastResponse - wallStart) / 1000 : result.duration || (performance.now() - wallStart) / 1000;
  const statusCodes = Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([code, v]) => [code, v.count]));
  const non2xx = Object.entries(statusCodes)
    .filter(([code]) => !code.startsWith('2'))
    .reduce((n, [, c]) => n + c, 0);
  const count429 = statusCodes['429'] ?? 0;
  return {
    durationSeconds: activeSeconds,
    responses: index,
    ok: result['2xx'],
    statusCodes,
    non2xx,
    non2xxExcept429: non2xx - count429,
    count429,
    errors: result.errors,
    timeouts: result.timeouts,
    latency: summarize(all),
    stoppedBy,
    latencyByOp: byOp ? Object.fromEntries(Object.entries(byOp).map(([op, s]) => [op, summarize(s)])) : undefined,
  };
}
