import { Injectable, OnModuleInit } from '@nestjs/common';
import { MetricCollectors } from '../metrics/metric-collectors.js';
import { METRICS } from '../metrics/metric-names.js';
import { OffloadStats } from './offload-stats.js';
import { OffloadStore } from './offload-store.js';

/** Offloading's metrics: segments moved out and back (and the failures), and how many are out now. */
@Injectable()
export class OffloadMetrics implements OnModuleInit {
  constructor(
    private readonly collectors: MetricCollectors,
    private readonly stats: OffloadStats,
    private readonly store: OffloadStore,
  ) {}

  onModuleInit(): void {
    const { collectors, stats } = this;
    collectors.counter(METRICS.segmentsOffloaded, () => stats.segmentsOffloaded);
    collectors.counter(METRICS.segmentOffloadFailures, () => stats.offloadFailures);
    collectors.counter(METRICS.segmentsLoaded, () => stats.segmentsLoaded);
    collectors.counter(METRICS.segmentLoadFailures, () => stats.loadFailures);
    collectors.storedCount(METRICS.offloadedSegments, () => this.store.countSegments());
  }
}
