import { Injectable, OnModuleInit } from '@nestjs/common';
import { MetricCollectors } from '../../metrics/metric-collectors.js';
import { METRICS } from '../../metrics/metric-names.js';
import { ActorRegistry } from './actor-registry.js';
import { QueueEvents } from './queue-events.js';
import { QueueStats } from './queue-stats.js';
import { QueueWakeUps } from './queue-wake-ups.js';
import { TurnRunner } from './turn-runner.js';

/** The runtime's metrics: what committed turns did, the actors in memory, the operations and long polls waiting. Read when scraped. */
@Injectable()
export class RuntimeMetrics implements OnModuleInit {
  constructor(
    private readonly collectors: MetricCollectors,
    private readonly stats: QueueStats,
    private readonly actors: ActorRegistry,
    private readonly runner: TurnRunner,
    private readonly events: QueueEvents,
    private readonly wakeUps: QueueWakeUps,
  ) {}

  onModuleInit(): void {
    const { collectors, stats, actors, runner, events } = this;
    collectors.counter(METRICS.itemsPushed, () => stats.itemsPushed);
    collectors.counter(METRICS.itemsPopped, () => stats.itemsPopped);
    collectors.counter(METRICS.itemsAcknowledged, () => stats.itemsAcknowledged);
    collectors.counter(METRICS.acknowledgements, () => stats.acknowledgements);
    collectors.counter(METRICS.lockExpirations, () => stats.lockExpirations);
    collectors.counter(METRICS.delayedItemsDue, () => stats.delayedItemsDue);
    collectors.counter(METRICS.duplicatesSkipped, () => stats.duplicatesSkipped);
    collectors.counter(METRICS.itemsDeadLettered, () => stats.itemsDeadLettered);
    collectors.counter(METRICS.itemsRedriven, () => stats.itemsRedriven);
    collectors.counter(METRICS.itemsRedelivered, () => stats.itemsRedelivered);
    collectors.counter(METRICS.itemsRetryDelayed, () => stats.itemsRetryDelayed);
    collectors.counter(METRICS.popsLimited, () => stats.popsLimited);
    collectors.counter(METRICS.fairPops, () => stats.fairPops);
    collectors.counter(METRICS.fairPopSkips, () => stats.fairPopSkips);
    collectors.counter(METRICS.longPollWakeUps, () => events.wakeUps);
    collectors.counter(METRICS.longPollsRefused, () => events.refused);
    collectors.counter(METRICS.longPollRechecks, () => this.wakeUps.rechecks);
    collectors.gauge(METRICS.activeActors, () => actors.activeActors);
    collectors.gauge(METRICS.itemsInMemory, () => actors.itemsInMemory);
    collectors.gauge(METRICS.waitingOperations, () => runner.waitingOperations);
    collectors.gauge(METRICS.longPolls, () => events.waiting);
  }
}
