import { Module } from '@nestjs/common';
import { StorageModule } from '../storage/storage.module.js';
import { DedupSweeper } from './dedup-sweeper.js';
import { SweepsModule } from '../sweeps/sweeps.module.js';

/**
 * Deduplication's housekeeping: the sweep of expired ids. (Whether a push is a duplicate is the
 * queue core's decision, in the push's turn; the ids are written with the turn.)
 */
@Module({
  imports: [StorageModule, SweepsModule],
  providers: [DedupSweeper],
  exports: [DedupSweeper],
})
export class DedupModule {}
