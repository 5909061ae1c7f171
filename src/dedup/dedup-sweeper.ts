import { Injectable, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { AppConfig } from '../config/app-config.js';
import { DedupIdRepository } from '../storage/dedup-id.repository.js';
import { SweepClock, type SweepHandle } from '../sweeps/sweep-clock.js';

/** Expired dedup ids deleted by one statement at most; a full batch is followed by the next at once. */
const SWEEP_BATCH = 1000;

/**
 * Deletes expired deduplication ids in bounded batches, so the table holds about one window's
 * worth of ids; every DEDUP_SWEEP_INTERVAL_MS the sweep clock asks (with the other sweeps'
 * questions, in one statement) whether any has expired. Not needed for correctness: a turn
 * reads only ids that have not expired, and replaces an expired row when its id is accepted again.
 */
@Injectable()
export class DedupSweeper implements OnApplicationBootstrap, OnModuleDestroy {
  private handle?: SweepHandle;

  constructor(
    private readonly sweeps: SweepClock,
    private readonly dedup: DedupIdRepository,
    private readonly clock: Clock,
    private readonly config: AppConfig,
  ) {}

  onApplicationBootstrap(): void {
    this.handle = this.sweeps.register({
      what: 'Dedup sweep',
      question: (now) => ({ work: 'dedupIdsExpired', at: now }),
      intervalMs: () => this.config.env.DEDUP_SWEEP_INTERVAL_MS,
      sweep: () => this.sweep(),
    });
  }

  async onModuleDestroy(): Promise<void> {
    await this.handle?.stop();
  }

  /** One batch; returns true when it was full (sweep again at once). */
  async sweep(): Promise<boolean> {
    return (await this.dedup.deleteExpired(this.clock.now(), SWEEP_BATCH)) >= SWEEP_BATCH;
  }
}
