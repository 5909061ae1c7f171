// What every scenario does around its load: the unmeasured warm-up, the measured run with CPU
// sampled around it, and the row it records (with the problems it saw).

import { CONFIG } from '../common/config.mjs';
import { fmtCount, fmtMs, fmtNum } from '../common/format.mjs';
import { problems, runRows } from '../common/results.mjs';
import { errorText, progress, round, sleep, summarize } from '../common/util.mjs';
import { cannon, newCounters } from '../load/cannon.mjs';
import { cpuPerRequest, sampleCpu, storeProcess } from '../targets/cpu.mjs';

export function scenarioTitle(name) {
  if (name === 'push') return `push, ${CONFIG.queues} queues`;
  if (name === 'pop') return `pop, ${CONFIG.queues} queues`;
  if (name === 'hot') return 'hot queue, 50% push / 50% pop';
  if (name === 'depth-shallow') return `push+pop @${fmtCount(CONFIG.shallowItems)}, 1 conn`;
  if (name === 'depth-deep') return `push+pop @${fmtCount(CONFIG.deepItems)}, 1 conn`;
  if (name === 'delayed-none') return `push+pop @${fmtCount(CONFIG.shallowItems)}, no delayed items, 1 conn`;
  if (name === 'ackpop-shared') return `pop with ack + acknowledge, 1 shared queue, ${CONFIG.ackConsumers} conn`;
  if (name === 'ackpop-exclusive') return `pop with ack + acknowledge, 1 exclusive queue, ${CONFIG.ackConsumers} conn`;
  if (name === 'delayed-many') return `push+pop @${fmtCount(CONFIG.shallowItems)} + ${fmtCount(CONFIG.delayedItems)} delayed, 1 conn`;
  return name;
}

/** Non-2xx (other than 429), errors, timeouts and stops of a run, as problem texts. */
export function runIssues(r) {
  const bad = [];
  if (r.stoppedBy) bad.push(`run stopped early (${r.stoppedBy})`);
  if (r.non2xxExcept429 > 0) bad.push(`${r.non2xxExcept429} non-2xx responses other than 429 (${JSON.stringify(r.statusCodes)})`);
  if (r.errors > 0) bad.push(`${r.errors} connection errors`);
  if (r.timeouts > 0) bad.push(`${r.timeouts} requests timed out after ${CONFIG.stallSeconds} s`);
  return bad;
}

/** Unmeasured load of the same shape before a measured run. */
export async function warmUp(target, scenario, makeRequests, connections) {
  if (CONFIG.warmupSeconds === 0) return;
  const r = await cannon({ url: target.url, connections, seconds: CONFIG.warmupSeconds, requests: makeRequests(newCounters()) });
  for (const b of runIssues(r)) problems.push(`${target.name} ${scenario} (warm-up): ${b}`);
}

/** A measured run with CPU sampled around it. */
export async function measured(target, { connections, seconds, amount, requests, sequence }) {
  const before = sampleCpu(target);
  const r = await cannon({ url: target.url, connections, seconds, amount, requests, sequence });
  const after = sampleCpu(target);
  return { r, cpu: cpuPerRequest(before, after, r.responses) };
}

export function record(target, scenario, roundNo, r, cpu, extra = {}) {
  const row = {
    round: roundNo,
    target: target.name,
    scenario,
    title: scenarioTitle(scenario),
    connections: extra.connections ?? CONFIG.connections,
    duration_s: round(r.durationSeconds, 2),
    requests: r.responses,
    req_per_s: Math.round(r.responses / r.durationSeconds),
    latency_ms: r.latency,
    ...(r.latencyByOp ? { latency_ms_by_op: r.latencyByOp } : {}),
    status_codes: r.statusCodes,
    non_2xx: r.non2xx,
    non_2xx_except_429: r.non2xxExcept429,
    http_429: r.count429,
    errors: r.errors,
    timeouts: r.timeouts,
    stopped_by: r.stoppedBy,
    cpu,
    ...extra,
  };
  runRows.push(row);
  const bad = runIssues(r);
  if (row.check && row.check.ok === false) bad.push(`check failed: ${row.check.detail}`);
  if (row.ran_dry) bad.push(`ran dry: ${row.ran_dry_detail}`);
  for (const b of bad) problems.push(`${target.name} ${scenario} round ${roundNo}: ${b}`);
  const storeCpu = storeProcess(target) ? `${fmtNum(cpu.store_us_per_req)} µs/req` : target.pgLocation === 'in process' ? 'in process' : '-';
  progress(
    `    ${fmtNum(row.req_per_s)} req/s, p50 ${fmtMs(r.latency.p50)} ms, p99 ${fmtMs(r.latency.p99)} ms, CPU server ${fmtNum(cpu.server_us_per_req)} µs/req, ${target.redis ? 'Redis' : 'PostgreSQL'} ${storeCpu}` +
      (r.non2xx ? `, non-2xx ${r.non2xx}` : '') +
      (r.errors ? `, errors ${r.errors}` : '') +
      (row.empty_pops ? `, empty pops ${row.empty_pops}` : '') +
      (bad.length ? ` — PROBLEM: ${bad.join('; ')}` : ''),
  );
  return row;
}

export function failed(target, scenario, roundNo, error) {
  const message = errorText(error);
  problems.push(`${target.name} ${scenario} round ${roundNo}: FAILED: ${message}`);
  runRows.push({ round: roundNo, target: target.name, scenario, title: scenarioTitle(scenario), failed: message, latency_ms: summarize([]), cpu: {} });
  progress(`    FAILED: ${message}`);
}

/**
 * Requests cut off when a run stops (autocannon closes its connections at the end) may still be
 * running in the server; counts are taken after this pause so that they have landed.
 */
export const settle = () => sleep(1000);

export const W = () => CONFIG.warmupSeconds;
export const S = () => CONFIG.seconds;
export const C = () => CONFIG.connections;
