#!/usr/bin/env node
// pushpop benchmark: `npm run build && npm run bench`. What it measures, the knobs and how to
// read the numbers: bench/README.md.
//
// Starts every target as a child process — pushpop on its embedded database, pushpop on the
// machine's PostgreSQL, and peer servers (bench/peers: a group-commit and a raw-SQL floor and
// pg-boss on the same PostgreSQL, BullMQ on a redis-server of its own), all speaking pushpop's
// push and pop routes — then, round after round, drives one target at a time over loopback HTTP
// with autocannon through the same scenarios, reading the CPU time of the server process and of
// its store (PostgreSQL or Redis) from /proc around every measured window. Prints a table,
// writes bench/results/latest.md and bench/results/latest.json. Every loop here is bounded both
// in count and in time; every child process is stopped on exit, also on Ctrl-C.
//
// The parts: common/ (knobs, items, helpers), targets/ (starting and stopping the servers and
// their stores, /proc, counts and fills), load/ (autocannon), scenarios/ (one file per kind of
// load), report/ (the tables and the files).

import console from 'node:console';
import os from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { CONFIG, needsMachinePostgres, PUSHPOP_ONLY_SCENARIOS, resultsDir } from './common/config.mjs';
import { fmtNum } from './common/format.mjs';
import { agent } from './common/http.mjs';
import { checkPushpopBuild, ensureOpenFilesLimit, exitOnBadKnobs } from './common/preconditions.mjs';
import { problems, runState } from './common/results.mjs';
import { errorText, log, progress, round, runStarted } from './common/util.mjs';
import { buildMeta } from './report/meta.mjs';
import { summarizeRows } from './report/summary.mjs';
import { printAndWrite, writeJson } from './report/write.mjs';
import { runsOn, SCENARIO_FNS, setUpQueues, targetNeeded } from './scenarios/index.mjs';
import { failed } from './scenarios/record.mjs';
import { findMachinePostmaster } from './targets/postgres.mjs';
import { isAlive, rssKb } from './targets/proc.mjs';
import { installSignalHandlers, killEverything } from './targets/processes.mjs';
import { dropDatabaseOf, startTarget, stopTarget } from './targets/targets.mjs';

exitOnBadKnobs();
ensureOpenFilesLimit();
const buildIsStale = checkPushpopBuild();
installSignalHandlers();

const pushpopDir = CONFIG.pushpopDir;

