import { Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { QueueStats } from '../queue/runtime/queue-stats.js';
import { TurnRunner } from '../queue/runtime/turn-runner.js';

/**
 * The lock expiry hook (seed 004 with the contract's corrections). Every turn starts with it,
 * so no operation ever sees an expired lock as active: a lock whose time has come gives its
 * items back to the front of their original priorities, in order, before the turn's
 * operations look at the queue, in the same write as they, and is kept as `expired` so its id
 * answers 410.
 */
@Injectable()
export class LockExpiry implements OnModuleInit {
  private readonly logger = new Logger('Locks');

  constructor(
    private readonly runner: TurnRunner,
    private readonly stats: QueueStats,
  ) {}

  onModuleInit(): void {
    this.runner.addHook((queueId, core, now) => {
      const returned = core.expireLock(now);
      const shared = core.expireSharedLocks(now);
      if (returned === undefined && shared === undefined) return undefined;
      return () => {
        if (returned !== undefined) {
          this.stats.lockExpirations += 1;
          this.stats.itemsRedelivered.expired += returned;
          this.logger.log(`Lock on queue ${queueId} expired; ${returned} item(s) returned to the front`);
        }
        if (shared && shared.locks > 0) {
          this.stats.lockExpirations += shared.locks;
          this.stats.itemsRedelivered.expired += shared.returned;
          this.logger.log(`${shared.locks} shared lock(s) on queue ${queueId} expired; ${shared.returned} item(s) given back`);
        }
      };
    });
  }
}
