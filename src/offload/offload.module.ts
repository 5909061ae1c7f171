import { Module } from '@nestjs/common';
import { DatabaseOffloadStore } from './database-offload-store.repository.js';
import { OffloadStats } from './offload-stats.js';
import { OffloadStore } from './offload-store.js';

/** Offloading's infrastructure: the store (swap the adapter here) and its counters. The decisions are the queue core's. */
@Module({
  providers: [{ provide: OffloadStore, useClass: DatabaseOffloadStore }, OffloadStats],
  exports: [OffloadStore, OffloadStats],
})
export class OffloadModule {}
