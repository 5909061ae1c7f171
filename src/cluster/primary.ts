import cluster, { type Worker } from 'node:cluster';
import { Logger } from '@nestjs/common';
import { AggregatorRegistry } from 'prom-client';
import { METRICS_ANSWER, METRICS_REQUEST, WORKER_READY, type WorkerMessage } from './messages.js';

/** How long the workers may take to stop after SIGTERM/SIGINT before they are killed. */
const STOP_TIMEOUT_MS = 25_000;
/** Wait before forking a worker again after one died, so a worker that cannot start does not spin. */
const RESTART_DELAY_MS = 1000;

/**
 * The primary process of `WORKERS` > 1 (node:cluster): it serves no request itself. It forks
 * the first worker alone and waits until it is ready, so that the schema's migrations run once,
 * then the others; forks a worker again when one dies; answers the workers' requests for the
 * metrics of all of them (prom-client's AggregatorRegistry, so that a scrape of any worker sees
 * the whole service); and on SIGTERM/SIGINT stops every worker gracefully and exits 0 when they
 * all did. Node's cluster shares the listening socket among the workers.
 */
export async function runPrimary(workers: number): Promise<void> {
  const logger = new Logger('pushpop');
  const aggregator = new AggregatorRegistry();
  let stopping = false;
  const ready = new Set<Worker>();

  cluster.on('message', (worker: Worker, message: WorkerMessage) => {
    if (message?.type === WORKER_READY) ready.add(worker);
    if (message?.type === METRICS_REQUEST) {
      aggregator.clusterMetrics().then(
        (body) => worker.isConnected() && worker.send({ type: METRICS_ANSWER, id: message.id, body }),
        (error: unknown) => worker.isConnected() && worker.send({ type: METRICS_ANSWER, id: message.id, error: String(error) }),
      );
    }
  });

  const fork = (): Promise<Worker> =>
    new Promise((resolve, reject) => {
      const worker = cluster.fork();
      const onMessage = (message: WorkerMessage): void => {
        if (message?.type !== WORKER_READY) return;
        worker.off('exit', onExit);
        worker.off('message', onMessage);
        resolve(worker);
      };
      const onExit = (code: number | null, signal: string | null): void => {
        worker.off('message', onMessage);
        reject(new Error(`worker ${worker.process.pid} exited before it was ready (${signal ?? `code ${code}`})`));
      };
      worker.on('message', onMessage);
      worker.once('exit', onExit);
    });

  cluster.on('exit', (worker, code, signal) => {
    const wasReady = ready.delete(worker);
    if (stopping || !wasReady) return;
    logger.warn(`Worker ${worker.process.pid} died (${signal ?? `code ${code}`}); starting another`);
    const again = (): void => {
      if (stopping) return;
      fork().then(
        (replacement) => logger.log(`Worker ${replacement.process.pid} ready (in place of ${worker.process.pid})`),
        (error: unknown) => {
          logger.error(error instanceof Error ? error.message : String(error));
          setTimeout(again, RESTART_DELAY_MS);
        },
      );
    };
    setTimeout(again, RESTART_DELAY_MS);
  });

  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    logger.log(`${signal}: stopping ${Object.keys(cluster.workers ?? {}).length} worker(s)`);
    const live = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined);
    let failed = false;
    const exits = live.map(
      (worker) =>
        new Promise<void>((resolve) => {
          if (worker.isDead()) return resolve();
          // A worker still starting has no handler yet: SIGTERM ends it as it should.
          worker.once('exit', (code, signal) => {
            if (code !== 0 && signal !== 'SIGTERM') failed = true;
            resolve();
          });
          worker.process.kill('SIGTERM');
        }),
    );
    setTimeout(() => {
      logger.error(`Workers took longer than ${STOP_TIMEOUT_MS / 1000} s to stop; killing them`);
      for (const worker of live) if (!worker.isDead()) worker.process.kill('SIGKILL');
      process.exit(1);
    }, STOP_TIMEOUT_MS).unref();
    void Promise.all(exits).then(() => {
      logger.log('Stopped');
      process.exit(failed ? 1 : 0);
    });
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));

  logger.log(`Starting ${workers} workers`);
  await fork();
  await Promise.all(Array.from({ length: workers - 1 }, fork));
  logger.log(`${workers} workers ready`);
}
