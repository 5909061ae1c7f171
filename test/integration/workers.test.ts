import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildService, sharedChildDatabase, startChildService, type ChildService, type ServiceBuild } from '../support/child-service.js';
import { range, until } from '../support/queue-helpers.js';
import { databaseKind, makeDataDir, removeDataDir } from '../support/service.js';

/**
 * `WORKERS=2`: a primary process and two workers on one port (node:cluster). Items pushed and
 * popped through whichever worker takes the connection come out exactly once; `/metrics` of any
 * worker counts the pushes of both; a worker killed with SIGKILL is replaced; SIGTERM to the
 * primary stops them all and exits 0.
 */

/** The processes whose parent is `pid` (the primary's workers). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out.sort((a, b) => a - b);
}

async function post(url: string, path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  // A connection of its own per request, so that the cluster spreads them over the workers.
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', connection: 'close' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(20_000),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe(`WORKERS=2 (${databaseKind})`, () => {
  const ownerDir = makeDataDir();
  const workersDir = makeDataDir();
  let build: ServiceBuild | undefined;
  let owner: ChildService | undefined;
  let service: ChildService | undefined;

  beforeAll(async () => {
    build = await buildService();
    // The database's owner (the embedded server, or the schema on TEST_DATABASE_URL): several
    // workers need a DATABASE_URL, which the owner's database gives them.
    owner = await startChildService({ build, dataDir: ownerDir });
    service = await startChildService({ build, dataDir: workersDir, env: { ...sharedChildDatabase(ownerDir), WORKERS: '2', LOG_LEVEL: 'log' } });
    expect(await until(() => service!.output().includes('2 workers ready'), 60_000, 50)).toBe(true);
  }, 240_000);

  afterAll(async () => {
    if (service) for (const pid of childrenOf(service.child.pid!)) process.kill(pid, 'SIGKILL');
    await service?.kill('SIGKILL');
    await owner?.kill('SIGKILL');
    build?.remove();
    removeDataDir(ownerDir);
    removeDataDir(workersDir);
  });

  it('serves from two worker processes: every item popped exactly once, /metrics counts both workers', async () => {
    const svc = service!;
    expect(childrenOf(svc.child.pid!)).toHaveLength(2);
    const q = `workers-${Date.now()}`;
    const n = 200;
    const pushes = await Promise.all(range(n).map((i) => post(svc.url, `/queue/${q}/push`, { item: { i } })));
    expect(pushes.every((r) => r.status === 200)).toBe(true);

    const popped: number[] = [];
    for (;;) {
      const answers = await Promise.all(range(8).map(() => post(svc.url, `/queue/${q}/pop?depth=10`, {})));
      for (const a of answers) {
        expect(a.status).toBe(200);
        for (const item of a.body.items as { i: number }[]) popped.push(item.i);
      }
      if (answers.every((a) => (a.body.items as unknown[]).length === 0)) break;
    }
    expect(popped.sort((a, b) => a - b)).toEqual(range(n));

    // The primary aggregates: whichever worker answers, the figure is both workers' together.
    for (const _ of range(4)) {
      const metrics = await (await fetch(`${svc.url}/metrics`, { headers: { connection: 'close' } })).text();
      expect(metrics).toMatch(new RegExp(`^pushpop_items_pushed_total ${n}$`, 'm'));
      expect(metrics).toMatch(new RegExp(`^pushpop_items_popped_total ${n}$`, 'm'));
    }
  });

  it('replaces a worker killed with SIGKILL, and keeps serving meanwhile', async () => {
    const svc = service!;
    const [victim, survivor] = childrenOf(svc.child.pid!);
    process.kill(victim, 'SIGKILL');
    // Connections the primary handed to the worker before it saw it die die with it, as on any
    // SIGKILL of a server; from then on the survivor takes them all until the replacement is up.
    expect(await until(() => /Worker \d+ died \(SIGKILL\); starting another/.test(svc.output()), 10_000, 20)).toBe(true);
    const q = `workers-kill-${Date.now()}`;
    const answers = await Promise.all(range(20).map((i) => post(svc.url, `/queue/${q}/push`, { item: { i } })));
    expect(answers.map((a) => a.status)).toEqual(range(20).map(() => 200));
    expect(await until(() => new RegExp(`Worker \\d+ ready \\(in place of ${victim}\\)`).test(svc.output()), 30_000, 50)).toBe(true);
    expect(childrenOf(svc.child.pid!)).toHaveLength(2);
    expect(childrenOf(svc.child.pid!)).not.toContain(victim);
    expect(childrenOf(svc.child.pid!)).toContain(survivor);
  });

  it('stops every worker on SIGTERM and exits 0', async () => {
    const svc = service!;
    const workers = childrenOf(svc.child.pid!);
    expect(workers).toHaveLength(2);
    const { code, signal } = await svc.kill('SIGTERM');
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    for (const pid of workers) expect(() => process.kill(pid, 0)).toThrow();
  });

  it('refuses WORKERS above 1 without DATABASE_URL, at once and by name', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, WORKERS: '2', DATA_DIR: workersDir, PORT: '0' };
    delete env.DATABASE_URL;
    const child = spawn(process.execPath, [build!.mainJs], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(1);
    expect(output).toContain('WORKERS=2: several workers need DATABASE_URL');
  });
});
