// /proc of this machine: CPU time (clock ticks) and memory of processes, and where a pushpop
// process's embedded PostgreSQL is.

import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync, readlinkSync, realpathSync } from 'node:fs';

export let CLK_TCK = 100;
try {
  CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8', timeout: 5000 }).trim()) || 100;
} catch {
  // getconf missing: 100 is the Linux value everywhere that matters
}

/** Fields of /proc/<pid>/stat (comm may hold spaces and parentheses: fields are read after the last ')'). */
export function readStat(pid) {
  let text;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  const close = text.lastIndexOf(')');
  const f = text.slice(close + 2).split(' ');
  // f[0] is field 3 (state): field n is f[n - 3]
  return {
    pid: Number(pid),
    comm: text.slice(text.indexOf('(') + 1, close),
    ppid: Number(f[1]),
    utime: Number(f[11]),
    stime: Number(f[12]),
    cutime: Number(f[13]),
    cstime: Number(f[14]),
    starttime: Number(f[19]),
  };
}

export function allStats() {
  const out = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const s = readStat(name);
    if (s) out.push(s);
  }
  return out;
}

export function rssKb(pid) {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/** CPU ticks of one process, its children not included. */
export function ownTicks(pid) {
  const s = readStat(pid);
  return s ? s.utime + s.stime : null;
}

/**
 * CPU ticks of a store's server process: its own and its reaped children's
 * (utime+stime+cutime+cstime) plus every live child's. For a PostgreSQL postmaster the children
 * are the backends, checkpointer, walwriter, ...; for redis-server, the rewrites of its
 * append-only file. A child that exits between two samples moves from the second term to the first.
 */
export function treeTicks(postmaster, stats = allStats()) {
  const pm = stats.find((s) => s.pid === postmaster.pid);
  if (!pm || pm.starttime !== postmaster.starttime) return null;
  let ticks = pm.utime + pm.stime + pm.cutime + pm.cstime;
  for (const s of stats) if (s.ppid === pm.pid) ticks += s.utime + s.stime;
  return ticks;
}

/**
 * The embedded PostgreSQL of a pushpop process, if it runs one: a descendant `postgres` process
 * whose parent is not a `postgres` (the postmaster), else a postmaster whose working directory
 * (PostgreSQL changes into its data directory) is under the service's DATA_DIR. None: the
 * database runs inside the service (PGlite).
 */
export function findEmbeddedPostmaster(servicePid, dataDir) {
  const stats = allStats();
  const byPid = new Map(stats.map((s) => [s.pid, s]));
  const isPostmaster = (s) => s.comm === 'postgres' && byPid.get(s.ppid)?.comm !== 'postgres';
  let frontier = [servicePid];
  for (let depth = 0; depth < 4 && frontier.length > 0; depth++) {
    const children = stats.filter((s) => frontier.includes(s.ppid));
    const found = children.find(isPostmaster);
    if (found) return { pid: found.pid, starttime: found.starttime };
    frontier = children.map((s) => s.pid);
  }
  if (dataDir) {
    let root;
    try {
      root = realpathSync(dataDir);
    } catch {
      return null;
    }
    for (const s of stats) {
      if (!isPostmaster(s)) continue;
      try {
        if (realpathSync(`/proc/${s.pid}/cwd`).startsWith(root)) return { pid: s.pid, starttime: s.starttime };
      } catch {
        // not ours to look at, or gone
      }
    }
  }
  return null;
}

export function postgresBinaryVersion(pid) {
  const candidates = [];
  try {
    candidates.push(readlinkSync(`/proc/${pid}/exe`));
  } catch {
    // not readable
  }
  try {
    candidates.push(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0]);
  } catch {
    // gone
  }
  for (const bin of candidates) {
    try {
      return execFileSync(bin, ['--version'], { encoding: 'utf8', timeout: 5000 }).trim();
    } catch {
      // try the next
    }
  }
  return null;
}

export function isAlive(proc) {
  const s = readStat(proc.pid);
  return s !== null && s.starttime === proc.starttime;
}
