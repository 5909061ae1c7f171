/** What a worker and the primary of `WORKERS` > 1 say to each other over the cluster's IPC channel. */
export const WORKER_READY = 'pushpop:ready';
export const METRICS_REQUEST = 'pushpop:metrics';
export const METRICS_ANSWER = 'pushpop:metrics-answer';

export type WorkerMessage = { type: typeof WORKER_READY } | { type: typeof METRICS_REQUEST; id: number } | undefined;
export type PrimaryMessage = { type: typeof METRICS_ANSWER; id: number; body?: string; error?: string };
