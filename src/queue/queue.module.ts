import { Module } from '@nestjs/common';
import { RuntimeModule } from './runtime/runtime.module.js';
import { QueueController } from './queue.controller.js';
import { QueueService } from './queue.service.js';
import { QueueLocksService } from './queue-locks.service.js';
import { QueueTurns } from './queue-turns.js';
import { FairPopController } from './fair-pop.controller.js';
import { FairPopService } from './fair-pop.service.js';

@Module({
  imports: [RuntimeModule],
  controllers: [QueueController, FairPopController],
  providers: [QueueTurns, QueueService, QueueLocksService, FairPopService],
  exports: [QueueService, RuntimeModule],
})
export class QueueModule {}
