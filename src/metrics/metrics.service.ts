import { Injectable, OnModuleInit } from '@nestjs/common';
import { collectDefaultMetrics, Counter, Histogram, type Registry } from 'prom-client';
import { clusterMetrics, isClusterWorker, shareMetrics } from '../cluster/worker.js';
import { DEFAULT_METRICS_PREFIX, METRICS } from './metric-names.js';
import { LATENCY_BUCKETS, MetricsRegistry } from './metrics-registry.js';

/**
 * How often the event loop's lag is sampled (`nodejs_eventloop_lag_*`), in ms: ten samples a
 * second, 150 between two scrapes 15 s apart.
 */
const EVENT_LOOP_SAMPLE_MS = 100;

/**
 * The app's registry as `/metrics` serves it: the HTTP operation metrics (fed by Fastify's
 * response hooks, {@link OperationMetrics}), Node.js's process metrics, and whatever the other
 * modules registered through {@link MetricCollectors} (each module its own).
 */
@Injectable()
export class MetricsService implements OnModuleInit {
  readonly registry: Registry;
  readonly operations: Counter;
  readonly operationDuration: Histogram;

  constructor(metricsRegistry: MetricsRegistry) {
    const registers = [(this.registry = metricsRegistry.registry)];
    this.operations = new Counter({ ...METRICS.operations, labelNames: METRICS.operations.labels, registers });
    this.operationDuration = new Histogram({ ...METRICS.operationDuration, labelNames: METRICS.operationDuration.labels, buckets: LATENCY_BUCKETS, registers });
  }

  onModuleInit(): void {
    // The event loop's lag is sampled every EVENT_LOOP_SAMPLE_MS: prom-client's 10 ms default
    // wakes an idle service 100 times a second for it alone.
    collectDefaultMetrics({ register: this.registry, prefix: DEFAULT_METRICS_PREFIX, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
    // prom-client's summed gauges end in `_total`, which Prometheus reserves for counters
    // (promtool check metrics refuses them); the per-type gauges of the same name hold the numbers.
    for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) {
      this.registry.removeSingleMetric(DEFAULT_METRICS_PREFIX + name);
    }
    if (isClusterWorker()) shareMetrics(this.registry);
  }

  /** The exposition in Prometheus text format. */
  async exposition(): Promise<{ contentType: string; body: string }> {
    // One of several workers answers for all of them.
    const body = isClusterWorker() ? await clusterMetrics() : await this.registry.metrics();
    return { contentType: this.registry.contentType, body };
  }
}
