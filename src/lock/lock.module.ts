import { Module } from '@nestjs/common';
import { ActorModule } from '../queue/actor.module.js';
import { LockRepository } from './lock.repository.js';
import { LockService } from './lock.service.js';
import { LockSweeper } from './lock-sweeper.js';

@Module({
  imports: [ActorModule],
  providers: [LockRepository, LockService, LockSweeper],
  exports: [LockService, LockSweeper],
})
export class LockModule {}
