import { Module } from '@nestjs/common';
import { OffloadModule } from '../../offload/offload.module.js';
import { StorageModule } from '../../storage/storage.module.js';
import { QueueEvents } from './queue-events.js';
import { PrefixRotations } from './prefix-rotations.js';
import { ActorRegistry } from './actor-registry.js';
import { QueueLoads } from './queue-loads.js';
import { QueueStats } from './queue-stats.js';
import { QueueWakeUps } from './queue-wake-ups.js';
import { NotificationMetrics } from './notification-metrics.js';
import { RuntimeHistograms } from './runtime-histograms.js';
import { RuntimeMetrics } from './runtime-metrics.js';
import { RUNTIME_OBSERVER } from './runtime-observer.js';
import { TurnReads } from './turn-reads.js';
import { SegmentReadAhead } from './segment-read-ahead.js';
import { TurnRunner } from './turn-runner.js';
import { TurnAttempt } from './turn-attempt.js';
import { AfterCommit } from './after-commit.js';
import { OffloadCarriage } from './offload-carriage.js';

/** The actor runtime: the actors in memory and the turn runner that gives each queue its turns. */
@Module({
  imports: [StorageModule, OffloadModule],
  providers: [
    ActorRegistry,
    TurnRunner,
    TurnAttempt,
    AfterCommit,
    OffloadCarriage,
    TurnReads,
    SegmentReadAhead,
    QueueEvents,
    PrefixRotations,
    QueueStats,
    QueueWakeUps,
    QueueLoads,
    { provide: RUNTIME_OBSERVER, useClass: RuntimeHistograms },
    RuntimeMetrics,
    NotificationMetrics,
  ],
  exports: [ActorRegistry, TurnRunner, QueueEvents, PrefixRotations, QueueStats, QueueWakeUps, QueueLoads, StorageModule, OffloadModule],
})
export class RuntimeModule {}
