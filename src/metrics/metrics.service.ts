import { Injectable, OnModuleInit } from '@nestjs/common';
import { collectDefaultMetrics, Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { Clock } from '../common/clock.js';
import { DatabaseProvider } from '../database/database.provider.js';
import { ItemNotifications } from '../database/item-notifications.js';
import { QueueLoads } from '../queue/runtime/queue-loads.js';
import { OffloadStats } from '../offload/offload-stats.js';
import { OffloadStore } from '../offload/offload-store.js';
import { QueueEvents } from '../queue/runtime/queue-events.js';
import { ActorRegistry } from '../queue/runtime/actor-registry.js';
import { QueueStats } from '../queue/runtime/queue-stats.js';
import { QueueWakeUps } from '../queue/runtime/queue-wake-ups.js';
import { TurnRunner } from '../queue/runtime/turn-runner.js';
import { DelayedItemRepository } from '../storage/delayed-item.repository.js';
import { LockRepository } from '../storage/lock.repository.js';
import { QueueListingRepository } from '../storage/queue-listing.repository.js';
import { ScheduleRepository } from '../storage/schedule.repository.js';
import { ScheduleStats } from '../schedules/schedule-stats.js';
import { DEFAULT_METRICS_PREFIX, METRICS } from './metric-names.js';
import { LATENCY_BUCKETS, MetricsRegistry } from './metrics-registry.js';
import { clusterMetrics, isClusterWorker, shareMetrics } from '../cluster/worker.js';
/** The offloaded-segment and delayed-item counts are read from the database; refresh them at most this often. */
const STORED_COUNT_TTL_MS = 10_000;

/**
 * The service's metrics on the app's registry ({@link MetricsRegistry}). It observes: operation
 * counters are fed by Fastify's response hooks ({@link OperationMetrics}), the runtime's timings
 * by the observer it was constructed with ({@link RuntimeHistograms}), and the rest mirror the
 * runtime's counters and gauges when scraped.
 */
@Injectable()
export class MetricsService implements OnModuleInit {
  readonly registry: Registry;
  readonly operations: Counter;
  readonly operationDuration: Histogram;
  readonly acknowledgements: Counter;
  private offloadedCount = { value: 0, at: 0 };
  private delayedCount = { value: 0, at: 0 };
  private liveLockCount = { value: 0, at: 0 };
  private pausedCount = { value: 0, at: 0 };
  private queuedCount = { value: 0, at: 0 };
  private scheduleCount = { value: 0, at: 0 };

  constructor(
    private readonly actors: ActorRegistry,
    private readonly runner: TurnRunner,
    private readonly events: QueueEvents,
    private readonly queueStats: QueueStats,
    private readonly offloadStats: OffloadStats,
    private readonly store: OffloadStore,
    private readonly db: DatabaseProvider,
    private readonly delayedItems: DelayedItemRepository,
    private readonly locks: LockRepository,
    private readonly wakeUps: QueueWakeUps,
    private readonly notifications: ItemNotifications,
    private readonly loads: QueueLoads,
    private readonly clock: Clock,
    private readonly metricsRegistry: MetricsRegistry,
    private readonly listing: QueueListingRepository,
    private readonly schedules: ScheduleRepository,
    private readonly scheduleStats: ScheduleStats,
  ) {
    const registers = [(this.registry = metricsRegistry.registry)];
    this.operations = new Counter({ ...METRICS.operations, labelNames: METRICS.operations.labels, registers });
    this.operationDuration = new Histogram({ ...METRICS.operationDuration, labelNames: METRICS.operationDuration.labels, buckets: LATENCY_BUCKETS, registers });
    this.acknowledgements = new Counter({ ...METRICS.acknowledgements, labelNames: METRICS.acknowledgements.labels, registers });
  }

  onModuleInit(): void {
    collectDefaultMetrics({ register: this.registry, prefix: DEFAULT_METRICS_PREFIX });
    // prom-client's summed gauges end in `_total`, which Prometheus reserves for counters
    // (promtool check metrics refuses them); the per-type gauges of the same name hold the numbers.
    for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) {
      this.registry.removeSingleMetric(DEFAULT_METRICS_PREFIX + name);
    }
    this.registerRuntimeMetrics();
    if (isClusterWorker()) shareMetrics(this.registry);
  }

  private registerRuntimeMetrics(): void {
    const { actors, events, runner, queueStats } = this;
    const stats = this.offloadStats;
    const fromStats = (def: { name: string; help: string; labels?: readonly string[] }, read: () => number | Record<string, number>): void => {
      // A counter mirroring monotonic counts kept by the runtime (optionally by one label).
      new Counter({
        ...def,
        labelNames: def.labels ?? [],
        registers: [this.registry],
        collect(this: Counter) {
          this.reset();
          const value = read();
          if (typeof value === 'number') this.inc(value);
          else for (const [label, n] of Object.entries(value)) this.inc({ [def.labels![0]]: label }, n);
        },
      });
    };
    fromStats(METRICS.itemsPushed, () => queueStats.itemsPushed);
    fromStats(METRICS.itemsPopped, () => queueStats.itemsPopped);
    fromStats(METRICS.itemsAcknowledged, () => queueStats.itemsAcknowledged);
    fromStats(METRICS.lockExpirations, () => queueStats.lockExpirations);
    fromStats(METRICS.delayedItemsDue, () => queueStats.delayedItemsDue);
    fromStats(METRICS.duplicatesSkipped, () => queueStats.duplicatesSkipped);
    fromStats(METRICS.itemsDeadLettered, () => queueStats.itemsDeadLettered);
    fromStats(METRICS.itemsRedriven, () => queueStats.itemsRedriven);
    fromStats(METRICS.itemsRedelivered, () => queueStats.itemsRedelivered);
    fromStats(METRICS.itemsRetryDelayed, () => queueStats.itemsRetryDelayed);
    fromStats(METRICS.popsLimited, () => queueStats.popsLimited);
    fromStats(METRICS.scheduleFirings, () => this.scheduleStats.firings);
    fromStats(METRICS.scheduleFiringsMadeUp, () => this.scheduleStats.firingsMadeUp);
    fromStats(METRICS.segmentsOffloaded, () => stats.segmentsOffloaded);
    fromStats(METRICS.segmentOffloadFailures, () => stats.offloadFailures);
    fromStats(METRICS.segmentsLoaded, () => stats.segmentsLoaded);
    fromStats(METRICS.segmentLoadFailures, () => stats.loadFailures);
    fromStats(METRICS.longPollWakeUps, () => events.wakeUps);
    fromStats(METRICS.longPollsRefused, () => events.refused);
    fromStats(METRICS.longPollRechecks, () => this.wakeUps.rechecks);
    fromStats(METRICS.notifications, () => ({ sent: this.notifications.sent, received: this.notifications.received }));
    fromStats(METRICS.notificationStates, () => ({ sent: this.notifications.statesSent, kept: this.loads.statesOffered, used: this.loads.statesTaken }));
    // Across workers (WORKERS > 1) a gauge of this process is summed; one every process reads
    // from the database is the same figure in each ('max'), and listening holds only if it does in all ('min').
    const gauge = (def: { name: string; help: string }, read: () => number | Promise<number>, aggregator: 'sum' | 'max' | 'min' = 'sum'): void => {
      new Gauge({
        ...def,
        aggregator,
        registers: [this.registry],
        async collect(this: Gauge) {
          this.set(await read());
        },
      });
    };
    gauge(METRICS.activeActors, () => actors.activeActors);
    gauge(METRICS.itemsInMemory, () => actors.itemsInMemory);
    gauge(METRICS.waitingOperations, () => runner.waitingOperations);
    gauge(METRICS.longPolls, () => events.waiting);
    gauge(METRICS.offloadedSegments, () => this.stored(this.offloadedCount, () => this.store.countSegments()), 'max');
    gauge(METRICS.delayedItems, () => this.stored(this.delayedCount, () => this.delayedItems.countDelayed()), 'max');
    gauge(METRICS.liveLocks, () => this.stored(this.liveLockCount, () => this.locks.countLiveLocks()), 'max');
    gauge(METRICS.queuedItems, () => this.stored(this.queuedCount, () => this.listing.countQueuedItems()), 'max');
    gauge(METRICS.pausedQueues, () => this.stored(this.pausedCount, () => this.listing.countPaused()), 'max');
    gauge(METRICS.schedules, () => this.stored(this.scheduleCount, () => this.schedules.count()), 'max');
    gauge(METRICS.notificationsListening, () => (this.notifications.listening ? 1 : 0), 'min');
  }

  /** A count read from the database at most every STORED_COUNT_TTL_MS; the last one while it cannot be read. */
  private async stored(cached: { value: number; at: number }, read: () => Promise<number>): Promise<number> {
    if (this.clock.now() - cached.at > STORED_COUNT_TTL_MS) {
      cached.value = this.db.isReady ? await read().catch(() => cached.value) : cached.value;
      cached.at = this.clock.now();
    }
    return cached.value;
  }

  /** The exposition in Prometheus text format. */
  async exposition(): Promise<{ contentType: string; body: string }> {
    // One of several workers answers for all of them.
    const body = isClusterWorker() ? await clusterMetrics() : await this.registry.metrics();
    return { contentType: this.registry.contentType, body };
  }
}
