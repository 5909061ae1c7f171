import { Injectable, OnModuleInit } from '@nestjs/common';
import { MetricCollectors } from '../metrics/metric-collectors.js';
import { METRICS } from '../metrics/metric-names.js';
import { DelayedItemRepository } from './delayed-item.repository.js';
import { LockRepository } from './lock.repository.js';
import { QueueListingRepository } from './queue-listing.repository.js';

/** Counts over all queues of all processes, read from the database when scraped (at most every 10 s). */
@Injectable()
export class StorageMetrics implements OnModuleInit {
  constructor(
    private readonly collectors: MetricCollectors,
    private readonly delayedItems: DelayedItemRepository,
    private readonly locks: LockRepository,
    private readonly listing: QueueListingRepository,
  ) {}

  onModuleInit(): void {
    const { collectors, delayedItems, locks, listing } = this;
    collectors.storedCount(METRICS.delayedItems, () => delayedItems.countDelayed());
    collectors.storedCount(METRICS.liveLocks, () => locks.countLiveLocks());
    collectors.storedCount(METRICS.queuedItems, () => listing.countQueuedItems());
    collectors.storedCount(METRICS.pausedQueues, () => listing.countPaused());
  }
}
