import { Module } from '@nestjs/common';
import { RuntimeModule } from './runtime/runtime.module.js';
import { QueueController } from './queue.controller.js';
import { QueueService } from './queue.service.js';
import { QueueLocksService } from './queue-locks.service.js';
import { QueueTurns } from './queue-turns.js';

@Module({
  imports: [RuntimeModule],
  controllers: [QueueController],
  providers: [QueueTurns, QueueService, QueueLocksService],
  exports: [QueueService, RuntimeModule],
})
export class QueueModule {}
