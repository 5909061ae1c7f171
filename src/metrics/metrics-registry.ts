import { Injectable } from '@nestjs/common';
import { Histogram, Registry } from 'prom-client';
import type { RuntimeObserver } from '../queue/runtime/runtime-observer.js';
import { METRICS } from './metric-names.js';

export const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25];

/** The app's Prometheus registry: one per app, so several apps in one process never share state. */
@Injectable()
export class MetricsRegistry {
  readonly registry = new Registry();
}

/** The runtime's timings as histograms: the observer the runtime is given at construction. */
@Injectable()
export class RuntimeHistograms implements RuntimeObserver {
  private readonly storeDuration: Histogram<'outcome'>;
  private readonly loadDuration: Histogram;

  constructor({ registry }: MetricsRegistry) {
    this.storeDuration = new Histogram({ ...METRICS.storeDuration, labelNames: METRICS.storeDuration.labels, buckets: LATENCY_BUCKETS, registers: [registry] });
    this.loadDuration = new Histogram({ ...METRICS.segmentLoadDuration, buckets: LATENCY_BUCKETS, registers: [registry] });
  }

  turnFinished(seconds: number, ok: boolean): void {
    this.storeDuration.observe({ outcome: ok ? 'ok' : 'error' }, seconds);
  }

  segmentLoaded(seconds: number): void {
    this.loadDuration.observe(seconds);
  }
}
