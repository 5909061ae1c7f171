import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Capabilities, type Consumer, PushpopClient } from '@pushpop/client';
import ts from 'typescript';
import { afterAll, beforeAll } from 'vitest';
import { repoRoot } from '../support/child-service.js';
import { removeDataDir, startService, type TestService } from '../support/service.js';
import { sharedBuild } from '../support/shared-build.js';

/**
 * What the service has: the contract's fourth additions (the committed openapi.json says so:
 * consumer-failures.test.ts). The service the tests start in-process documents its DTOs' fields
 * without the Nest CLI's OpenAPI plugin, so its own document does not show them: clients that
 * must use them are told.
 */
export const FOURTH_CAPABILITIES = { lockPerItem: true, batchLocks: true, deadLetterRelease: true, acknowledgeNext: true };

/** A queue's items waiting, locked (by its lock or its shared locks) and delayed. */
export async function settledState(client: PushpopClient, queueId: string): Promise<{ count: number; locked: number; delayed: number }> {
  const info = await client.queue(queueId).info();
  return { count: info.count, locked: info.lock?.item_count ?? info.locks?.item_count ?? 0, delayed: info.delayed };
}

/** A private build of libs/client (what `npm pack` ships), for child processes. */
export interface ClientBuild {
  /** The package's entry point, to import from a child script. */
  readonly indexJs: string;
  /** The `pushpop` command. */
  readonly cliJs: string;
  remove(): void;
}

/**
 * Builds the client package into a directory of its own (under libs/client/node_modules, so its
 * dependencies resolve; see {@link sharedBuild}: made once per set of inputs, ~10 s, and shared
 * by the test files), so that no other build of dist/ can pull files from under a running
 * child. `remove()` leaves the build for the next test file.
 */
export async function buildClient(timeoutMs = 180_000): Promise<ClientBuild> {
  const out = await sharedBuild({
    repoRoot,
    part: 'libs/client/dist',
    root: join(repoRoot, 'libs/client/node_modules/.cache/pushpop-test-builds'),
    check: 'cli.js',
    build: (outDir) =>
      new Promise((resolve, reject) => {
        execFile(process.execPath, [join(repoRoot, 'libs/client/scripts/build.mjs'), '--out', outDir], { timeout: timeoutMs }, (error, stdout, stderr) => {
          if (error) reject(new Error(`building libs/client failed: ${error.message}\n${stdout}\n${stderr}`));
          else resolve();
        });
      }),
  });
  return { indexJs: join(out, 'index.js'), cliJs: join(out, 'cli.js'), remove: () => undefined };
}

/**
 * What a Consumer test file runs against, started before its tests and stopped after them: a
 * service whose lock sweep runs every 100 ms, a client of it, a private build of the client for
 * child processes, and the consumers and child processes the tests started (closed, and killed,
 * at the end). Its fields are set once the file's `beforeAll` ran.
 */
export interface ConsumerTestBed<T extends object> {
  readonly svc: TestService;
  readonly client: PushpopClient;
  readonly build: ClientBuild;
  readonly consumers: Consumer<T>[];
  readonly children: ChildProcess[];
}

/** Registers the file's `beforeAll` and `afterAll` of a {@link ConsumerTestBed}; `capabilities` tell the client what the service has. */
export function consumerTestBed<T extends object>(capabilities?: Capabilities): ConsumerTestBed<T> {
  const bed = { consumers: [] as Consumer<T>[], children: [] as ChildProcess[] } as { -readonly [K in keyof ConsumerTestBed<T>]: ConsumerTestBed<T>[K] };
  beforeAll(async () => {
    [bed.svc, bed.build] = await Promise.all([startService({ env: { LOCK_SWEEP_INTERVAL_MS: '100' } }), buildClient()]);
    bed.client = new PushpopClient({ baseUrl: bed.svc.url, ...(capabilities ? { capabilities } : {}) });
  });
  afterAll(async () => {
    for (const child of bed.children) child.kill('SIGKILL');
    await Promise.all(bed.consumers.map((c) => c.close(100)));
    await bed.svc?.close();
    if (bed.svc) removeDataDir(bed.svc.dataDir);
    bed.build?.remove();
  });
  return bed;
}

/** A Node script run as a child process of a test, its standard output gathered. */
export interface ChildScript {
  /** The non-empty lines it wrote so far. */
  lines(): string[];
  /** Kills it with SIGKILL, waits for its exit and removes the script. */
  kill(): Promise<void>;
}

/** Runs `source` (an ES module) as a child process with `PUSHPOP_URL` (the bed's service) and `env` set; the bed kills it at the end if the test did not. */
export function runChildScript<T extends object>(bed: ConsumerTestBed<T>, source: string, env: Record<string, string>): ChildScript {
  const dir = mkdtempSync(join(tmpdir(), 'pushpop-consumer-'));
  const script = join(dir, 'consumer.mjs');
  writeFileSync(script, source);
  const child = spawn(process.execPath, [script], { env: { ...process.env, PUSHPOP_URL: bed.svc.url, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  bed.children.push(child);
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return {
    lines: () => output.split('\n').filter(Boolean),
    kill: async () => {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Resolves when `check` is true; fails after `timeoutMs` with `what`. */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The TypeScript examples of libs/client/README.md (its ```ts blocks), in order. */
export function readmeExamples(): string[] {
  const readme = readFileSync(join(repoRoot, 'libs/client/README.md'), 'utf8');
  return [...readme.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((match) => match[1]);
}

/**
 * Type-checks TypeScript modules (top-level await allowed, Node's types) as a user's project
 * would, with `@pushpop/client` resolved through `paths` (the client's source) or, without them,
 * from the project's node_modules. Answers the compiler's diagnostics, formatted; with `outDir`,
 * also writes the JavaScript.
 */
export function compileExamples(files: string[], options: { paths?: Record<string, string[]>; outDir?: string } = {}): string[] {
  const compilerOptions: ts.CompilerOptions = {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2023,
    lib: ['lib.es2023.d.ts'],
    strict: true,
    skipLibCheck: true,
    types: ['node'],
    typeRoots: [join(repoRoot, 'node_modules/@types')],
    ...(options.paths ? { paths: options.paths } : {}),
    ...(options.outDir ? { outDir: options.outDir } : { noEmit: true }),
  };
  const program = ts.createProgram(files, compilerOptions);
  const emitted = program.emit();
  const diagnostics = [...ts.getPreEmitDiagnostics(program), ...emitted.diagnostics];
  const host = { getCanonicalFileName: (f: string) => f, getCurrentDirectory: () => repoRoot, getNewLine: () => '\n' };
  return diagnostics.map((d) => ts.formatDiagnostic(d, host).trim());
}
