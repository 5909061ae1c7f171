// What must hold before the benchmark starts anything: good knobs (else exit code 2), enough
// open files for the long polls (else the benchmark runs itself again under a raised limit), and
// a pushpop build to measure (else exit code 1 with the command to run).

import { execFileSync, spawnSync } from 'node:child_process';
import console from 'node:console';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import process from 'node:process';
import { CONFIG, knobErrors, PUSHPOP_TARGETS, repoRoot } from './config.mjs';

export function exitOnBadKnobs() {
  if (knobErrors.length === 0) return;
  for (const e of knobErrors) console.error(e);
  process.exit(2);
}

/** The scenarios that hold long polls open at once, here and in pushpop, with their knob and count. */
function pollHolders() {
  const holders = [];
  if (CONFIG.scenarios.includes('longpoll')) holders.push({ scenario: 'longpoll', knob: 'BENCH_LONGPOLL_POLLS', polls: CONFIG.longPolls });
  if (CONFIG.scenarios.includes('idle')) holders.push({ scenario: 'idle', knob: 'BENCH_IDLE_POLLS', polls: CONFIG.idlePolls });
  return holders.sort((a, b) => b.polls - a.polls);
}

// The longpoll and idle scenarios hold BENCH_LONGPOLL_POLLS (BENCH_IDLE_POLLS) connections open
// at once, here and in the service: below that many open files, raise the soft limit (children
// inherit it) by running again under `ulimit -n`, or stop with a hint when the hard limit is too low.
export function ensureOpenFilesLimit() {
  const [most] = pollHolders();
  if (!most) return;
  const need = most.polls + 1024;
  const [soft, hard] = execFileSync('/bin/sh', ['-c', 'ulimit -Sn; ulimit -Hn'], { encoding: 'utf8', timeout: 5000 })
    .trim()
    .split('\n')
    .map((v) => (v.trim() === 'unlimited' ? Infinity : Number(v)));
  if (soft >= need) return;
  if (hard >= need && process.env.BENCH_RAISED_NOFILE !== '1') {
    process.stdout.write(`open files limit ${soft} < ${need} needed by the ${most.scenario} scenario: running again under ulimit -n ${need}\n`);
    // Ctrl-C reaches the run below (same process group), which stops its servers; this one waits for it.
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => undefined);
    const again = spawnSync('/bin/sh', ['-c', `ulimit -Sn ${need} && exec "$0" "$@"`, process.execPath, ...process.execArgv, ...process.argv.slice(1)], {
      stdio: 'inherit',
      env: { ...process.env, BENCH_RAISED_NOFILE: '1' },
    });
    process.exit(again.status ?? 1);
  }
  console.error(
    `the ${most.scenario} scenario holds ${most.polls} connections open in this process and in pushpop: the open files limit is ${soft} (hard ${hard}); raise it (ulimit -n ${need}) or lower ${most.knob}`,
  );
  process.exit(2);
}

/**
 * The pushpop build in BENCH_PUSHPOP_DIR: exits with a hint when there is none; answers whether
 * it is older than its sources (the benchmark builds nothing and only warns then).
 */
export function checkPushpopBuild() {
  const pushpopDir = CONFIG.pushpopDir;
  if (PUSHPOP_TARGETS.length === 0) return false;
  const hasMutexLib = existsSync(join(pushpopDir, 'libs/keyed-mutex/package.json'));
  const outputs = ['dist/main.js', ...(hasMutexLib ? ['libs/keyed-mutex/dist/index.js'] : [])];
  const inputs = ['src', ...(hasMutexLib ? ['libs/keyed-mutex/src'] : [])];
  const missing = outputs.filter((p) => !existsSync(join(pushpopDir, p)));
  if (missing.length > 0) {
    const hint = pushpopDir === repoRoot ? 'npm run build && npm run bench' : `(cd ${pushpopDir} && npm run build), then run the benchmark again`;
    console.error(`pushpop in ${pushpopDir} is not built (missing ${missing.join(', ')}). The benchmark builds nothing itself; run:\n\n  ${hint}\n`);
    process.exit(1);
  }
  const newestMtime = (path, budget = { entries: 20_000 }) => {
    if (!existsSync(path) || budget.entries-- <= 0) return 0;
    const stat = statSync(path);
    if (!stat.isDirectory()) return stat.mtimeMs;
    let newest = stat.mtimeMs;
    for (const entry of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, entry), budget));
    return newest;
  };
  return Math.max(...inputs.map((p) => newestMtime(join(pushpopDir, p)))) > Math.min(...outputs.map((p) => statSync(join(pushpopDir, p)).mtimeMs));
}
