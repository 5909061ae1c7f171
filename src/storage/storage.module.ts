import { Module } from '@nestjs/common';
import { DedupIdRepository } from './dedup-id.repository.js';
import { DelayedItemRepository } from './delayed-item.repository.js';
import { EnqueueInboxRepository } from './enqueue-inbox.repository.js';
import { LockRepository } from './lock.repository.js';
import { PackingGate } from './packing-gate.js';
import { QueueListingRepository } from './queue-listing.repository.js';
import { QueueStateRepository } from './queue-state.repository.js';
import { ScheduleRepository } from './schedule.repository.js';
import { StorageMetrics } from './storage-metrics.js';
import { SweepProbeRepository } from './sweep-probe.repository.js';

const REPOSITORIES = [
  QueueStateRepository,
  LockRepository,
  DelayedItemRepository,
  DedupIdRepository,
  QueueListingRepository,
  ScheduleRepository,
  EnqueueInboxRepository,
  SweepProbeRepository,
];

/** The repositories, one per aggregate; the only code that sends SQL for queues. */
@Module({ providers: [...REPOSITORIES, PackingGate, StorageMetrics], exports: [...REPOSITORIES, PackingGate] })
export class StorageModule {}
