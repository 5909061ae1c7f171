import { Module } from '@nestjs/common';
import { OffloadModule } from '../offload/offload.module.js';
import { ActorModule } from '../queue/actor.module.js';
import { LockRepository } from './lock.repository.js';
import { LockService } from './lock.service.js';
import { LockSweeper } from './lock-sweeper.js';

@Module({
  imports: [ActorModule, OffloadModule],
  providers: [LockRepository, LockService, LockSweeper],
  exports: [LockService, LockSweeper],
})
export class LockModule {}
