import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { statSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * Where the embedded PostgreSQL can live when the service runs as root.
 *
 * PostgreSQL refuses to run as root, so a root service runs it as the system user `postgres`.
 * That user must be able to enter every directory on the way to its binaries and its data
 * directory. A clone under `/root` (mode 0700), or a `DATA_DIR` inside any root-private
 * directory, is out of its reach. Rather than loosening the modes of the user's own
 * directories, the cluster (and, when needed, a copy of the binaries) then goes under a
 * directory made for it (`EMBEDDED_POSTGRES_ROOT`, default `/var/lib/pushpop`), keyed by the
 * real path of `DATA_DIR`; `DATA_DIR` keeps the password and a pointer to the cluster.
 *
 * Written by hand: it is a handful of `stat` calls, and no library decides reachability the way
 * Node's `spawn({ uid, gid })` runs a child (with no supplementary groups).
 */

/** The file in `DATA_DIR` that names the cluster's directory when it lives elsewhere. */
export const POINTER_FILE = 'postgres.location';

/**
 * A user as a child spawned with `{ uid, gid }` sees the file system: libuv drops the
 * supplementary groups when it changes the user, so only the primary group counts.
 */
export interface Account {
  readonly uid: number;
  readonly gid: number;
  readonly name: string;
}

/** A directory an account cannot enter. */
export interface Blocker {
  readonly dir: string;
  readonly mode: number;
  readonly uid: number;
}

export interface StatLike {
  readonly mode: number;
  readonly uid: number;
  readonly gid: number;
}

/** Whether `account` may enter (search) a directory with this mode and owner. */
export function maySearch(st: StatLike, account: Account): boolean {
  const bits = st.uid === account.uid ? st.mode >> 6 : st.gid === account.gid ? st.mode >> 3 : st.mode;
  return (bits & 1) === 1;
}

/**
 * The first directory on the way from `/` to `path` (`path` itself included unless `self` is
 * false) that `account` cannot enter. Directories that do not exist yet end the walk: whoever
 * creates them chooses their mode.
 */
export function firstBlocked(path: string, account: Account, options: { self?: boolean; stat?: (path: string) => StatLike } = {}): Blocker | undefined {
  const stat = options.stat ?? statSync;
  const dirs: string[] = [];
  for (let dir = options.self === false ? dirname(path) : path; ; dir = dirname(dir)) {
    dirs.unshift(dir);
    if (dirname(dir) === dir) break;
  }
  for (const dir of dirs) {
    let st: StatLike;
    try {
      st = stat(dir);
    } catch {
      return undefined;
    }
    if (!maySearch(st, account)) return { dir, mode: st.mode & 0o7777, uid: st.uid };
  }
  return undefined;
}

/** `/root (mode 0700, owner root)`, for messages. */
export function describeBlocker(blocker: Blocker): string {
  const owner = blocker.uid === 0 ? 'root' : `uid ${blocker.uid}`;
  return `${blocker.dir} (mode 0${blocker.mode.toString(8)}, owner ${owner})`;
}

/** The account of a system user, or undefined when there is no such user. */
export function lookupAccount(name: string): Account | undefined {
  try {
    const id = (flag: string): number => Number(execFileSync('id', [flag, name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
    return { uid: id('-u'), gid: id('-g'), name };
  } catch {
    return undefined;
  }
}

/**
 * A user `useradd --system` would make: it owns nothing yet, so only the "other" bits of a
 * mode apply to it. Stands in for `postgres` before the service creates it.
 */
export function newSystemAccount(name: string): Account {
  return { uid: -1, gid: -1, name };
}

/** The cluster's directory under `root` for the data directory whose real path is `realDataDir`. */
export function relocatedHome(realDataDir: string, root: string): string {
  return join(root, `cluster-${createHash('sha256').update(realDataDir).digest('hex').slice(0, 16)}`);
}
