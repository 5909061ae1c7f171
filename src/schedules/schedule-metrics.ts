import { Injectable, OnModuleInit } from '@nestjs/common';
import { MetricCollectors } from '../metrics/metric-collectors.js';
import { METRICS } from '../metrics/metric-names.js';
import { ScheduleRepository } from '../storage/schedule.repository.js';
import { ScheduleStats } from './schedule-stats.js';

/** The schedules' metrics: firings this process pushed (made-up ones apart), and how many schedules there are. */
@Injectable()
export class ScheduleMetrics implements OnModuleInit {
  constructor(
    private readonly collectors: MetricCollectors,
    private readonly stats: ScheduleStats,
    private readonly schedules: ScheduleRepository,
  ) {}

  onModuleInit(): void {
    const { collectors, stats } = this;
    collectors.counter(METRICS.scheduleFirings, () => stats.firings);
    collectors.counter(METRICS.scheduleFiringsMadeUp, () => stats.firingsMadeUp);
    collectors.storedCount(METRICS.schedules, () => this.schedules.count());
  }
}
