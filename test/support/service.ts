import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import request from 'supertest';
import type TestAgent from 'supertest/lib/agent.js';
import { createApp } from '../../src/bootstrap.js';
import type { Environment } from '../../src/config/environment.js';

export type EnvOverrides = Partial<Record<keyof Environment, string>>;

/** Which database the tests run on: the PostgreSQL at TEST_DATABASE_URL, else embedded PGlite. */
export const databaseKind = process.env.TEST_DATABASE_URL ? 'postgres' : 'pglite';

/** A running pushpop on a loopback port. */
export interface TestService {
  app: NestFastifyApplication;
  url: string;
  http: TestAgent;
  dataDir: string;
  close(): Promise<void>;
}

/** A fresh data directory for the embedded database (removed by {@link removeDataDir}). */
export function makeDataDir(): string {
  return mkdtempSync(join(tmpdir(), 'pushpop-test-'));
}

export function removeDataDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/**
 * Starts the whole service as `npm start` does, on PGlite under `dataDir` or on
 * TEST_DATABASE_URL. Queue ids in tests should come from {@link uniqueQueueId}, so files
 * sharing one PostgreSQL never see each other's queues.
 */
export async function startService(options: { dataDir?: string; env?: EnvOverrides } = {}): Promise<TestService> {
  const dataDir = options.dataDir ?? makeDataDir();
  const env: EnvOverrides = { DATA_DIR: dataDir, LOG_LEVEL: 'error', ...options.env };
  if (process.env.TEST_DATABASE_URL) env.DATABASE_URL = process.env.TEST_DATABASE_URL;
  const app = await createApp(env, false);
  await app.listen(0, '127.0.0.1');
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
