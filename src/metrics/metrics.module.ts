import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { RuntimeModule } from '../queue/runtime/runtime.module.js';
import { SchedulesModule } from '../schedules/schedules.module.js';
import { StorageModule } from '../storage/storage.module.js';
import { MetricsController } from './metrics.controller.js';
import { MetricsService } from './metrics.service.js';
import { OperationMetrics } from './operation-metrics.js';

@Module({
  imports: [RuntimeModule, SchedulesModule, StorageModule, DiscoveryModule],
  controllers: [MetricsController],
  providers: [MetricsService, OperationMetrics],
  exports: [MetricsService],
})
export class MetricsModule {}
