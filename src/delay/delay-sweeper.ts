import { Injectable, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { Clock } from '../common/clock.js';
import { TurnRunner } from '../queue/runtime/turn-runner.js';
import { DelayedItemRepository } from '../storage/delayed-item.repository.js';
import { SweepClock, type SweepHandle } from '../sweeps/sweep-clock.js';

/** Most queues made current in one sweep; the rest wait for the next one (which comes at once). */
const SWEEP_BATCH = 200;

/**
 * Makes delayed items visible when they are due even if nobody calls their queue: every
 * DELAY_SWEEP_INTERVAL_MS the sweep clock asks (with the other sweeps' questions, in one
 * statement) whether the partial index on `queues.next_due_at` holds a due queue; if so, this
 * sweep takes the due queues and runs one ordinary, empty turn on each. Every turn starts by
 * moving its queue's due items to their priorities (in the turn's one write) and, having moved
 * some, wakes the queue's long polls. Safe with several processes: a queue's turns are
 * serialised by its version check, and a process that comes second finds nothing due any more.
 */
@Injectable()
export class DelaySweeper implements OnApplicationBootstrap, OnModuleDestroy {
  private handle?: SweepHandle;

  constructor(
    private readonly config: AppConfig,
    private readonly sweeps: SweepClock,
    private readonly delays: DelayedItemRepository,
    private readonly runner: TurnRunner,
    private readonly clock: Clock,
  ) {}

  onApplicationBootstrap(): void {
    // Asked first once the database is open: items may have come due while the service was down.
    this.handle = this.sweeps.register({
      what: 'Delay sweep',
      question: (now) => ({ work: 'delaysDue', at: now }),
      intervalMs: () => this.config.env.DELAY_SWEEP_INTERVAL_MS ?? this.config.env.LOCK_SWEEP_INTERVAL_MS,
      sweep: () => this.sweep(),
    });
  }

  async onModuleDestroy(): Promise<void> {
    await this.handle?.stop();
  }

  /** One sweep; returns true when it found a full batch of due queues (sweep again at once). */
  async sweep(): Promise<boolean> {
    const due = await this.delays.findDue(this.clock.now(), SWEEP_BATCH);
    for (const queueId of due) {
      if (this.handle?.stopped) break;
      // An empty turn: moving due items at its start does the work (a backlog takes turns of its own).
      await this.runner.run(queueId, { kind: 'none' });
    }
    return due.length >= SWEEP_BATCH;
  }
}
