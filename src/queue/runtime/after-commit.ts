import { Injectable, Logger } from '@nestjs/common';
import { ItemNotifications } from '../../database/item-notifications.js';
import { OffloadStats } from '../../offload/offload-stats.js';
import { ActorRegistry } from './actor-registry.js';
import { OffloadCarriage } from './offload-carriage.js';
import { QueueEvents } from './queue-events.js';
import { QueueStats } from './queue-stats.js';
import { SegmentReadAhead } from './segment-read-ahead.js';
import { encodeQueueState } from './queue-state-payload.js';
import type { Prepared } from './turn-attempt.js';
import type { Pending } from './turn-lines.js';

/**
 * What happens once a turn's write committed: only then does any operation get its outcome (a
 * refusal is an outcome like any other). Then the actor is kept (or dropped), the counters and
 * logs, the reads ahead of the segments the next turns load back (see {@link SegmentReadAhead}),
 * the wake-ups of the queues that received dead letters or redriven items, the long polls of this
 * process and the notification to the others, and the offload store's clean-up (still inside the
 * turn).
 */
@Injectable()
export class AfterCommit {
  private readonly logger = new Logger('TurnRunner');
  private readonly lockLogger = new Logger('Locks');

  constructor(
    private readonly registry: ActorRegistry,
    private readonly events: QueueEvents,
    private readonly queueStats: QueueStats,
    private readonly notifications: ItemNotifications,
    private readonly offloadStats: OffloadStats,
    private readonly carriage: OffloadCarriage,
    private readonly readAhead: SegmentReadAhead,
  ) {}

  /** After the write committed: answers first, then the actor, the counters and the store's clean-up (still inside the turn). */
  async committed(
    queueId: string,
    batch: readonly Pending[],
    { core, countBefore, write, results, dueMoved, lockExpired, sharedExpired, offloaded, loaded, failedSaves }: Prepared,
  ): Promise<void> {
    const unused = this.carriage.unused(core, failedSaves);
    // Asked of the turn before it ends: which segments its pops bring next, and which it saved or deleted.
    const upcoming = this.readAhead.segments > 0 ? core.offload.upcoming(this.readAhead.segments) : [];
    const inStore = [...offloaded, ...failedSaves, ...core.storeDeletes()];
    core.committed(write);
    if (core.isPresent) this.registry.set(queueId, core);
    else this.registry.deactivate(queueId);
    results?.forEach((outcome, i) => batch[i].resolve(outcome));
    this.readAhead.committed(queueId, core, upcoming, write, inStore);
    if (lockExpired !== undefined) {
      this.queueStats.lockExpirations += 1;
      this.queueStats.itemsRedelivered.expired += lockExpired;
      this.lockLogger.log(`Lock on queue ${queueId} expired; ${lockExpired} item(s) returned to the front`);
    }
    if (sharedExpired && sharedExpired.locks > 0) {
      this.queueStats.lockExpirations += sharedExpired.locks;
      this.queueStats.itemsRedelivered.expired += sharedExpired.returned;
      this.lockLogger.log(`${sharedExpired.locks} shared lock(s) on queue ${queueId} expired; ${sharedExpired.returned} item(s) given back`);
    }
    if (write) {
      // Items given back that wait out a retry delay (by expiry or release): delayed items with an origin.
      for (const d of write.delayedInserts) if (d.origin) this.queueStats.itemsRetryDelayed += 1;
    }
    if (dueMoved) {
      this.queueStats.delayedItemsDue += dueMoved;
      this.logger.debug(`${dueMoved} delayed item(s) of queue ${queueId} came due`);
    }
    this.offloadStats.segmentsOffloaded += offloaded.length;
    this.offloadStats.segmentsLoaded += loaded.length;
    for (const m of offloaded) this.logger.log(`Offloaded segment ${m.segment} for priority ${m.priority} to state store (actor ${queueId})`);
    for (const r of loaded) this.logger.log(`Loaded segment ${r.segment} for priority ${r.priority} from state store (actor ${queueId})`);
    if (write?.deadLetters) {
      // The dead-letter queue's row moved on: its actor here reloads at its next turn, which
      // moves the dead letters to its tails (so does the delay sweep, with no traffic).
      const target = write.deadLetters.queueId;
      this.queueStats.itemsDeadLettered += write.deadLetters.items.length;
      this.registry.deactivate(target);
      this.events.wake(target, write.deadLetters.items.length, 'local');
      this.notifications.announce(target);
      this.logger.log(`${write.deadLetters.items.length} item(s) of queue ${queueId} went to its dead-letter queue ${target}`);
    }
    if (write && write.redriven.length > 0) {
      // The destinations' rows moved on: their actors here reload at their next turns, which move
      // the redriven items to their tails (so does the delay sweep, with no traffic).
      const counts = new Map<string, number>();
      for (const item of write.redriven) counts.set(item.queueId, (counts.get(item.queueId) ?? 0) + 1);
      this.queueStats.itemsRedriven += write.redriven.length;
      for (const [target, n] of counts) {
        this.registry.deactivate(target);
        this.events.wake(target, n, 'local');
        this.notifications.announce(target);
      }
      this.logger.log(`${write.redriven.length} item(s) of queue ${queueId} redriven to ${[...counts.keys()].join(', ')}`);
    }
    if (write && core.available > 0) {
      // Long polls of this process waiting on the queue take what the turn left (after pushes,
      // returned items, delayed items that came due, also in the delay sweep's turns, and a
      // resume); other processes' long polls wait only on a queue they found empty or paused,
      // so they hear of the transition from none to some (a resume of a queue holding items is
      // one).
      this.events.wake(queueId, core.available, 'local');
      if (countBefore === 0) {
        // With the state just committed, when memory holds all of it: a long poll of another
        // process woken by it can take the item without reading the queue first.
        const snapshot = core.snapshot();
        this.notifications.announce(queueId, snapshot && encodeQueueState(queueId, snapshot));
      }
    }
    const cleaning = this.carriage.afterWrite(queueId, core, unused);
    if (cleaning) await cleaning;
  }
}
