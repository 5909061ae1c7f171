// The benchmark's child processes: servers started in their own process groups and waited for
// until ready, stopped in order at the end, and all killed on exit or a second Ctrl-C, with the
// embedded PostgreSQL servers they leave behind and the temporary directories.

import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { httpRequest } from '../common/http.mjs';
import { runState } from '../common/results.mjs';
import { log, sleep } from '../common/util.mjs';
import { isAlive, readStat } from './proc.mjs';

export const children = new Set(); // { child, pid, exited }
export const tempDirs = new Set();
export const embeddedPostmasters = new Set(); // { pid, starttime } seen under a pushpop-embedded target

/**
 * Starts a server as a child process in its own process group (so that Ctrl-C reaches the
 * benchmark only, and the benchmark stops the children in order) and waits for GET readyPath.
 */
export async function startServer({ label, args, env, cwd, port, readyPath, readyTimeoutSeconds = 180 }) {
  const started = performance.now();
  const child = spawn(process.execPath, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let output = '';
  const keep = (chunk) => {
    output += chunk.toString();
    if (output.length > 200_000) output = output.slice(-100_000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  let exitInfo = null;
  const exited = new Promise((r) => child.on('exit', (code, signal) => r((exitInfo = { code, signal }))));
  const entry = { child, pid: child.pid, exited };
  children.add(entry);
  void exited.then(() => children.delete(entry));
  const url = `http://127.0.0.1:${port}`;
  const proc = {
    label,
    url,
    pid: child.pid,
    starttime: readStat(child.pid)?.starttime ?? null,
    output: () => output,
    alive: () => exitInfo === null,
    exitInfo: () => exitInfo,
    /** SIGTERM, then SIGKILL of its process group after `graceSeconds`. */
    async stop(graceSeconds = 20) {
      if (exitInfo === null) {
        try {
          child.kill('SIGTERM');
        } catch {
          // gone
        }
        const timedOut = await Promise.race([exited.then(() => false), sleep(graceSeconds * 1000).then(() => true)]);
        if (timedOut) {
          killGroup(child.pid, 'SIGKILL');
          await Promise.race([exited, sleep(5000)]);
        }
      }
      return exitInfo;
    },
  };
  const deadline = Date.now() + readyTimeoutSeconds * 1000;
  for (let attempt = 0; attempt < readyTimeoutSeconds * 20; attempt++) {
    if (exitInfo !== null) throw new Error(`${label} exited before it was ready (code ${exitInfo.code}, signal ${exitInfo.signal}):\n${output.slice(-4000)}`);
    try {
      const res = await httpRequest(url, 'GET', readyPath, null, 2000);
      if (res.status === 200) return { proc, readySeconds: (performance.now() - started) / 1000 };
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) break;
    await sleep(100);
  }
  await proc.stop(5);
  throw new Error(`${label} not ready within ${readyTimeoutSeconds} s:\n${output.slice(-4000)}`);
}

/**
 * Keeps a child process started in its own process group (`detached`) on the list of those
 * stopped at the end and killed on exit; answers its exit.
 * @returns {Promise<{ code: number | null, signal: string | null }>}
 */
export function track(child) {
  const exited = new Promise((r) => {
    child.on('exit', (code, signal) => r({ code, signal }));
    child.on('error', () => r({ code: null, signal: null }));
  });
  const entry = { child, pid: child.pid, exited };
  if (child.pid) children.add(entry);
  void exited.then(() => children.delete(entry));
  return exited;
}

export function killGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      // gone
    }
  }
}

/** Stops an embedded PostgreSQL that outlived its service: fast shutdown, then SIGKILL. */
export async function stopOrphanPostmaster(pm) {
  if (!isAlive(pm)) return false;
  try {
    process.kill(pm.pid, 'SIGINT');
  } catch {
    return false;
  }
  for (let i = 0; i < 100 && isAlive(pm); i++) await sleep(100);
  if (isAlive(pm)) {
    try {
      process.kill(pm.pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  return true;
}

/** Last-resort clean-up (exit, signal): kill every child's process group and orphaned embedded PostgreSQL servers, remove temporary directories. */
export function killEverything() {
  for (const { pid } of children) killGroup(pid, 'SIGKILL');
  for (const pm of embeddedPostmasters) {
    if (isAlive(pm)) {
      try {
        process.kill(pm.pid, 'SIGQUIT'); // immediate shutdown: the postmaster takes its backends down
      } catch {
        // gone
      }
    }
  }
  for (const dir of tempDirs) {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // best effort
    }
  }
  tempDirs.clear();
}
/** On exit, kill what is left; on a signal, stop the servers (a second signal kills them at once) and exit 130. */
export function installSignalHandlers() {
  process.on('exit', killEverything);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(signal, () => {
      if (runState.interrupted) {
        killEverything();
        process.exit(130);
      }
      runState.interrupted = true;
      log(`\n${signal}: stopping the servers (again to kill them at once) ...`);
      const graceful = Promise.all(
        [...children].map(({ child, exited }) => {
          try {
            child.kill('SIGTERM');
          } catch {
            // gone
          }
          return exited;
        }),
      );
      void Promise.race([graceful, sleep(8000)]).then(async () => {
        for (const pm of embeddedPostmasters) await stopOrphanPostmaster(pm);
        killEverything();
        process.exit(130);
      });
    });
  }
}
