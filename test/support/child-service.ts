import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import request from 'supertest';
import { afterAll, beforeAll } from 'vitest';
import type TestAgent from 'supertest/lib/agent.js';
import { embeddedLayout } from '../../src/database/embedded-postgres.js';
import { makeDataDir, removeDataDir, testDatabase, type EnvOverrides } from './service.js';
import { sharedBuild } from './shared-build.js';

/** The repository root (where package.json is). */
export const repoRoot = resolve(fileURLToPath(new URL('../..', import.meta.url)));

/** Where private builds go: under node_modules (git-ignored) so the build resolves the repository's packages. */
const BUILD_ROOT = join(repoRoot, 'node_modules/.cache/pushpop-test-builds');

function run(command: string, args: string[], timeoutMs: number): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    execFile(command, args, { cwd: repoRoot, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${command} ${args.join(' ')} failed (${error.message}):\n${stdout}\n${stderr}`));
      else resolvePromise();
    });
  });
}

/** A private build of the service: `node <mainJs>` runs it. */
export interface ServiceBuild {
  readonly mainJs: string;
  readonly ms: number;
  remove(): void;
}

/**
 * Builds the service as `npm run build` does (`nest build`, with the Swagger plugin of
 * nest-cli.json), but into a directory of its own (see {@link sharedBuild}: made once per set of
 * inputs, ~10-20 s, and shared by the test files), so that other people's builds of dist/ (nest
 * build deletes dist/ first) cannot pull the files from under a running child, and this build
 * cannot break theirs. The keyed-mutex library is used from its package (libs/keyed-mutex/dist),
 * built first if missing. `remove()` leaves the build for the next test file.
 */
export async function buildService(timeoutMs = 180_000): Promise<ServiceBuild> {
  const started = Date.now();
  if (!existsSync(join(repoRoot, 'libs/keyed-mutex/dist/index.js'))) await run('npm', ['run', 'build', '--workspace=@pushpop/keyed-mutex'], timeoutMs);
  const dir = await sharedBuild({
    repoRoot,
    part: 'dist',
    root: BUILD_ROOT,
    check: 'main.js',
    build: async (outDir) => {
      const tsconfig = `${outDir}.tsconfig.json`;
      writeFileSync(tsconfig, JSON.stringify({ extends: join(repoRoot, 'tsconfig.json'), compilerOptions: { outDir } }));
      try {
        await run(join(repoRoot, 'node_modules/.bin/nest'), ['build', '--path', relative(repoRoot, tsconfig)], timeoutMs);
      } finally {
        rmSync(tsconfig, { force: true });
      }
      // Under node_modules/ Node does not look further up for package.json's "type": "module".
      writeFileSync(join(outDir, 'package.json'), JSON.stringify({ type: 'module' }));
    },
  });
  return { mainJs: join(dir, 'main.js'), ms: Date.now() - started, remove: () => undefined };
}

/** A TCP port that was free a moment ago (listen on 0, read the port, close). */
export function freePort(): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolvePromise(port));
    });
  });
}

/** A pushpop running as `node main.js` (a build of src/) in a child process. */
export interface ChildService {
  readonly child: ChildProcess;
  readonly port: number;
  readonly url: string;
  readonly http: TestAgent;
  readonly dataDir: string;
  /** Everything the process wrote to stdout and stderr so far (for failure messages). */
  output(): string;
  /** Everything the process wrote to stdout alone so far. */
  stdout(): string;
  /** Resolves with the exit code / signal once the process has exited. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Sends `signal` (default SIGKILL) and waits for the process to exit. */
  kill(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * The settings that make another child service use the database of the one started on
 * `dataDir`: its embedded server (over its socket, with its password), or its schema on
 * TEST_DATABASE_URL.
 */
export function sharedChildDatabase(dataDir: string): EnvOverrides {
  if (process.env.TEST_DATABASE_URL) return testDatabase(dataDir);
  const layout = embeddedLayout(dataDir);
  const password = readFileSync(layout.passwordFile, 'utf8').trim();
  return { DATABASE_URL: `postgresql://pushpop:${password}@localhost:5432/postgres?host=${encodeURIComponent(layout.runDir)}` };
}

/**
 * Spawns `node <build.mainJs>` (see {@link buildService}) on a free loopback port, on the embedded PostgreSQL
 * under `dataDir` (or on TEST_DATABASE_URL when set), and waits until `GET /health/ready`
 * answers 200. If the process exits or is not ready within `readyTimeoutMs`,
 * it is killed and the promise rejects with its output.
 */
export async function startChildService(options: { build: ServiceBuild; dataDir: string; env?: EnvOverrides; readyTimeoutMs?: number }): Promise<ChildService> {
  const port = await freePort();
  const env: NodeJS.ProcessEnv = { ...process.env };
  // Only what this helper sets may configure the child.
  for (const key of [
    'DATABASE_URL',
    'DATABASE_SCHEMA',
    'SEGMENT_SIZE',
    'BUFFER_SEGMENTS',
    'MAX_PENDING_PER_QUEUE',
    'MAX_WAITING_POLLS',
    'DB_POOL_SIZE',
    'NODE_OPTIONS',
    'WORKERS',
  ])
    delete env[key];
  Object.assign(env, { PORT: String(port), HOST: '127.0.0.1', DATA_DIR: options.dataDir, LOG_LEVEL: 'warn' }, testDatabase(options.dataDir), options.env);

  const child = spawn(process.execPath, [options.build.mainJs], { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => {
    log += chunk.toString();
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => (log += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolvePromise) => {
    child.on('exit', (code, signal) => resolvePromise({ code, signal }));
  });
  let hasExited = false;
  void exited.then(() => (hasExited = true));

  const url = `http://127.0.0.1:${port}`;
  const service: ChildService = {
    child,
    port,
    url,
    http: request(url),
    dataDir: options.dataDir,
    output: () => log,
    stdout: () => stdout,
    exited,
    kill: async (signal = 'SIGKILL') => {
      if (!hasExited) child.kill(signal);
      return exited;
    },
  };

  const deadline = Date.now() + (options.readyTimeoutMs ?? 60_000);
  for (;;) {
    if (hasExited) {
      const { code, signal } = await exited;
      throw new Error(`pushpop child exited before it was ready (code ${code}, signal ${signal}):\n${log}`);
    }
    try {
      const res = await fetch(`${url}/health/ready`, { signal: AbortSignal.timeout(2000) });
      if (res.status === 200) return service;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await service.kill('SIGKILL');
      throw new Error(`pushpop child not ready within ${options.readyTimeoutMs ?? 60_000} ms:\n${log}`);
    }
    await sleep(100);
  }
}

/** Child services on one database for a suite: see {@link replicasOnOneDatabase}. */
export interface Replicas {
  /** The running replicas, the database's owner first (filled by the suite's `beforeAll`). */
  readonly replicas: ChildService[];
  /** Their data directories, in the same order. */
  readonly dataDirs: readonly string[];
  /** Starts replica `i` (again, after it exited) on its data directory and the shared database, and puts it in place. */
  start(i: number): Promise<ChildService>;
  /** The settings that put another service on the replicas' database (once the owner has started). */
  shared(): EnvOverrides;
}

/**
 * `count` child services (`node main.js`) on one database, all with `env`: the first owns it
 * (its embedded server, or its schema on TEST_DATABASE_URL), the others use it through
 * {@link sharedChildDatabase}. Registers the suite's `beforeAll` (the build, then the replicas
 * one after another, the owner first) and `afterAll` (each killed with SIGKILL, the owner last;
 * the data directories removed).
 */
export function replicasOnOneDatabase(count: number, env: EnvOverrides = {}): Replicas {
  const dataDirs = Array.from({ length: count }, () => makeDataDir());
  const replicas: ChildService[] = [];
  let build: ServiceBuild | undefined;
  const shared = (): EnvOverrides => sharedChildDatabase(dataDirs[0]);
  const start = async (i: number): Promise<ChildService> => {
    if (!build) throw new Error('the replicas have not been built');
    const replica = await startChildService({ build, dataDir: dataDirs[i], env: i === 0 ? env : { ...shared(), ...env } });
    replicas[i] = replica;
    return replica;
  };
  beforeAll(async () => {
    build = await buildService();
    for (let i = 0; i < count; i++) await start(i);
  }, 240_000);
  afterAll(async () => {
    for (const replica of [...replicas].reverse()) await replica?.kill('SIGKILL');
    build?.remove();
    for (const dir of dataDirs) removeDataDir(dir);
  });
  return { replicas, dataDirs, start, shared };
}
