import { Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { Clock } from '../common/clock.js';
import { SweepLoop } from '../common/sweep-loop.js';
import { DatabaseProvider } from '../database/database.provider.js';
import { TurnRunner } from '../queue/runtime/turn-runner.js';
import { DelayedItemRepository } from '../storage/delayed-item.repository.js';

/** Most queues made current in one sweep; the rest wait for the next one (which comes at once). */
const SWEEP_BATCH = 200;

/**
 * Makes delayed items visible when they are due even if nobody calls their queue: every
 * DELAY_SWEEP_INTERVAL_MS it asks the partial index on `queues.next_due_at` for queues with due
 * items and runs one ordinary, empty turn on each. Every turn starts by moving its queue's due
 * items to their priorities (in the turn's one write) and, having moved some, wakes the queue's
 * long polls. Safe with several processes: a queue's turns are serialised by its version check,
 * and a process that comes second finds nothing due any more.
 */
@Injectable()
export class DelaySweeper implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly loop: SweepLoop;

  constructor(
    private readonly config: AppConfig,
    private readonly db: DatabaseProvider,
    private readonly delays: DelayedItemRepository,
    private readonly runner: TurnRunner,
    private readonly clock: Clock,
  ) {
    this.loop = new SweepLoop(
      new Logger('DelaySweeper'),
      'Delay sweep',
      () => this.sweep(),
      () => this.config.env.DELAY_SWEEP_INTERVAL_MS ?? this.config.env.LOCK_SWEEP_INTERVAL_MS,
    );
  }

  onApplicationBootstrap(): void {
    // The first sweep once the database is open: items may have come due while the service was down.
    this.loop.start(this.db.ready);
  }

  async onModuleDestroy(): Promise<void> {
    await this.loop.stop();
  }

  /** One sweep; returns true when it found a full batch of due queues (sweep again at once). */
  async sweep(): Promise<boolean> {
    const due = await this.delays.findDue(this.clock.now(), SWEEP_BATCH);
    for (const queueId of due) {
      if (this.loop.stopped) break;
      // An empty turn: moving due items at its start does the work (a backlog takes turns of its own).
      await this.runner.run(queueId, { kind: 'none' });
    }
    return due.length >= SWEEP_BATCH;
  }
}
