import { Module } from '@nestjs/common';
import { RuntimeModule } from '../queue/runtime/runtime.module.js';
import { LockExpiry } from './lock-expiry.js';
import { LockSweeper } from './lock-sweeper.js';

/** Lock expiry: the hook that expires a due lock at the start of every turn, and the sweep that runs turns on queues nobody calls. */
@Module({
  imports: [RuntimeModule],
  providers: [LockExpiry, LockSweeper],
  exports: [LockSweeper],
})
export class LockModule {}
