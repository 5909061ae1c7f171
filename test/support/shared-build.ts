import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PARTS, partInputs } from '../../scripts/build-if-stale.mjs';

/** Shared builds not used for this long are removed (by the next test that builds). */
const KEPT_MS = 24 * 3_600_000;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * A build of one part of the repository (as scripts/build-if-stale.mjs lists them) for tests
 * that run it in child processes, made once per set of inputs and shared by every test file of
 * this run and of later runs.
 *
 * It lives under `root` in a directory named by the digest of the part's inputs (the content of
 * each input file and the build command; not the Node version, as neither tsc's output nor the
 * client's build depends on it, so the Node 20 and Node 24 passes of CI share one). Its files
 * never change once made, as changed inputs give another directory: no child can see them
 * change under it, and nobody's `npm run build` of dist/ can pull them away. The first file that
 * asks builds it (into a scratch directory renamed into place when complete, so a directory
 * named by a digest is always a whole build); the others wait for it, through a lock directory
 * that holds the builder's pid (the lock of a process that is gone is taken over). Builds no test
 * used for a day are removed. Returns the build's directory.
 */
export async function sharedBuild(options: {
  /** The repository root. */
  repoRoot: string;
  /** The part's output directory in PARTS (its inputs name the build). */
  part: string;
  /** Where the builds go (each under `shared-<digest>`). */
  root: string;
  /** A file that a complete build has, relative to it. */
  check: string;
  /** Builds the part into `outDir` (which exists and is empty). */
  build: (outDir: string) => Promise<void>;
}): Promise<string> {
  const { root } = options;
  mkdirSync(root, { recursive: true });
  removeLeftovers(root);
  const part = PARTS.find((p) => p.output === options.part);
  if (!part) throw new Error(`no part with output ${options.part} in scripts/build-if-stale.mjs`);
  const name = `shared-${partInputs(options.repoRoot, part, 0).digest.slice(0, 24)}`;
  const dir = join(root, name);
  const lock = `${dir}.lock`;
  const ready = (): string => {
    // Its age is when it was last used.
    const now = new Date();
    utimesSync(dir, now, now);
    return dir;
  };
  // Waits as long as the builder lives (its build has a time limit; the test's hook has one too).
  for (;;) {
    if (existsSync(join(dir, options.check))) return ready();
    if (takeLock(lock)) break;
    await sleep(200);
  }
  try {
    if (existsSync(join(dir, options.check))) return ready();
    removeUnused(root, name);
    const outDir = mkdtempSync(join(root, `${process.pid}-`));
    try {
      await options.build(outDir);
      renameSync(outDir, dir);
    } finally {
      rmSync(outDir, { recursive: true, force: true });
    }
    return ready();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** Scratch directories (and files beside them) of builds whose process is gone (killed, or filtered before its cleanup ran). */
function removeLeftovers(root: string): void {
  for (const entry of readdirSync(root)) {
    const pid = Number(/^(\d+)-/.exec(entry)?.[1]);
    if (pid && pid !== process.pid && !isAlive(pid)) rmSync(join(root, entry), { recursive: true, force: true });
  }
}

/** Removes the shared builds no test used for a day, other than `keep`. */
function removeUnused(root: string, keep: string): void {
  for (const entry of readdirSync(root)) {
    if (!entry.startsWith('shared-') || entry === keep) continue;
    try {
      if (Date.now() - statSync(join(root, entry)).mtimeMs > KEPT_MS) rmSync(join(root, entry), { recursive: true, force: true });
    } catch {
      // removed meanwhile
    }
  }
}

/** Takes the lock directory `lock` for this process; false while a live process holds it (a dead holder's lock is taken over). */
function takeLock(lock: string): boolean {
  try {
    mkdirSync(lock);
    writeFileSync(join(lock, 'pid'), String(process.pid));
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  let holder: number;
  try {
    holder = Number(readFileSync(join(lock, 'pid'), 'utf8'));
  } catch {
    // being written (or removed) just now: ask again later
    return false;
  }
  if (holder > 0 && !isAlive(holder)) rmSync(lock, { recursive: true, force: true });
  return false;
}
