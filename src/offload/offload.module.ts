import { Module } from '@nestjs/common';
import { DatabaseOffloadStore } from './database-offload-store.repository.js';
import { OffloadMetrics } from './offload-metrics.js';
import { OffloadStats } from './offload-stats.js';
import { OffloadStore } from './offload-store.js';

/** Offloading's infrastructure: the store (swap the adapter here), its counters and their metrics. The decisions are the queue core's. */
@Module({
  providers: [{ provide: OffloadStore, useClass: DatabaseOffloadStore }, OffloadStats, OffloadMetrics],
  exports: [OffloadStore, OffloadStats],
})
export class OffloadModule {}
