// The main table: per target and scenario the medians over the rounds, the ratios to the
// yardsticks (group-commit, floor, BullMQ, pg-boss) and the notes.

import { CONFIG } from '../common/config.mjs';
import { fmtMs, fmtNum, fmtRatio } from '../common/format.mjs';
import { runRows } from '../common/results.mjs';
import { median, round } from '../common/util.mjs';
import { ROWS_OF } from '../scenarios/index.mjs';
import { scenarioTitle } from '../scenarios/record.mjs';

/** Per target x scenario: medians over rounds, sums of the problems. */
export function summarizeRows(targets) {
  const scenarioNames = CONFIG.scenarios.flatMap((s) => ROWS_OF[s] ?? [s]);
  const out = [];
  for (const scenario of scenarioNames) {
    for (const t of targets) {
      const mine = runRows.filter((r) => r.target === t.name && r.scenario === scenario);
      if (mine.length === 0) continue;
      const okRows = mine.filter((r) => !r.failed);
      out.push({
        target: t.name,
        scenario,
        title: scenarioTitle(scenario),
        rounds: okRows.length,
        failed_rounds: mine.length - okRows.length,
        req_per_s: round(median(okRows.map((r) => r.req_per_s))),
        p50_ms: round(median(okRows.map((r) => r.latency_ms.p50)), 3),
        p99_ms: round(median(okRows.map((r) => r.latency_ms.p99)), 3),
        server_us_per_req: round(median(okRows.map((r) => r.cpu.server_us_per_req)), 1),
        store_us_per_req: round(median(okRows.map((r) => r.cpu.store_us_per_req)), 1),
        loadgen_us_per_req: round(median(okRows.map((r) => r.cpu.loadgen_us_per_req)), 1),
        store: t.redis ? 'redis' : 'postgres',
        store_location: t.pgLocation,
        non_2xx: okRows.reduce((n, r) => n + r.non_2xx, 0),
        http_429: okRows.reduce((n, r) => n + r.http_429, 0),
        errors: okRows.reduce((n, r) => n + r.errors + r.timeouts, 0),
        empty_pops: okRows.reduce((n, r) => n + (r.empty_pops ?? 0), 0),
        ran_dry: okRows.some((r) => r.ran_dry),
        checks_ok: okRows.every((r) => !r.check || r.check.ok),
        per_round_req_per_s: mine.map((r) => (r.failed ? null : r.req_per_s)),
      });
    }
  }
  for (const s of out) {
    const peer = (name) => out.find((x) => x.target === name && x.scenario === s.scenario)?.req_per_s;
    const ratio = (name) => (s.req_per_s && peer(name) ? round(s.req_per_s / peer(name), 3) : null);
    s.ratio_to_group_commit = ratio('group-commit');
    s.ratio_to_floor = ratio('floor');
    s.ratio_to_bullmq = ratio('bullmq-redis');
    s.ratio_to_pgboss = ratio('pgboss');
  }
  return out;
}

export function storeCell(s) {
  if (s.store_location === 'in process') return 'in process¹';
  return fmtNum(s.store_us_per_req);
}

export function notesOf(s) {
  const notes = [];
  if (s.failed_rounds) notes.push(`FAILED in ${s.failed_rounds} round(s)`);
  if (s.ran_dry) notes.push('RAN DRY');
  if (!s.checks_ok) notes.push('CHECK FAILED');
  if (s.http_429) notes.push(`429 x${s.http_429}`);
  if (s.scenario === 'hot' && s.empty_pops) notes.push(`${fmtNum(s.empty_pops)} empty pops`);
  if (s.rounds > 1) notes.push(`rounds: ${s.per_round_req_per_s.map((x) => fmtNum(x)).join(' / ')}`);
  return notes.join('; ');
}

// "vs pg-boss" is in latest.json (ratio_to_pgboss), not in the table, which is wide enough
export const HEADERS = ['target', 'scenario', 'req/s', 'vs group-commit', 'vs floor', 'vs BullMQ', 'p50 ms', 'p99 ms', 'server CPU µs/req', 'store CPU µs/req'];
export const RIGHT = [false, false, true, true, true, true, true, true, true, true];

export function tableCells(s) {
  return [
    s.target,
    s.title,
    fmtNum(s.req_per_s),
    fmtRatio(s.ratio_to_group_commit, 1),
    fmtRatio(s.ratio_to_floor, 1),
    fmtRatio(s.ratio_to_bullmq, 1),
    fmtMs(s.p50_ms),
    fmtMs(s.p99_ms),
    fmtNum(s.server_us_per_req),
    storeCell(s),
  ];
}
