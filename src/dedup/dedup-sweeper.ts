import { Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { AppConfig } from '../config/app-config.js';
import { SweepLoop } from '../common/sweep-loop.js';
import { DatabaseProvider } from '../database/database.provider.js';
import { DedupIdRepository } from '../storage/dedup-id.repository.js';

/** Expired dedup ids deleted by one statement at most; a full batch is followed by the next at once. */
const SWEEP_BATCH = 1000;

/**
 * Deletes expired deduplication ids in bounded batches, so the table holds about one window's
 * worth of ids. Not needed for correctness: a turn reads only ids that have not expired, and
 * replaces an expired row when its id is accepted again.
 */
@Injectable()
export class DedupSweeper implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly loop: SweepLoop;

  constructor(
    private readonly db: DatabaseProvider,
    private readonly dedup: DedupIdRepository,
    private readonly clock: Clock,
    private readonly config: AppConfig,
  ) {
    this.loop = new SweepLoop(
      new Logger('DedupSweeper'),
      'Dedup sweep',
      () => this.sweep(),
      () => this.config.env.DEDUP_SWEEP_INTERVAL_MS,
    );
  }

  onApplicationBootstrap(): void {
    this.loop.start(this.db.ready);
  }

  async onModuleDestroy(): Promise<void> {
    await this.loop.stop();
  }

  /** One batch; returns true when it was full (sweep again at once). */
  async sweep(): Promise<boolean> {
    return (await this.dedup.deleteExpired(this.clock.now(), SWEEP_BATCH)) >= SWEEP_BATCH;
  }
}
