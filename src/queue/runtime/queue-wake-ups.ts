import { Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { Clock } from '../../common/clock.js';
import { GatheringBatcher } from '../../common/gathering-batcher.js';
import { DatabaseProvider } from '../../database/database.provider.js';
import { ItemNotifications } from '../../database/item-notifications.js';
import { QueueListingRepository } from '../../storage/queue-listing.repository.js';
import { QueueEvents } from './queue-events.js';
import { ActorRegistry } from './actor-registry.js';
import { QueueLoads } from './queue-loads.js';
import { decodeQueueState } from './queue-state-payload.js';

/** How often the re-check may run while notifications are not being received (the connection is lost). */
export const RECHECK_UNLISTENED_MS = 500;
/** How often it runs while they are: then it is only a safety net. */
export const RECHECK_LISTENING_MS = 5_000;
/** The timer's tick; the re-check runs on the first tick after its interval. */
const TICK_MS = 250;
/** Queue ids one first-look statement asks about at most. */
const MAX_LOOK_BATCH = 1_000;
/**
 * How long a queue a long poll waited on in vain is taken for empty by the next poll's first
 * look (a consumer polling again at once); older marks are forgotten.
 */
export const QUIET_TRUSTED_MS = 60_000;

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * Wakes long polls for items that other processes pushed: on a notification (another process's
 * write made a queue non-empty; see {@link ItemNotifications}), and by a periodic re-check that
 * catches what notifications missed (while the listening connection was lost, and in the window
 * before it listened again). The re-check is one statement for all the queues this process's
 * polls wait on together — the queues among them that hold items — never a turn per poll; with
 * no poll waiting it sends nothing. It runs every {@link RECHECK_LISTENING_MS} while
 * notifications arrive, every {@link RECHECK_UNLISTENED_MS} while they do not, and at once
 * each time the listener (re)connects.
 */
@Injectable()
export class QueueWakeUps implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('LongPolls');
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private lastRecheck = 0;
  private failing = false;
  /** Re-check statements sent. */
  rechecks = 0;
  /** First looks: one statement at a time, each with all those asked for meanwhile. */
  private readonly looks: GatheringBatcher<string, undefined, boolean>;

  constructor(
    private readonly events: QueueEvents,
    private readonly notifications: ItemNotifications,
    private readonly listing: QueueListingRepository,
    private readonly db: DatabaseProvider,
    private readonly registry: ActorRegistry,
    private readonly clock: Clock,
    private readonly loads: QueueLoads,
  ) {
    this.looks = new GatheringBatcher(async (batch) => {
      const found = new Set(await this.listing.queuesToPopFrom([...batch.keys()], this.clock.now()));
      return (queueId) => found.has(queueId);
    }, MAX_LOOK_BATCH);
  }

  /** First-look statements sent. */
  get lookStatements(): number {
    return this.looks.batches;
  }

  onApplicationBootstrap(): void {
    // One item per notification: the poll that takes it wakes the next if it left more.
    this.notifications.onItems((queueId) => this.events.wake(queueId, 1, 'notification'));
    // The state a push committed, sent just before its queue id: kept for the turn of the poll
    // that id wakes, if one waits here.
    this.notifications.onState((payload) => {
      const decoded = decodeQueueState(payload);
      if (decoded && this.events.hasPolls(decoded.queueId)) this.loads.offer(decoded.queueId, decoded.state, this.clock.now());
    });
    this.notifications.onListening(() => {
      // Notifications may have been missed while not listening: no queue is known quiet any more.
      this.events.forgetQuiet();
      void this.recheck();
    });
    this.timer = setInterval(() => {
      const interval = this.notifications.listening ? RECHECK_LISTENING_MS : RECHECK_UNLISTENED_MS;
      if (this.clock.now() - this.lastRecheck >= interval) void this.recheck();
    }, TICK_MS);
    this.timer.unref();
  }

  async onModuleDestroy(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /**
   * A long poll's first look at its queue, instead of a turn of its own: whether the queue may
   * hold something for a pop (items, a lock, due delayed items), so that the poll runs a turn,
   * or is empty, so that it goes straight to its wait. The looks of all the polls arriving
   * together are one statement (a statement in flight batches the next ones; none waits for a
   * timer), so opening many long polls on empty queues costs a statement per batch, not a turn
   * per poll. A queue whose actor is in memory with items, a database that is not ready, and a
   * failed look all answer `true`: the turn decides (and reports the error).
   *
   * Sound only for a poll registered before the look (see {@link QueueEvents.register}): items
   * committed after the look's snapshot wake the poll (a turn of this process, a notification,
   * the re-check), and a wake-up during the look is kept for its wait.
   *
   * A queue on which a poll of this process just waited in vain needs no look at all while
   * notifications were heard all along: nothing has woken it since, so no turn of this process
   * left items on it and no other process made it non-empty (each would have woken it). A
   * consumer that polls again at once, thousands of them every `wait_seconds`, so costs no
   * statement. (A delayed item that comes due meanwhile reaches the poll by the delay sweep,
   * as for a poll that was waiting then.)
   */
  needsTurn(queueId: string): Promise<boolean> {
    if ((this.registry.peek(queueId)?.count ?? 0) > 0 || !this.db.isReady) return Promise.resolve(true);
    if (this.notifications.listening && this.events.isQuiet(queueId, Date.now() - QUIET_TRUSTED_MS)) return Promise.resolve(false);
    // A failed look answers true: the turn decides (and reports the error).
    return this.looks.request(queueId, undefined).catch(() => true);
  }

  /** One re-check (skipped while one is under way, or when no poll waits). */
  recheck(): Promise<void> {
    this.running ??= this.run().finally(() => (this.running = undefined));
    return this.running;
  }

  private async run(): Promise<void> {
    this.lastRecheck = this.clock.now();
    this.events.forgetQuiet(Date.now() - QUIET_TRUSTED_MS);
    const ids = this.events.waitingQueues();
    if (ids.length === 0 || !this.db.isReady) return;
    let found: { queueId: string; count: number }[];
    try {
      found = await this.listing.queuesWithItems(ids);
      this.rechecks += 1;
    } catch (error) {
      // The database is away: requests say so (503); one line here, not one per tick.
      if (!this.failing) this.logger.warn(`Long-poll re-check failed: ${message(error)}; retrying`);
      this.failing = true;
      return;
    }
    if (this.failing) this.logger.log('Long-poll re-check works again');
    this.failing = false;
    for (const { queueId, count } of found) this.events.wake(queueId, count, 'recheck');
  }
}
