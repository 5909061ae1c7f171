import { Module } from '@nestjs/common';
import { StorageModule } from '../storage/storage.module.js';
import { SweepClock } from './sweep-clock.js';

/** The sweeps' one timer and probe; each sweep (locks, delays, dedup ids, schedules) registers with it from its own module. */
@Module({
  imports: [StorageModule],
  providers: [SweepClock],
  exports: [SweepClock],
})
export class SweepsModule {}
