import { Injectable } from '@nestjs/common';
import { Registry } from 'prom-client';

export const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25];

/** The app's Prometheus registry: one per app, so several apps in one process never share state. */
@Injectable()
export class MetricsRegistry {
  readonly registry = new Registry();
}
