import { Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { Clock } from '../common/clock.js';
import { SweepLoop } from '../common/sweep-loop.js';
import { DatabaseProvider } from '../database/database.provider.js';
import { TurnRunner } from '../queue/runtime/turn-runner.js';
import { LockRepository } from '../storage/lock.repository.js';

/** Most queues expired in one sweep; the rest wait for the next tick (which comes at once). */
const SWEEP_BATCH = 200;
/** Expired shared locks are remembered (their id answers 410) this long after expiry. */
const REMEMBER_EXPIRED_MS = 3_600_000;
/** Forgetting runs at most this often, in batches of FORGET_BATCH. */
const FORGET_INTERVAL_MS = 60_000;
const FORGET_BATCH = 1000;

/**
 * Returns the items of expired locks even when nobody calls their queue: every
 * LOCK_SWEEP_INTERVAL_MS it asks the partial index on `queue_locks.expires_at` for due locks
 * (cost proportional to the due locks, never to the number of queues) and runs one ordinary
 * turn on each, whose expiry step returns the items. Safe with several processes: a queue's
 * turns are serialised by its version check, and a process that comes second finds the lock
 * already expired.
 */
@Injectable()
export class LockSweeper implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly loop: SweepLoop;
  private lastForget = 0;

  constructor(
    private readonly config: AppConfig,
    private readonly db: DatabaseProvider,
    private readonly locks: LockRepository,
    private readonly runner: TurnRunner,
    private readonly clock: Clock,
  ) {
    this.loop = new SweepLoop(
      new Logger('LockSweeper'),
      'Lock sweep',
      async () => (await this.sweep()) >= SWEEP_BATCH,
      () => this.config.env.LOCK_SWEEP_INTERVAL_MS,
    );
  }

  onApplicationBootstrap(): void {
    // The first sweep comes once the database is open (a crashed consumer's locks may be due already).
    this.loop.start(this.db.ready);
  }

  async onModuleDestroy(): Promise<void> {
    await this.loop.stop();
  }

  /** One sweep; returns how many due locks it found. */
  async sweep(): Promise<number> {
    const now = this.clock.now();
    // An expired shared lock's id answers 410 for at least an hour, then 404.
    if (now - this.lastForget >= FORGET_INTERVAL_MS) {
      this.lastForget = now;
      await this.locks.forgetExpired(now - REMEMBER_EXPIRED_MS, FORGET_BATCH);
    }
    const due = await this.locks.findDue(now, SWEEP_BATCH);
    for (const queueId of due) {
      if (this.loop.stopped) break;
      // An empty turn: the lock expiry at its start does the work.
      await this.runner.run(queueId, { kind: 'none' });
    }
    return due.length;
  }
}
