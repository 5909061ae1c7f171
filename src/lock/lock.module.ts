import { Module } from '@nestjs/common';
import { RuntimeModule } from '../queue/runtime/runtime.module.js';
import { LockSweeper } from './lock-sweeper.js';
import { SweepsModule } from '../sweeps/sweeps.module.js';

/** Lock expiry beyond the turns (a due lock's items go back at the start of every turn): the sweep that runs turns on queues nobody calls. */
@Module({
  imports: [RuntimeModule, SweepsModule],
  providers: [LockSweeper],
  exports: [LockSweeper],
})
export class LockModule {}