/** Starts every selected target into `targets`; they stay up for the whole run (the ones not being measured idle). */
async function startTargets(meta, machine, targets) {
  for (const name of CONFIG.targets) {
    if (runState.interrupted) break;
    if (!targetNeeded(name)) {
      const why = CONFIG.scenarios.every((sc) => PUSHPOP_ONLY_SCENARIOS.includes(sc)) ? 'run on pushpop targets only' : 'do not run on it';
      progress(`${name}: not started (${CONFIG.scenarios.join(' and ')} ${why})`);
      continue;
    }
    progress(`starting ${name} ...`);
    try {
      const t = await startTarget(name, machine);
      targets.push(t);
      progress(
        `  ${name} ready in ${t.readySeconds} s on ${t.url} (pid ${t.proc.pid}; PostgreSQL: ${t.pgLocation}${t.postmaster ? `, postmaster pid ${t.postmaster.pid}` : ''})`,
      );
      if (name === 'pushpop-embedded') meta.postgres.embedded = t.pgVersion;
      if (t.redis) meta.redis = t.redis.version;
    } catch (error) {
      problems.push(`${name}: FAILED to start: ${errorText(error)}`);
      progress(`  ${name} FAILED to start: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
}

/** One target through every selected scenario of a round; stops at the first sign that it died. */
async function runScenarios(t, roundNo) {
  for (const scenario of CONFIG.scenarios) {
    if (runState.interrupted || t.dead) break;
    if (!runsOn(scenario, t)) continue;
    if (!t.proc.alive()) {
      const exit = t.proc.exitInfo();
      t.dead = `exited (code ${exit?.code}, signal ${exit?.signal})`;
      problems.push(`${t.name}: the server ${t.dead}; its remaining scenarios are skipped. Last output:\n${t.proc.output().slice(-2000)}`);
      break;
    }
    if (t.postmaster && !isAlive(t.postmaster)) {
      problems.push(`${t.name}: its PostgreSQL (pid ${t.postmaster.pid}) is gone`);
      t.postmaster = null;
    }
    try {
      await SCENARIO_FNS[scenario](t, roundNo);
    } catch (error) {
      failed(t, scenario, roundNo, error);
    }
  }
  if (t.proc.alive()) t.rss.push({ round: roundNo, kb: rssKb(t.proc.pid) });
}

async function main() {
  const meta = buildMeta(buildIsStale);
  // the autocannon scenarios of every target; the others are named below
  const perRun = CONFIG.scenarios.filter((s) => ['push', 'pop', 'hot'].includes(s)).length * (CONFIG.warmupSeconds + CONFIG.seconds + 2);
  const estimate = CONFIG.rounds * CONFIG.targets.length * perRun;
  log(
    `pushpop benchmark: targets ${CONFIG.targets.join(', ')}; scenarios ${CONFIG.scenarios.join(', ')}; ${CONFIG.rounds} round(s) x ${CONFIG.seconds} s (+${CONFIG.warmupSeconds} s warm-up), ${CONFIG.connections} connections`,
  );
  log(`pushpop build: ${join(pushpopDir, 'dist/main.js')} (${meta.pushpop.git_commit ?? 'no git'}${meta.pushpop.git_dirty ? ', uncommitted changes' : ''})`);
  log(
    `about ${Math.ceil(estimate / 60)} min of load, plus start-up, queue creation and pre-fills${CONFIG.scenarios.includes('depth') ? ` and the depth scenario (${fmtNum(CONFIG.deepItems)} items per pushpop target)` : ''}${CONFIG.scenarios.includes('longpoll') ? ` and the longpoll scenario (about 30 s per pushpop target, round and process count)` : ''}${CONFIG.scenarios.includes('idle') ? ` and the idle scenario (about ${CONFIG.idleSeconds + 15} s per pushpop target and round)` : ''}${CONFIG.scenarios.includes('sqlenq') ? ` and the sqlenq scenario (about ${2 * (CONFIG.warmupSeconds + CONFIG.seconds) + 10} s per pushpop target and round)` : ''}${CONFIG.scenarios.includes('clients') ? ` and the clients scenario (a minute or more per client library, pushpop lock mode and round; pg-boss's consume rows up to ${CONFIG.clientMaxSeconds} s each)` : ''}`,
  );
  log(`load average now ${meta.loadavg_start.join(' / ')} on ${meta.cpus} CPU(s): numbers from a busy machine are noisy`);
  if (buildIsStale)
    log(
      `WARNING: ${join(pushpopDir, 'dist')} is older than its src/ — the benchmark runs the last build; run \`npm run build\` there to measure the current sources`,
    );

  let machine = { version: null, postmaster: null };
  if (needsMachinePostgres) {
    try {
      machine = await findMachinePostmaster();
      meta.postgres.machine = machine.version;
    } catch (error) {
      console.error(
        `cannot reach PostgreSQL at ${CONFIG.pgServer} (${errorText(error)}); set BENCH_PG_URL, or BENCH_TARGETS=pushpop-embedded to run without it`,
      );
      return 1;
    }
    if (!machine.postmaster) {
      problems.push('the postmaster of the machine PostgreSQL was not found in /proc: its CPU is not measured');
      log('WARNING: the postmaster of the machine PostgreSQL was not found in /proc; its CPU is not measured');
    }
  }

  const targets = [];
  try {
    await startTargets(meta, machine, targets);

    // ---- unmeasured set-up: create the queues
    for (const t of targets) {
      if (runState.interrupted) break;
      try {
        await setUpQueues(t);
      } catch (error) {
        t.dead = `set-up failed: ${errorText(error)}`;
        problems.push(`${t.name}: set-up FAILED: ${errorText(error)}`);
        progress(`  ${t.name} set-up FAILED: ${errorText(error)}`);
      }
    }

    // ---- rounds: every live target through every scenario, the starting target rotating
    for (let roundNo = 1; roundNo <= CONFIG.rounds && !runState.interrupted; roundNo++) {
      const order = targets.map((_, i) => targets[(i + roundNo - 1) % targets.length]);
      progress(`round ${roundNo} of ${CONFIG.rounds}: ${order.map((t) => t.name).join(' → ')}`);
      for (const t of order) {
        if (runState.interrupted) break;
        await runScenarios(t, roundNo);
      }
    }
  } finally {
    // ---- stop everything
    for (const t of targets) await stopTarget(t);
    if (needsMachinePostgres && !CONFIG.keepDatabases) {
      for (const t of targets) await dropDatabaseOf(t);
    }
    agent.destroy();
  }

  meta.loadavg_end = os.loadavg().map((x) => round(x, 2));
  meta.total_seconds = round((performance.now() - runStarted) / 1000, 1);
  const summary = summarizeRows(targets);
  printAndWrite(meta, targets, summary);
  writeJson(meta, targets, summary);
  log('');
  if (problems.length) {
    log(`PROBLEMS (${problems.length}):`);
    for (const p of problems) log(`  - ${p}`);
  } else {
    log('No problems: every response was 2xx, every count checked out, no queue ran dry.');
  }
  log(`Total ${meta.total_seconds} s. Results: ${join(resultsDir, 'latest.md')} and latest.json`);
  if (runState.interrupted) return 130;
  return problems.length === 0 ? 0 : 1;
}

main().then(
  (code) => {
    killEverything();
    process.exit(code);
  },
  (error) => {
    console.error(`\nbenchmark failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    killEverything();
    process.exit(1);
  },
);
