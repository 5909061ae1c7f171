import { Module } from '@nestjs/common';
import { OffloadModule } from '../offload/offload.module.js';
import { LockModule } from '../lock/lock.module.js';
import { ActorModule } from './actor.module.js';
import { QueueEvents } from './queue-events.js';
import { QueueController } from './queue.controller.js';
import { QueueService } from './queue.service.js';

@Module({
  imports: [ActorModule, LockModule, OffloadModule],
  controllers: [QueueController],
  providers: [QueueEvents, QueueService],
  exports: [QueueService, QueueEvents],
})
export class QueueModule {}
