import { Module } from '@nestjs/common';
import { RuntimeModule } from '../queue/runtime/runtime.module.js';
import { DelaySweeper } from './delay-sweeper.js';
import { SweepsModule } from '../sweeps/sweeps.module.js';

/**
 * Delayed items: the sweep that makes due items visible on queues nobody calls. (Every turn
 * moves its queue's due items first; that step is the turn runner's and the queue core's.)
 */
@Module({
  imports: [RuntimeModule, SweepsModule],
  providers: [DelaySweeper],
  exports: [DelaySweeper],
})
export class DelayModule {}
