// pushpop only: competing consumers, pop with ack then acknowledge, on one shared and on one
// exclusive queue.

import { CONFIG } from '../common/config.mjs';
import { fmtNum } from '../common/format.mjs';
import { httpRequest } from '../common/http.mjs';
import { problems } from '../common/results.mjs';
import { progress, sleep } from '../common/util.mjs';
import { cannon, JSON_HEADERS, newCounters } from '../load/cannon.mjs';
import { addItems, queueCounts } from '../targets/counts.mjs';
import { cpuPerRequest, sampleCpu } from '../targets/cpu.mjs';
import { failed, record, runIssues, S, scenarioTitle, settle, W } from './record.mjs';

export const ACK_TTL_SECONDS = 5;

/** Whether the queue holds no live lock (exclusive: `lock` null; shared: `locks.count` 0). */
export async function noLiveLock(target, queue) {
  const { status, body } = await httpRequest(target.url, 'GET', `/queue/${encodeURIComponent(queue)}`);
  if (status !== 200) throw new Error(`GET /queue/${queue}: ${status} ${JSON.stringify(body).slice(0, 200)}`);
  return body.locks ? body.locks.count === 0 : body.lock === null;
}

/**
 * One connection's loop: a pop with ack (depth 1), then, if it got a lock, its acknowledge; a
 * 423 or an empty pop starts the loop over (autocannon restarts at the first request when
 * setupRequest returns nothing).
 */
export function ackPopRequests(queue, counters) {
  return [
    {
      method: 'POST',
      path: `/queue/${queue}/pop?require_ack=true&depth=1&ttl_seconds=${ACK_TTL_SECONDS}`,
      onResponse: (status, body, context) => {
        context.lockId = undefined;
        if (status === 423) counters.locked += 1;
        if (status !== 200) return;
        try {
          const parsed = JSON.parse(body);
          if (parsed.locked) context.lockId = parsed.lock_id;
          else counters.emptyPops += 1;
        } catch {
          counters.unparsable += 1;
        }
      },
    },
    {
      method: 'POST',
      path: `/queue/${queue}/acknowledge`,
      headers: JSON_HEADERS,
      setupRequest: (req, context) => (context.lockId ? { ...req, body: `{"lock_id":"${context.lockId}"}` } : null),
      onResponse: (status, body) => {
        if (status !== 200) return;
        try {
          counters.acked += JSON.parse(body).items_acknowledged;
        } catch {
          counters.unparsable += 1;
        }
      },
    },
  ];
}

export async function scenarioAckPop(target, roundNo) {
  const conns = CONFIG.ackConsumers;
  for (const [mode, name] of [
    ['shared', 'ackpop-shared'],
    ['exclusive', 'ackpop-exclusive'],
  ]) {
    const queue = `bench-ack-${mode}`;
    try {
      if (!target.ackModes?.has(mode)) {
        const { status, body } = await httpRequest(target.url, 'PUT', `/queue/${queue}/settings`, JSON.stringify({ lock_mode: mode }));
        if (status !== 200) throw new Error(`PUT /queue/${queue}/settings: ${status} ${JSON.stringify(body).slice(0, 200)}`);
        (target.ackModes ??= new Set()).add(mode);
      }
      const now = (await queueCounts(target, [queue])).get(queue);
      if (now < CONFIG.ackItems) {
        progress(`  ${target.name} · ${name}: topping ${queue} up to ${fmtNum(CONFIG.ackItems)} items (not measured) ...`);
        await addItems(target, new Map([[queue, CONFIG.ackItems - now]]), { label: `${name} pre-fill` });
      }
      progress(`  ${target.name} · ${scenarioTitle(name)}: ${W()} s warm-up + ${S()} s measured ...`);
      const warm = { ...newCounters(), acked: 0, locked: 0 };
      if (W() > 0) {
        const r = await cannon({ url: target.url, connections: conns, seconds: W(), requests: ackPopRequests(queue, warm) });
        if (r.stoppedBy || r.errors > 0) problems.push(`${target.name} ${name} (warm-up): ${runIssues(r).join('; ')}`);
      }
      // A lock left by a cut-off cycle would block an exclusive queue until it expires.
      const deadline = Date.now() + (ACK_TTL_SECONDS + 5) * 1000;
      while (!(await noLiveLock(target, queue)) && Date.now() < deadline) await sleep(100);
      const before = (await queueCounts(target, [queue])).get(queue);
      const counters = { ...newCounters(), acked: 0, locked: 0 };
      const cpuBefore = sampleCpu(target);
      const r = await cannon({ url: target.url, connections: conns, seconds: S(), requests: ackPopRequests(queue, counters) });
      const cpuAfter = sampleCpu(target);
      await settle();
      const after = (await queueCounts(target, [queue])).get(queue);
      // 423 is the exclusive mode's answer while another connection's lock lives: expected here.
      const count423 = r.statusCodes['423'] ?? 0;
      const rr = { ...r, non2xxExcept429: r.non2xxExcept429 - count423 };
      const cycles = counters.acked;
      const taken = before - after;
      // Items popped by cycles cut off at the end are held by locks (not in the count) until they expire.
      const ok = counters.unparsable === 0 && counters.emptyPops === 0 && taken >= cycles && taken <= cycles + conns;
      const row = record(target, name, roundNo, rr, cpuPerRequest(cpuBefore, cpuAfter, cycles), {
        connections: conns,
        responses_per_s: Math.round(r.responses / r.durationSeconds),
        cycles,
        http_423: count423,
        empty_pops: counters.emptyPops,
        ran_dry: counters.emptyPops > 0 || warm.emptyPops > 0,
        ran_dry_detail: `${counters.emptyPops + warm.emptyPops} empty pop(s); raise BENCH_ACK_ITEMS`,
        check: {
          ok,
          detail: `${taken} items left the queue, ${cycles} acknowledged, ${counters.emptyPops} empty pops, ${counters.unparsable} unparsable bodies`,
        },
      });
      row.req_per_s = Math.round(cycles / r.durationSeconds);
      progress(`    = ${fmtNum(row.req_per_s)} cycles/s (${fmtNum(row.responses_per_s)} responses/s, ${fmtNum(count423)} × 423)`);
    } catch (error) {
      failed(target, name, roundNo, error);
    }
  }
}
