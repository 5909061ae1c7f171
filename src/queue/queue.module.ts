import { Module } from '@nestjs/common';
import { RuntimeModule } from './runtime/runtime.module.js';
import { QueueController } from './queue.controller.js';
import { QueueService } from './queue.service.js';

@Module({
  imports: [RuntimeModule],
  controllers: [QueueController],
  providers: [QueueService],
  exports: [QueueService, RuntimeModule],
})
export class QueueModule {}
