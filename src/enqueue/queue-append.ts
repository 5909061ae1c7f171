import { Injectable } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import type { PushOutcome } from '../queue/core/outcomes.js';
import { pushOp } from '../queue/core/queue-ops.js';
import type { NewItem } from '../queue/core/types.js';
import { QueueStats } from '../queue/runtime/queue-stats.js';
import { TurnRunner } from '../queue/runtime/turn-runner.js';

/**
 * The one place this module reaches the queue runtime: appends items to a queue's tail in one
 * turn of its actor, all or nothing and in order, with the push operation an HTTP batch push uses
 * (dedup ids checked in the turn, delays, headers), counted in `pushpop_items_pushed_total` like
 * any push. The turn's commit wakes the long polls waiting on the queue, here and in the other processes.
 */
@Injectable()
export class QueueAppend {
  constructor(
    private readonly config: AppConfig,
    private readonly runner: TurnRunner,
    private readonly stats: QueueStats,
  ) {}

  /** @throws QueueLineFull when too many operations wait on the queue (nothing ran) */
  async append(queueId: string, items: readonly NewItem[]): Promise<PushOutcome> {
    const outcome = await this.runner.run(queueId, pushOp(items, this.config.env.DEDUP_WINDOW_SECONDS * 1000));
    this.stats.pushed(outcome);
    return outcome;
  }
}
