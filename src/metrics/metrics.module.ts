import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { MetricsController } from './metrics.controller.js';
import { MetricsService } from './metrics.service.js';
import { OperationMetrics } from './operation-metrics.js';

/** `/metrics` and the HTTP operation metrics; the other modules register theirs through the global {@link MetricCollectors}. */
@Module({
  imports: [DiscoveryModule],
  controllers: [MetricsController],
  providers: [MetricsService, OperationMetrics],
  exports: [MetricsService],
})
export class MetricsModule {}
