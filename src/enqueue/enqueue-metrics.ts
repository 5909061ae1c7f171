import { Injectable, OnModuleInit } from '@nestjs/common';
import { MetricCollectors } from '../metrics/metric-collectors.js';
import { METRICS } from '../metrics/metric-names.js';
import { EnqueueInboxRepository } from '../storage/enqueue-inbox.repository.js';

/** The SQL inbox's metrics: committed items waiting to be carried into their queues, and how long the oldest has waited. */
@Injectable()
export class EnqueueMetrics implements OnModuleInit {
  constructor(
    private readonly collectors: MetricCollectors,
    private readonly inbox: EnqueueInboxRepository,
  ) {}

  onModuleInit(): void {
    this.collectors.storedCount(METRICS.enqueueWaiting, () => this.inbox.waiting());
    this.collectors.storedCount(METRICS.enqueueOldestAge, () => this.inbox.oldestAgeSeconds());
  }
}
