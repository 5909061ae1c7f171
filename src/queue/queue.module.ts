import { Module } from '@nestjs/common';
import { SegmentStorageModule } from '../segment-storage/segment-storage.module.js';
import { ActorRegistry } from './actor-registry.js';
import { QueueEvents } from './queue-events.js';
import { QueueController } from './queue.controller.js';
import { QueueService } from './queue.service.js';

@Module({
  imports: [SegmentStorageModule],
  controllers: [QueueController],
  providers: [ActorRegistry, QueueEvents, QueueService],
  exports: [ActorRegistry, QueueService],
})
export class QueueModule {}
