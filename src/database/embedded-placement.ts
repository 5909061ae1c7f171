import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from '@nestjs/common';

const run = promisify(execFile);

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

/** The two binaries the service runs. */
export interface Binaries {
  postgres: string;
  initdb: string;
}

/**
 * PostgreSQL refuses to run as root. Run as root, the service runs it as the system user
 * `postgres` (created if missing, as embedded-postgres's `createPostgresUser` does) and hands
 * it the data directory; otherwise PostgreSQL runs as the service's own user.
 */
export async function serverOwner(logger: Logger): Promise<Account | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const existing = lookupAccount('postgres');
  if (existing) return existing;
  logger.log('Creating the system user postgres to run the embedded PostgreSQL (it refuses to run as root)');
  try {
    await run('groupadd', ['--system', 'postgres']).catch(() => undefined);
    await run('useradd', ['--system', '--gid', 'postgres', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres']);
  } catch (error) {
    const e = error as { stderr?: string; message: string };
    throw new Error(
      `running as root, pushpop runs the embedded PostgreSQL as the user postgres (PostgreSQL refuses to run as root), but there is no such user and it could not be created (${e.stderr?.trim() || e.message}). ` +
        'Fix: create the user postgres, run pushpop as another user, or set DATABASE_URL=postgres://… to use a PostgreSQL server.',
      { cause: error },
    );
  }
  const created = lookupAccount('postgres');
  if (!created)
    throw new Error(
      'useradd reported success, but the user postgres does not exist. Fix: create it, or set DATABASE_URL=postgres://… to use a PostgreSQL server.',
    );
  return created;
}

/** The fix named by every message about a data directory the embedded PostgreSQL cannot use. */
export const PLACEMENT_FIX =
  'Fix: set DATA_DIR to a directory the user postgres can reach (DATA_DIR=/var/tmp/pushpop, say), EMBEDDED_POSTGRES_ROOT to a writable directory it can reach, or DATABASE_URL=postgres://… to use a PostgreSQL server.';
/** The same for binaries out of its reach. */
const BINARIES_FIX =
  'Fix: set EMBEDDED_POSTGRES_ROOT to a writable directory the user postgres can reach, install pushpop where that user can read it, or set DATABASE_URL=postgres://… to use a PostgreSQL server.';

export function errorText(error: unknown): string {
  return (error as Error).message;
}

/**
 * Makes `EMBEDDED_POSTGRES_ROOT` (0755, owned by root) and checks that `owner` can enter it;
 * `what` says what it is for, in the message when it cannot be used.
 */
export function ensureRelocationRoot(root: string, owner: Account, what: string, fix: string): void {
  try {
    if (!existsSync(root)) {
      // The last step alone, not recursive: Node's recursive mkdir reports a read-only file system as ENOENT.
      mkdirSync(dirname(root), { recursive: true });
      mkdirSync(root, { mode: 0o755 });
      chmodSync(root, 0o755);
    }
  } catch (error) {
    throw new Error(`${what}, and ${root} cannot be created to hold it instead (${errorText(error)}). ${fix}`, { cause: error });
  }
  const blocker = firstBlocked(root, owner);
  if (blocker) throw new Error(`${what}, and cannot enter ${describeBlocker(blocker)} either, where it would go instead. ${fix}`);
}

/**
 * The binaries `owner` runs: those of the npm package, or, when `owner` cannot reach them (a
 * clone under `/root`), a copy under the relocation root made once per package version.
 */
export function reachableBinaries(bin: Binaries, owner: Account, relocationRoot: string, logger: Logger): Binaries {
  const nativeDir = dirname(dirname(bin.postgres));
  const blocker = ['bin', 'lib', 'share'].map((d) => firstBlocked(join(nativeDir, d), owner)).find(Boolean);
  if (!blocker) return bin;
  const version = (JSON.parse(readFileSync(join(nativeDir, '..', 'package.json'), 'utf8')) as { version: string }).version;
  const copy = join(relocationRoot, `postgresql-${version}`);
  const why = `the user postgres that runs PostgreSQL cannot enter ${describeBlocker(blocker)} on the way to its binaries in ${nativeDir}`;
  if (!existsSync(join(copy, 'bin', 'postgres'))) {
    ensureRelocationRoot(relocationRoot, owner, why, BINARIES_FIX);
    const started = performance.now();
    // Copied aside and renamed into place, so a half-made copy is never used.
    const scratch = `${copy}.${process.pid}.tmp`;
    try {
      rmSync(scratch, { recursive: true, force: true });
      cpSync(nativeDir, scratch, { recursive: true, verbatimSymlinks: true });
      if (!existsSync(copy)) renameSync(scratch, copy);
    } catch (error) {
      throw new Error(`${why}, and they cannot be copied to ${copy} (${errorText(error)}). ${BINARIES_FIX}`, { cause: error });
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
    logger.log(`Copied the PostgreSQL binaries to ${copy} in ${Math.round(performance.now() - started)} ms: ${why}`);
  }
  const copyBlocker = firstBlocked(join(copy, 'bin'), owner);
  if (copyBlocker) throw new Error(`${why}, nor ${describeBlocker(copyBlocker)} of their copy. ${BINARIES_FIX}`);
  return { postgres: join(copy, 'bin', 'postgres'), initdb: join(copy, 'bin', 'initdb') };
}
