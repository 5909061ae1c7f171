import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { RuntimeModule } from '../queue/runtime/runtime.module.js';
import { MetricsController } from './metrics.controller.js';
import { MetricsService } from './metrics.service.js';
import { OperationMetrics } from './operation-metrics.js';

@Module({
  imports: [RuntimeModule, DiscoveryModule],
  controllers: [MetricsController],
  providers: [MetricsService, OperationMetrics],
  exports: [MetricsService],
})
export class MetricsModule {}
