import cluster from 'node:cluster';
import { AggregatorRegistry, type Registry } from 'prom-client';
import { METRICS_ANSWER, METRICS_REQUEST, WORKER_READY, type PrimaryMessage } from './messages.js';

/** How long a worker waits for the primary's aggregated metrics. */
const METRICS_TIMEOUT_MS = 6000;

/** Whether this process is one of several workers (`WORKERS` > 1), not the whole service. */
export const isClusterWorker = (): boolean => cluster.isWorker;

/** Tells the primary this worker serves requests (the next worker may start). */
export function announceReady(): void {
  if (cluster.isWorker) process.send?.({ type: WORKER_READY });
}

/** Lets the primary read `registry` when it aggregates the workers' metrics. */
export function shareMetrics(registry: Registry): void {
  // The constructor adds prom-client's listener for the primary's requests (once per process).
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries([registry]);
}

let nextId = 0;

/** The metrics of every worker, aggregated by the primary (prom-client's exposition). */
export function clusterMetrics(): Promise<string> {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    const onMessage = (message: PrimaryMessage): void => {
      if (message?.type !== METRICS_ANSWER || message.id !== id) return;
      clearTimeout(timer);
      process.off('message', onMessage);
      if (message.error !== undefined) reject(new Error(`the primary could not aggregate the workers' metrics: ${message.error}`));
      else resolve(message.body ?? '');
    };
    const timer = setTimeout(() => {
      process.off('message', onMessage);
      reject(new Error('the primary did not answer with the metrics'));
    }, METRICS_TIMEOUT_MS);
    process.on('message', onMessage);
    process.send?.({ type: METRICS_REQUEST, id });
  });
}
