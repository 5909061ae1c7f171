// What latest.json and latest.md say about the run itself: when, on what machine, which build,
// which versions, which knobs.

import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { CONFIG, DATABASES } from '../common/config.mjs';
import { packageVersion, round } from '../common/util.mjs';
import { CLK_TCK } from '../targets/proc.mjs';

const pushpopDir = CONFIG.pushpopDir;

export function gitInfo(dir) {
  const git = (...args) => execFileSync('git', ['-C', dir, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 10_000 }).trim();
  try {
    // uncommitted changes to what is measured (bench/ itself does not count)
    return {
      git_commit: git('rev-parse', '--short', 'HEAD'),
      git_dirty: git('status', '--porcelain', '--untracked-files=no', '--', '.', ':(exclude)bench').length > 0,
    };
  } catch {
    return { git_commit: null, git_dirty: null };
  }
}

export function buildMeta(buildIsStale) {
  const meta = {
    date: new Date().toISOString(),
    node: process.versions.node,
    platform: `${os.platform()} ${os.release()}`,
    cpus: os.cpus().length,
    cpu_model: os.cpus()[0]?.model ?? null,
    clk_tck: CLK_TCK,
    loadavg_start: os.loadavg().map((x) => round(x, 2)),
    loadavg_end: null,
    pushpop: { dir: pushpopDir, ...gitInfo(pushpopDir), build_stale: buildIsStale, version: null },
    postgres: { machine: null, embedded: null },
    redis: /** @type {string | null} */ (null),
    versions: {
      autocannon: packageVersion('autocannon'),
      pg: packageVersion('pg'),
      'pg-boss': packageVersion('pg-boss'),
      bullmq: packageVersion('bullmq'),
      ioredis: packageVersion('ioredis'),
      '@pushpop/client': packageVersion('@pushpop/client', pushpopDir),
    },
    config: {
      targets: CONFIG.targets,
      scenarios: CONFIG.scenarios,
      seconds: CONFIG.seconds,
      warmup_seconds: CONFIG.warmupSeconds,
      rounds: CONFIG.rounds,
      connections: CONFIG.connections,
      queues: CONFIG.queues,
      item_bytes: CONFIG.itemBytes,
      priorities: `0-${CONFIG.priorities - 1}`,
      pop_depth: 1,
      hot_backlog: CONFIG.hotBacklog,
      max_prefill: CONFIG.maxPrefill,
      shallow_items: CONFIG.shallowItems,
      deep_items: CONFIG.deepItems,
      depth_ops: CONFIG.depthOps,
      long_polls: CONFIG.longPolls,
      longpoll_idle_seconds: CONFIG.longPollIdleSeconds,
      longpoll_in_flight: CONFIG.longPollInFlight,
      longpoll_processes: CONFIG.longPollProcesses,
      idle_polls: CONFIG.idlePolls,
      idle_seconds: CONFIG.idleSeconds,
      client_items: CONFIG.clientItems,
      client_max_seconds: CONFIG.clientMaxSeconds,
      client_latency_pushes: CONFIG.clientLatencyPushes,
      stall_seconds: CONFIG.stallSeconds,
      postgres_server: CONFIG.pgServer,
      db_prefix: CONFIG.dbPrefix,
      databases: Object.values(DATABASES),
    },
    notes: [
      'The load generator (autocannon) runs in the benchmark process on the same machine as the targets and PostgreSQL.',
      "The machine's PostgreSQL is shared by pushpop-postgres, group-commit, floor, bullmq-postgres and pgboss; it is measured while only one target is loaded (the others idle). Other clients of that server at the time are counted too.",
      'Server CPU is the server process alone (utime+stime, children excluded); PostgreSQL CPU is the whole postmaster tree.',
    ],
  };
  try {
    meta.pushpop.version = JSON.parse(readFileSync(join(pushpopDir, 'package.json'), 'utf8')).version ?? null;
  } catch {
    // no package.json
  }

  return meta;
}
