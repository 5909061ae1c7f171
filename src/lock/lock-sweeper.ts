import { Injectable, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { Clock } from '../common/clock.js';
import { TurnRunner } from '../queue/runtime/turn-runner.js';
import { LockRepository } from '../storage/lock.repository.js';
import { SweepClock, type SweepHandle } from '../sweeps/sweep-clock.js';

/** Most queues expired in one sweep; the rest wait for the next one (which comes at once). */
const SWEEP_BATCH = 200;
/** Expired shared locks are remembered (their id answers 410) this long after expiry. */
const REMEMBER_EXPIRED_MS = 3_600_000;
/** Forgetting is asked for at most this often, and forgets at most FORGET_BATCH locks each time. */
const FORGET_INTERVAL_MS = 60_000;
const FORGET_BATCH = 1000;

/**
 * Returns the items of expired locks even when nobody calls their queue: every
 * LOCK_SWEEP_INTERVAL_MS the sweep clock asks (with the other sweeps' questions, in one
 * statement) whether the partial indexes on lock expiry hold a due lock; if so, this sweep takes
 * the queues with due locks (cost proportional to the due locks, never to the number of queues)
 * and runs one ordinary turn on each, whose expiry step returns the items. Safe with several
 * processes: a queue's turns are serialised by its version check, and a process that comes
 * second finds the lock already expired. A second, rare sweep forgets expired shared locks.
 */
@Injectable()
export class LockSweeper implements OnApplicationBootstrap, OnModuleDestroy {
  private handles: SweepHandle[] = [];

  constructor(
    private readonly config: AppConfig,
    private readonly sweeps: SweepClock,
    private readonly locks: LockRepository,
    private readonly runner: TurnRunner,
    private readonly clock: Clock,
  ) {}

  onApplicationBootstrap(): void {
    // Asked first once the database is open (a crashed consumer's locks may be due already).
    this.handles = [
      this.sweeps.register({
        what: 'Lock sweep',
        question: (now) => ({ work: 'locksDue', at: now }),
        intervalMs: () => this.config.env.LOCK_SWEEP_INTERVAL_MS,
        sweep: async () => (await this.sweep()) >= SWEEP_BATCH,
      }),
      // An expired shared lock's id answers 410 for at least an hour, then 404.
      this.sweeps.register({
        what: 'Forgetting expired locks',
        question: (now) => ({ work: 'locksToForget', at: now - REMEMBER_EXPIRED_MS }),
        intervalMs: () => FORGET_INTERVAL_MS,
        sweep: async () => {
          await this.locks.forgetExpired(this.clock.now() - REMEMBER_EXPIRED_MS, FORGET_BATCH);
          return false;
        },
      }),
    ];
  }

  async onModuleDestroy(): Promise<void> {
    await Promise.all(this.handles.map((h) => h.stop()));
  }

  /** One sweep; returns how many due locks it found. */
  async sweep(): Promise<number> {
    const due = await this.locks.findDue(this.clock.now(), SWEEP_BATCH);
    for (const queueId of due) {
      if (this.handles[0]?.stopped) break;
      // An empty turn: the lock expiry at its start does the work.
      await this.runner.run(queueId, { kind: 'none' });
    }
    return due.length;
  }
}
