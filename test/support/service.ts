import type { Tracing } from '../../src/telemetry/tracing.js';
import { mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import request from 'supertest';
import type TestAgent from 'supertest/lib/agent.js';
import { createApp } from '../../src/bootstrap.js';
import { DatabaseProvider } from '../../src/database/database.provider.js';
import { EmbeddedPostgres, embeddedLayout } from '../../src/database/embedded-postgres.js';
import { afterAll, beforeAll } from 'vitest';
import { QueueEvents } from '../../src/queue/runtime/queue-events.js';
import { until } from './queue-helpers.js';
import type { Environment } from '../../src/config/environment.js';

export type EnvOverrides = Partial<Record<keyof Environment, string>>;

/** Which database the tests run on: the PostgreSQL at TEST_DATABASE_URL, else the embedded PostgreSQL. */
export const databaseKind = process.env.TEST_DATABASE_URL ? 'postgres' : 'embedded';

/**
 * The database settings of a service under test: on TEST_DATABASE_URL each data directory gets
 * a schema of its own (the same one again when a test restarts a service on it), so test files
 * sharing one PostgreSQL never see each other's queues, locks or sweeps.
 */
export function testDatabase(dataDir: string): EnvOverrides {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) return {};
  return {
    DATABASE_URL: url,
    DATABASE_SCHEMA: `t_${basename(dataDir)
      .toLowerCase()
      .replace(/[^a-z0-9]/g, '_')}`,
  };
}

/** The settings that make another service use `svc`'s database (its embedded server, or its schema on TEST_DATABASE_URL). */
export function sharedDatabase(svc: TestService): EnvOverrides {
  return {
    DATABASE_URL: svc.app.get(DatabaseProvider).url,
    ...(process.env.TEST_DATABASE_URL ? { DATABASE_SCHEMA: testDatabase(svc.dataDir).DATABASE_SCHEMA } : {}),
  };
}

/** A running pushpop on a loopback port. */
export interface TestService {
  app: NestFastifyApplication;
  url: string;
  http: TestAgent;
  dataDir: string;
  close(): Promise<void>;
}

/** Resolves once `count` long polls of `svc` wait on `queueId` (their first look done); fails after 10 s. */
export async function pollsWaitingOn(svc: TestService, queueId: string, count = 1): Promise<void> {
  const events = svc.app.get(QueueEvents);
  if (!(await until(() => events.waitingQueues().includes(queueId) && events.waiting >= count, 10_000))) {
    throw new Error(`${count} long poll(s) on ${queueId} were not waiting within 10 s (${events.waiting} waiting in all)`);
  }
}

/** A fresh data directory for the embedded database (removed by {@link removeDataDir}). */
export function makeDataDir(): string {
  return mkdtempSync(join(tmpdir(), 'pushpop-test-'));
}

/**
 * Removes a data directory, and the cluster its pointer names when it lives elsewhere. An
 * embedded PostgreSQL still running there (its service was killed with SIGKILL and never
 * restarted) is stopped first (immediate shutdown), so tests leave no server behind.
 */
export function removeDataDir(dir: string): void {
  const layout = embeddedLayout(dir);
  try {
    const pid = Number(readFileSync(join(layout.pgdata, 'postmaster.pid'), 'utf8').split('\n')[0]);
    // Only a PostgreSQL of this directory (its working directory), never a process that reused the pid.
    if (pid > 0 && readlinkSync(`/proc/${pid}/cwd`) === layout.pgdata) process.kill(pid, 'SIGQUIT');
  } catch {
    // no server there
  }
  if (layout.relocated) rmSync(layout.home, { recursive: true, force: true });
  rmSync(dir, { recursive: true, force: true });
}

/**
 * Starts the whole service as `npm start` does (Swagger UI only with `docs`), on the embedded PostgreSQL under `dataDir` or on
 * TEST_DATABASE_URL. Queue ids in tests should come from {@link uniqueQueueId}, so files
 * sharing one PostgreSQL never see each other's queues.
 */
export async function startService(options: { dataDir?: string; env?: EnvOverrides; docs?: boolean; tracing?: Tracing } = {}): Promise<TestService> {
  const dataDir = options.dataDir ?? makeDataDir();
  const env: EnvOverrides = { DATA_DIR: dataDir, LOG_LEVEL: 'error', ...testDatabase(dataDir), ...options.env };
  const app = await createApp(env, options.docs ?? false, options.tracing);
  await app.listen(0, '127.0.0.1');
  try {
    await app.get(DatabaseProvider).ready;
  } catch (error) {
    await app.close();
    throw error;
  }
  const address = app.getHttpServer().address() as { port: number };
  const url = `http://127.0.0.1:${address.port}`;
  return {
    app,
    url,
    http: request(url),
    dataDir,
    close: async () => {
      await app.close();
    },
  };
}

/** A queue id no other test uses. */
export function uniqueQueueId(label = 'q'): string {
  return `${label}-${randomBytes(6).toString('hex')}`;
}

/**
 * A service on a private PostgreSQL server the test starts and stops itself (never the
 * machine's shared one), through DATABASE_URL as any external server: for tests that take the
 * database away. Registers the suite's `beforeAll` (server, then service) and `afterAll`.
 */
export function serviceOnPrivateDatabase(): { readonly database: EmbeddedPostgres; service(): TestService } {
  const serverDir = makeDataDir();
  const database = EmbeddedPostgres.prepare(serverDir);
  let svc: TestService | undefined;
  beforeAll(async () => {
    await database.start();
    svc = await startService({ env: { DATABASE_URL: database.url, LOG_LEVEL: 'error' } });
  }, 120_000);
  afterAll(async () => {
    await svc?.close();
    await database.stop();
    if (svc) removeDataDir(svc.dataDir);
    removeDataDir(serverDir);
  });
  return {
    database,
    service: () => {
      if (!svc) throw new Error('the service on the private database has not started');
      return svc;
    },
  };
}
