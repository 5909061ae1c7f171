import { SweepsModule } from '../sweeps/sweeps.module.js';
import { Module } from '@nestjs/common';
import { RuntimeModule } from '../queue/runtime/runtime.module.js';
import { StorageModule } from '../storage/storage.module.js';
import { EnqueueCarrier } from './enqueue-carrier.js';
import { EnqueueMetrics } from './enqueue-metrics.js';
import { EnqueueStats } from './enqueue-stats.js';

/** Enqueue from SQL: the carrier of the rows `pushpop_enqueue` adds, into their queues through the runtime. */
@Module({
  imports: [RuntimeModule, StorageModule, SweepsModule],
  providers: [EnqueueCarrier, EnqueueStats, EnqueueMetrics],
  exports: [EnqueueCarrier],
})
export class EnqueueModule {}
