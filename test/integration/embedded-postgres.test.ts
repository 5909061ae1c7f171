import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../src/bootstrap.js';
import { DatabaseProvider } from '../../src/database/database.provider.js';
import { embeddedLayout } from '../../src/database/embedded-postgres.js';
import { buildService, startChildService, type ChildService, type ServiceBuild } from '../support/child-service.js';
import { answer, until } from '../support/queue-helpers.js';
import { databaseKind, makeDataDir, removeDataDir, uniqueQueueId } from '../support/service.js';

/**
 * The zero-config database: a PostgreSQL server the service runs under DATA_DIR. These tests
 * are about that server itself, so they run only when the suite runs on the embedded database.
 */
const layoutOf = (dataDir: string): ReturnType<typeof embeddedLayout> => embeddedLayout(dataDir);
const mode = (path: string): number => statSync(path).mode & 0o777;

function postmasterPid(dataDir: string): number | undefined {
  try {
    return Number(readFileSync(join(layoutOf(dataDir).pgdata, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return undefined;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Logs in to the embedded server through its socket; resolves with the error code, or 'ok'. */
async function login(dataDir: string, password: string | undefined): Promise<string> {
  const client = new pg.Client({ host: layoutOf(dataDir).runDir, port: 5432, user: 'pushpop', database: 'postgres', password, connectionTimeoutMillis: 5000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return 'ok';
  } catch (error) {
    return (error as { code?: string }).code ?? (error as Error).message;
  } finally {
    await client.end().catch(() => undefined);
  }
}

describe.skipIf(databaseKind !== 'embedded')('embedded PostgreSQL', () => {
  describe('in process', () => {
    const dataDir = makeDataDir();
    let app: Awaited<ReturnType<typeof createApp>> | undefined;

    afterAll(async () => {
      await app?.close();
      removeDataDir(dataDir);
    });

    it('listens at once; /health/ready and queue operations answer 503 until the database is open, then 200', async () => {
      app = await createApp({ DATA_DIR: dataDir, LOG_LEVEL: 'error' }, false);
      await app.listen(0, '127.0.0.1');
      const http = request(app.getHttpServer());
      // A new cluster takes over a second to create: the first answers come while it starts.
      expect((await http.get('/health')).status).toBe(200);
      const notReady = await http.get('/health/ready');
      expect(notReady.status).toBe(503);
      const push = await http.post('/queue/early/push').send({ item: { a: 1 } });
      expect(push.status).toBe(503);
      expect(push.body).toMatchObject({ statusCode: 503, error_code: 'STORE_UNAVAILABLE' });
      expect(push.headers['retry-after']).toBeDefined();

      await app.get(DatabaseProvider).ready;
      expect((await http.get('/health/ready')).status).toBe(200);
      expect((await http.post('/queue/early/push').send({ item: { a: 1 } })).status).toBe(200);
    });

    it('is closed to other local users: no TCP port, a 0700 socket directory, a password on every login', async () => {
      const layout = layoutOf(dataDir);
      expect(mode(layout.root).toString(8)).toBe('700');
      expect(mode(layout.runDir).toString(8)).toBe('700');
      expect(mode(layout.pgdata).toString(8)).toBe('700');
      expect(mode(layout.passwordFile).toString(8)).toBe('600');
      const password = readFileSync(layout.passwordFile, 'utf8').trim();
      expect(password.length).toBeGreaterThanOrEqual(24);

      // postmaster.pid: line 4 the port, 5 the socket directory, 6 the TCP listen address (none).
      const lines = readFileSync(join(layout.pgdata, 'postmaster.pid'), 'utf8').split('\n');
      expect(lines[4]).toBe(layout.runDir);
      expect(lines[5].trim()).toBe('');

      expect(await login(dataDir, undefined)).not.toBe('ok');
      expect(await login(dataDir, 'not-the-password')).toBe('28P01');
      expect(await login(dataDir, password)).toBe('ok');
      // The service's own connection string carries the password and the socket.
      expect(app!.get(DatabaseProvider).url).toContain(encodeURIComponent(layout.runDir));
    });

    it('a second service on the same DATA_DIR is refused while the first runs, and the first keeps working', async () => {
      const second = await createApp({ DATA_DIR: dataDir, LOG_LEVEL: 'fatal' }, false);
      try {
        await expect(second.get(DatabaseProvider).ready).rejects.toThrow(/in use/);
      } finally {
        await second.close();
      }
      const http = request(app!.getHttpServer());
      expect((await http.post('/queue/early/pop')).body).toEqual({ items: [{ a: 1 }], count: 1 });
    });

    it('a DATA_DIR that cannot be made: the start fails with one message naming it and the fix', async () => {
      const blocked = await createApp({ DATA_DIR: '/etc/passwd/pushpop', LOG_LEVEL: 'fatal' }, false);
      try {
        await expect(blocked.get(DatabaseProvider).ready).rejects.toThrow(
          /^DATA_DIR \/etc\/passwd\/pushpop cannot be used \(ENOTDIR.*\)\. Fix: set DATA_DIR to .*, or DATABASE_URL=/,
        );
      } finally {
        await blocked.close();
      }
    });

    it('a normal close stops PostgreSQL cleanly', async () => {
      const pid = postmasterPid(dataDir)!;
      expect(isAlive(pid)).toBe(true);
      await app!.close();
      app = undefined;
      expect(isAlive(pid)).toBe(false);
      expect(postmasterPid(dataDir)).toBeUndefined();
    });
  });

  describe('the built service (node main.js) in a child process', () => {
    const dataDir = makeDataDir();
    const children: ChildService[] = [];
    let build: ServiceBuild | undefined;
    const start = async (readyTimeoutMs = 60_000): Promise<ChildService> => {
      const child = await startChildService({ build: build!, dataDir, env: { LOG_LEVEL: 'log' }, readyTimeoutMs });
      children.push(child);
      return child;
    };

    beforeAll(async () => {
      build = await buildService();
    }, 240_000);

    afterAll(async () => {
      for (const child of children) await child.kill('SIGKILL');
      build?.remove();
      removeDataDir(dataDir);
    });

    it('SIGKILL of the service pid alone leaves PostgreSQL running; the next start stops it, comes up within 15 s and nothing is lost', async () => {
      const q = uniqueQueueId('sigkill');
      let svc = await start();
      const items = Array.from({ length: 25 }, (_, i) => ({ item: { i }, priority: i % 3 }));
      expect((await answer(svc.http.post(`/queue/${q}/push/batch`).send({ items }))).status).toBe(200);
      const orphan = postmasterPid(dataDir)!;
      expect(orphan).toBeGreaterThan(0);

      // Only the service's own pid, as systemd or a container runtime may do.
      expect(await svc.kill('SIGKILL')).toEqual({ code: null, signal: 'SIGKILL' });
      expect(isAlive(orphan), 'PostgreSQL outlives a SIGKILL of its service').toBe(true);

      const started = Date.now();
      svc = await start(15_000);
      const seconds = (Date.now() - started) / 1000;
      expect(seconds, `ready after ${seconds} s`).toBeLessThan(15);
      expect(isAlive(orphan), 'the leftover server is stopped').toBe(false);
      expect(postmasterPid(dataDir)).not.toBe(orphan);
      expect(svc.output()).toMatch(/Recovered from an unclean stop: stopped the embedded PostgreSQL \(pid \d+\)/);
      expect(svc.output()).toMatch(/Embedded PostgreSQL [\d.]+ ready in [\d.]+ s/);
      expect(svc.output()).toMatch(/listens on unix socket .*\.s\.PGSQL\.5432 only/);

      const popped = await answer(svc.http.post(`/queue/${q}/pop?depth=100`));
      const expected = [0, 1, 2].flatMap((p) => items.filter((e) => e.priority === p).map((e) => e.item));
      expect(popped.body.items).toEqual(expected);
    });

    it('SIGTERM stops the service and its PostgreSQL cleanly (no recovery at the next start)', async () => {
      let svc = children.at(-1)!;
      const pid = postmasterPid(dataDir)!;
      expect(isAlive(pid)).toBe(true);
      svc.child.kill('SIGTERM');
      const exit = await svc.exited;
      expect(exit, svc.output()).toEqual({ code: 0, signal: null });
      expect(await until(() => !isAlive(pid), 5000), 'PostgreSQL stopped with its service').toBe(true);
      expect(postmasterPid(dataDir)).toBeUndefined();
      expect(svc.output()).toContain('Embedded PostgreSQL stopped');

      svc = await start();
      expect(svc.output()).not.toMatch(/Recovered|Recovering/);
    });

    it('a stale postmaster.pid whose pid now belongs to another process is removed, not obeyed', async () => {
      const svc = children.at(-1)!;
      svc.child.kill('SIGTERM');
      await svc.exited;
      // This test process is alive and is not a PostgreSQL of that directory.
      writeFileSync(join(layoutOf(dataDir).pgdata, 'postmaster.pid'), `${process.pid}\n${layoutOf(dataDir).pgdata}\n0\n5432\n\n\n`);
      const next = await start();
      expect(next.output()).toContain('Removed a stale postmaster.pid');
      expect((await answer(next.http.get('/health/ready'))).status).toBe(200);
    });
  });
});
