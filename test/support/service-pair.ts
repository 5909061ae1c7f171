import { ItemNotifications } from '../../src/database/item-notifications.js';
import { closeWithin } from './lock-helpers.js';
import { until } from './queue-helpers.js';
import { removeDataDir, sharedDatabase, startService, type EnvOverrides, type TestService } from './service.js';

/**
 * Two services on one database, as two processes of a deployment: A owns the database (its
 * embedded server, or its schema on TEST_DATABASE_URL), B uses A's.
 */
export interface ServicePair {
  A: TestService;
  B: TestService;
}

/** Starts another service on `owner`'s database, with `env` and a pool of 4 connections. */
export function startAlongside(owner: TestService, env: EnvOverrides = {}): Promise<TestService> {
  return startService({ env: { ...env, ...sharedDatabase(owner), DB_POOL_SIZE: '4' } });
}

/**
 * Starts A with `env` (and `ownerEnv`, e.g. the DATABASE_URL of a server the test runs itself),
 * then B on A's database with `env`, and waits (up to 10 s) until both listen for the
 * database's notifications, so that a push through one can wake a long poll in the other.
 * If B does not start, A is closed again.
 */
export async function startServicePair(options: { env?: EnvOverrides; ownerEnv?: EnvOverrides } = {}): Promise<ServicePair> {
  const A = await startService({ env: { ...options.env, ...options.ownerEnv } });
  let B: TestService;
  try {
    B = await startAlongside(A, options.env);
  } catch (error) {
    await closeServicePair({ A });
    throw error;
  }
  await until(() => A.app.get(ItemNotifications).listening && B.app.get(ItemNotifications).listening, 10_000);
  return { A, B };
}

/**
 * Closes B, then A (on the embedded database A owns the server B uses), each given up on after
 * 15 s (a turn stuck in a hung query keeps its connection, and close() would wait forever), and
 * removes their data directories. Either may be missing (it never started).
 */
export async function closeServicePair({ A, B }: Partial<ServicePair>): Promise<void> {
  if (B) await closeWithin(() => B.close());
  if (A) await closeWithin(() => A.close());
  if (B) removeDataDir(B.dataDir);
  if (A) removeDataDir(A.dataDir);
}
