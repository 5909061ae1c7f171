import { Injectable } from '@nestjs/common';
import { Counter, Gauge, Histogram } from 'prom-client';
import { Clock } from '../common/clock.js';
import { DatabaseProvider } from '../database/database.provider.js';
import { MetricCollectors, type MetricDefinition, type Observe } from './metric-collectors.js';
import { LATENCY_BUCKETS, MetricsRegistry } from './metrics-registry.js';

/** The counts read from the database are refreshed at most this often. */
const STORED_COUNT_TTL_MS = 10_000;

/** {@link MetricCollectors} on the app's prom-client registry: what a module registers becomes a metric of `/metrics`. */
@Injectable()
export class RegistryCollectors extends MetricCollectors {
  constructor(
    private readonly metrics: MetricsRegistry,
    private readonly clock: Clock,
    private readonly db: DatabaseProvider,
  ) {
    super();
  }

  counter(metric: MetricDefinition, read: () => number | Readonly<Record<string, number>>): void {
    const label = metric.labels?.[0];
    new Counter({
      name: metric.name,
      help: metric.help,
      labelNames: metric.labels ?? [],
      registers: [this.metrics.registry],
      collect(this: Counter) {
        this.reset();
        const value = read();
        if (typeof value === 'number') this.inc(value);
        else for (const [labelValue, n] of Object.entries(value)) this.inc({ [label!]: labelValue }, n);
      },
    });
  }

  gauge(metric: MetricDefinition, read: () => number | Promise<number>, aggregator: 'sum' | 'max' | 'min' = 'sum'): void {
    new Gauge({
      name: metric.name,
      help: metric.help,
      aggregator,
      registers: [this.metrics.registry],
      async collect(this: Gauge) {
        this.set(await read());
      },
    });
  }

  storedCount(metric: MetricDefinition, read: () => Promise<number>): void {
    const cached = { value: 0, at: 0 };
    this.gauge(
      metric,
      async () => {
        if (this.clock.now() - cached.at > STORED_COUNT_TTL_MS) {
          cached.value = this.db.isReady ? await read().catch(() => cached.value) : cached.value;
          cached.at = this.clock.now();
        }
        return cached.value;
      },
      'max',
    );
  }

  histogram(metric: MetricDefinition): Observe {
    const histogram = new Histogram({
      name: metric.name,
      help: metric.help,
      labelNames: metric.labels ?? [],
      buckets: LATENCY_BUCKETS,
      registers: [this.metrics.registry],
    });
    return (seconds, labels) => (labels ? histogram.observe(labels, seconds) : histogram.observe(seconds));
  }
}
