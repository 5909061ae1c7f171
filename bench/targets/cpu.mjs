// CPU time of a target around a measured window: its server process and its store's process
// tree (PostgreSQL or Redis), read from /proc, and this process's own (the load generator).

import process from 'node:process';
import { round } from '../common/util.mjs';
import { allStats, CLK_TCK, ownTicks, treeTicks } from './proc.mjs';

/** The process whose tree is the target's store: its PostgreSQL's postmaster, or the redis-server started for it. */
export const storeProcess = (target) => target.postmaster ?? target.redis?.proc ?? null;

/** CPU of the target's server process and of its store (PostgreSQL or Redis), and of this process (the load generator). */
export function sampleCpu(target) {
  const store = storeProcess(target);
  const stats = store ? allStats() : null;
  return {
    server: target.workers ? treeTicks(target.workers) : ownTicks(target.proc.pid),
    store: store ? treeTicks(store, stats) : null,
    loadgen: process.cpuUsage(),
  };
}

export function cpuPerRequest(before, after, requests) {
  const perReq = (ticksBefore, ticksAfter) =>
    ticksBefore === null || ticksAfter === null || requests === 0 ? null : (((ticksAfter - ticksBefore) / CLK_TCK) * 1e6) / requests;
  const loadgenUs = after.loadgen.user + after.loadgen.system - (before.loadgen.user + before.loadgen.system);
  return {
    server_cpu_s: before.server === null || after.server === null ? null : round((after.server - before.server) / CLK_TCK, 2),
    store_cpu_s: before.store === null || after.store === null ? null : round((after.store - before.store) / CLK_TCK, 2),
    server_us_per_req: round(perReq(before.server, after.server), 1),
    store_us_per_req: round(perReq(before.store, after.store), 1),
    loadgen_us_per_req: requests === 0 ? null : round(loadgenUs / requests, 1),
  };
}
