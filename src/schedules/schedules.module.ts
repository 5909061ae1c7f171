import { Module } from '@nestjs/common';
import { RuntimeModule } from '../queue/runtime/runtime.module.js';
import { StorageModule } from '../storage/storage.module.js';
import { ScheduleController } from './schedule.controller.js';
import { ScheduleMetrics } from './schedule-metrics.js';
import { ScheduleStats } from './schedule-stats.js';
import { ScheduleSweeper } from './schedule-sweeper.js';
import { ScheduleService } from './schedule.service.js';
import { SweepsModule } from '../sweeps/sweeps.module.js';

/** Schedules: the HTTP face, the service, and the sweep that fires them through the runtime (turns of the queues' actors). */
@Module({
  imports: [RuntimeModule, StorageModule, SweepsModule],
  controllers: [ScheduleController],
  providers: [ScheduleService, ScheduleSweeper, ScheduleStats, ScheduleMetrics],
  exports: [ScheduleStats, ScheduleSweeper],
})
export class SchedulesModule {}
