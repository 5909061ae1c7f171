import { Module } from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { LockModule } from '../lock/lock.module.js';
import { OffloadModule } from '../offload/offload.module.js';
import { ActorModule } from '../queue/actor.module.js';
import { QueueModule } from '../queue/queue.module.js';
import { MetricsController } from './metrics.controller.js';
import { MetricsInterceptor } from './metrics.interceptor.js';
import { MetricsService } from './metrics.service.js';

@Module({
  imports: [ActorModule, LockModule, OffloadModule, QueueModule],
  controllers: [MetricsController],
  providers: [MetricsService, { provide: APP_INTERCEPTOR, useClass: MetricsInterceptor }],
  exports: [MetricsService],
})
export class MetricsModule {}
