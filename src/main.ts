import 'reflect-metadata';
import cluster from 'node:cluster';
import { setFlagsFromString } from 'node:v8';
import { Logger } from '@nestjs/common';
import { createApp } from './bootstrap.js';
import { serviceLogger } from './common/logging.js';
import { AppConfig } from './config/app-config.js';
import { EnvironmentError, parseEnvironment } from './config/environment.js';
import { runPrimary } from './cluster/primary.js';
import { announceReady } from './cluster/worker.js';
import { DatabaseProvider } from './database/database.provider.js';
import { startTracing } from './telemetry/tracing.js';

/**
 * How far V8 lets the old generation grow past what survived its last full collection before
 * the next one, in percent (V8's own factor is up to 300% on a small heap). Items of batches in
 * flight live long enough to be promoted, then die: with V8's factor a bulk load of a million
 * items grew the resident memory by 50 MB of such garbage between 100,000 and 1,000,000 items,
 * with 50% by 8 MB, at one full collection every 2 s of loading (`bench/depth-pairs.mjs`,
 * docs/performance.md). Set before anything is allocated; V8 reads it at every full collection.
 */
const HEAP_GROWING_PERCENT = 50;
setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);

/** How long a graceful shutdown may take before the process gives up on it and exits with 1. */
const SHUTDOWN_TIMEOUT_MS = 20_000;

async function main(): Promise<void> {
  // Before the app: the OpenTelemetry SDK is loaded only when the OTEL_* variables ask for traces.
  const app = await createApp({}, true, await startTracing(process.env));
  const { PORT, HOST } = app.get(AppConfig).env;
  const logger = new Logger('pushpop');
  // Graceful shutdown: waiting long polls are answered, the HTTP server stops accepting and
  // lets requests in flight (and so their turns) finish, then the pool closes and the embedded
  // database stops; exit 0. Nest's own signal hooks would re-raise the signal (exit 143).
  const shutdown = (signal: string): void => {
    logger.log(`${signal}: shutting down`);
    setTimeout(() => {
      logger.error(`Shutdown took longer than ${SHUTDOWN_TIMEOUT_MS / 1000} s; exiting`);
      process.exit(1);
    }, SHUTDOWN_TIMEOUT_MS).unref();
    app.close().then(
      () => {
        logger.log('Stopped');
        process.exit(0);
      },
      (error: unknown) => {
        logger.error(`Shutdown failed: ${error instanceof Error ? error.message : String(error)}`);
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
  // Listen while the database opens: /health answers at once, /health/ready once it is open.
  await app.listen(PORT, HOST);
  logger.log(`Listening on http://${HOST}:${PORT} (Swagger UI at /docs)`);
  try {
    await app.get(DatabaseProvider).ready;
  } catch (error) {
    logger.error(`The database could not be opened: ${error instanceof Error ? error.message : String(error)}`);
    await app.close();
    process.exit(1);
  }
  logger.log('Ready');
  announceReady();
}

/** The service in this process, or (`WORKERS` > 1) the primary of that many worker processes. */
async function start(): Promise<void> {
  const { WORKERS, LOG_LEVEL, LOG_FORMAT } = parseEnvironment(process.env);
  if (WORKERS > 1 && cluster.isPrimary) {
    // The primary's own lines in the format and at the level of its workers' (no app sets them here).
    const logger = serviceLogger(LOG_LEVEL, LOG_FORMAT);
    if (logger) Logger.overrideLogger(logger);
    await runPrimary(WORKERS);
  } else await main();
}

start().catch((error: unknown) => {
  if (error instanceof EnvironmentError) {
    console.error(error.message);
  } else {
    console.error(error);
  }
  process.exit(1);
});
