import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { PushpopClient } from '@pushpop/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../support/child-service.js';
import { databaseKind, removeDataDir, startService, type TestService } from '../support/service.js';
import { compileExamples, readmeExamples, waitFor } from './client-support.js';

const run = promisify(execFile);

/** Names and modification times of libs/client/dist, to show that packing leaves it alone. */
function distSnapshot(): string[] {
  const dist = join(repoRoot, 'libs/client/dist');
  if (!existsSync(dist)) return [];
  return readdirSync(dist, { recursive: true, encoding: 'utf8' })
    .sort()
    .map((name) => `${name} ${statSync(join(dist, name)).mtimeMs}`);
}

/**
 * What a user gets: the client packed as a tarball (`npm run tarball`, the README's command), installed into an empty
 * project with npm, the README's TypeScript examples compiled against the installed package's
 * declarations and run against the service, and its `pushpop` command.
 */
describe(`the packed client (${databaseKind})`, () => {
  const dir = mkdtempSync(join(tmpdir(), 'pushpop-package-'));
  const project = join(dir, 'project');
  let svc: TestService;
  let tarball: string;
  let examples: { source: string; js: string }[];
  let before: string[];

  beforeAll(async () => {
    before = distSnapshot();
    // The README's command, through npm (so that a lifecycle script npm runs beside it would show here).
    // Into a directory that does not exist yet, as the README's /tmp/pushpop.
    const packing = run('npm', ['run', 'tarball', '--workspace=@pushpop/client', '--', '--destination', join(dir, 'tarballs')], {
      cwd: repoRoot,
      timeout: 180_000,
    });
    let packed: string;
    [svc, { stdout: packed }] = await Promise.all([startService({ env: { LOCK_SWEEP_INTERVAL_MS: '100' } }), packing]);
    // npm prints the script's header first; the tarball's path is the script's last line.
    tarball = packed.trim().split('\n').at(-1)!.trim();
    mkdirSync(join(project, 'src'), { recursive: true });
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'pushpop-client-user', private: true, type: 'module' }));
    // From npm's cache when it has the client's dependencies (CI's `npm ci` filled it), else from the registry.
    await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--no-package-lock', tarball], { cwd: project, timeout: 180_000 });
    examples = readmeExamples().map((source, i) => {
      writeFileSync(join(project, 'src', `example-${i + 1}.ts`), source);
      return { source, js: join(project, 'out', `example-${i + 1}.js`) };
    });
  }, 300_000);
  afterAll(async () => {
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
    rmSync(dir, { recursive: true, force: true });
  });

  /** Runs a compiled example to its end against the service. */
  function runExample(js: string): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      execFile(process.execPath, [js], { cwd: project, env: { ...process.env, PUSHPOP_URL: svc.url }, timeout: 60_000 }, (error, stdout, stderr) =>
        resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
  }

  const example = (marker: string) => {
    const found = examples.find((e) => e.source.includes(marker));
    if (!found) throw new Error(`no README example with ${marker}`);
    return found.js;
  };

  it('packs without touching libs/client/dist, and installs into an empty project with its command', async () => {
    expect(distSnapshot()).toEqual(before);
    expect(tarball).toMatch(/pushpop-client-\d+\.\d+\.\d+\.tgz$/);
    const { stdout } = await run(join(project, 'node_modules/.bin/pushpop'), ['--json', 'list'], { env: { ...process.env, PUSHPOP_URL: svc.url } });
    expect(JSON.parse(stdout)).toEqual({ queues: [] });
  });

  it("compiles the README's examples against the installed package and runs them against the service", async () => {
    expect(
      compileExamples(
        examples.map((_, i) => join(project, 'src', `example-${i + 1}.ts`)),
        { outDir: join(project, 'out') },
      ),
    ).toEqual([]);

    // The worker: handles its item, then stops within a second of SIGTERM.
    const worker = spawn(process.execPath, [example("consume<Email>('emails'")], { cwd: project, env: { ...process.env, PUSHPOP_URL: svc.url } });
    let output = '';
    worker.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    worker.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    await waitFor('the email sent', () => output.includes('sent to ada@example.com (delivery 1)'), 30_000);
    const stopping = Date.now();
    worker.kill('SIGTERM');
    const code = await new Promise((resolve) => worker.once('exit', resolve));
    expect({ code, output }).toMatchObject({ code: 0 });
    expect(Date.now() - stopping).toBeLessThan(1500);

    // Failures: the good order is reserved, the bad one given back with a delay, then the job stops (drained).
    const failures = await runExample(example('new UnrecoverableError('));
    expect(failures, failures.stderr).toMatchObject({ code: 0 });
    expect(failures.stdout).toContain('reserved A-1');
    expect(failures.stderr).toContain('order 2: gave up');

    const calls = await runExample(example("queue<Order>('invoices')"));
    expect(calls, calls.stderr).toMatchObject({ code: 0 });
    expect(calls.stdout).toContain('B-2\nC-3\n');
    expect(calls.stdout).toContain('POST /queue/invoices/pop: 423 QUEUE_LOCKED');

    const producer = await runExample(example("producer<{ id: number }>('shipments'"));
    expect(producer, producer.stderr).toMatchObject({ code: 0 });
    expect(producer.stdout).toContain('duplicate: false');

    const client = new PushpopClient({ baseUrl: svc.url });
    expect((await client.queue('emails').info()).count).toBe(0);
    expect((await client.queue('shipments').info()).count).toBe(5);
    expect((await client.queue('invoices').info()).delayed).toBe(1);
  });
});
