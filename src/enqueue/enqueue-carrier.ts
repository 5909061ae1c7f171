import { Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { DatabaseProvider } from '../database/database.provider.js';
import { ENQUEUE_WAKE } from '../database/functions/enqueue.function.js';
import { ItemNotifications } from '../database/item-notifications.js';
import { SweepClock, type SweepHandle } from '../sweeps/sweep-clock.js';
import type { NewItem } from '../queue/core/types.js';
import { TurnRunner } from '../queue/runtime/turn-runner.js';
import { encodeHeaders, encodeItem } from '../queue/item-codec.js';
import { EnqueueInboxRepository, type EnqueuedRow } from '../storage/enqueue-inbox.repository.js';
import { EnqueueStats } from './enqueue-stats.js';

/** Rows one carriage takes at most. */
export const CARRY_BATCH = 10_000;
/** Items of one push at most (a turn's weight of 1,000): a queue's larger share goes in several pushes, in order. */
export const PUSH_MAX = 1000;
/**
 * While a transaction that enqueued is still committing (its commit trigger ran, it is not
 * visible yet), a carrier that found nothing looks again after this long, doubling up to
 * {@link SETTLE_MAX_MS}: a commit is visible within milliseconds; one that stays committing
 * (a trigger fired early by `SET CONSTRAINTS ... IMMEDIATE` in a long transaction) costs a
 * look a second.
 */
export const SETTLE_FIRST_MS = 2;
export const SETTLE_MAX_MS = 1000;
/**
 * How often an idle process probes (for a wake-up lost with the notification connection):
 * nearly nothing.
 */
export const IDLE_INTERVAL_MS = 5_000;

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/** Waits `ms` (a timer that keeps no process alive), or until the function handed to `endWith` is called. */
function delay(ms: number, endWith: (end: () => void) => void): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms).unref();
    endWith(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/**
 * Carries the rows `pushpop_enqueue` added, once their transactions committed, into their
 * queues. A process carries when woken (a commit that found none waiting notifies the schema's
 * items channel), and carries again after a carriage that found rows, once `ENQUEUE_GATHER_MS`
 * passed since that one started (at once when it took longer), so that rows committed meanwhile
 * are poppable one carriage after their commit, and a stream of commits is carried in carriages
 * of many rows, each queue's share in one push, rather than a push and a commit per queue for
 * every few rows. It stops only when a look finds nothing waiting and no commit under way
 * (`EnqueueInboxRepository.settled`, the gate of `ENQUEUE_COMMITTED`): the next commit then
 * finds none waiting and wakes it. An idle process
 * probes every {@link IDLE_INTERVAL_MS} with the sweeps' one statement, in case a wake-up was
 * lost. One process at a time carries up to {@link CARRY_BATCH} rows, in commit order, each
 * queue's share as one push (or several of {@link PUSH_MAX}, in order) through the queue
 * runtime (`TurnRunner.push`, as an HTTP batch push: the application's dedup ids checked in the
 * turn, delays, headers), whose commit deletes them.
 *
 * **One carrier at a time.** A carriage runs in a transaction holding the schema's carrier lock
 * (a transaction-scoped advisory lock; another process finding it taken skips its turn). The
 * lock ends with that transaction: at its commit, its rollback, or when the process dies and
 * PostgreSQL ends its connection (SIGKILL included). While it is held nobody else pushes rows:
 * no row is carried twice at the same time, and no queue's later rows overtake earlier ones.
 *
 * **Commit order.** Rows are taken by `commit_seq`, the number a transaction gets as it commits,
 * then by call order. A transaction still committing when a carriage reads is simply not seen
 * yet and comes in a later carriage, after what was carried: per queue, items become poppable
 * in the order their transactions became visible, even when they called the function in the
 * other order.
 *
 * **Exactly once.** The deletion of a push's rows is a statement in the push's own commit
 * (`EnqueueInboxRepository.claim`, run by the turn in the transaction of its write): a carriage
 * cut short (a crash, SIGKILL, a lost connection) pushed and deleted a row, or did neither and
 * leaves it to the next carriage. No row needs a dedup id for that: a row without the
 * application's own is pushed without one. The deletion fails the push when a row is gone
 * already (carried by another carriage, which can only happen when a carriage's connection was
 * lost while its push was still committing): nothing of it is written. A failed push (a queue
 * whose line is full, an unreachable database) leaves that queue's rows, and nothing later of
 * that queue is pushed before them. The carriage's own transaction deletes the
 * `enqueue_commits` rows of transactions with no row left once the pushes ended (and those a
 * carriage cut short left, at the next one).
 *
 * A row this process cannot push (its limits are lower than those of the process whose limits
 * the function checked) is dropped with a warning rather than holding up its queue forever: with
 * its queue's push, or by the carriage when none of its part is pushed.
 */
@Injectable()
export class EnqueueCarrier implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('EnqueueCarrier');
  /** The idle probe, asked with the other sweeps' questions; undefined until the service starts. */
  private probe?: SweepHandle;
  private closed = false;
  /** A wake-up came since the carrying under way last looked. */
  private woken = false;
  /** The carrying under way, after a wake-up, until nothing waits or commits. */
  private active?: Promise<void>;
  /** Ends the carrying's pause early (a wake-up came). */
  private endPause?: () => void;
  /** Ends the wait between carriages of a stream of commits early (closing). */
  private endGather?: () => void;

  constructor(
    private readonly config: AppConfig,
    private readonly db: DatabaseProvider,
    private readonly inbox: EnqueueInboxRepository,
    private readonly runner: TurnRunner,
    private readonly stats: EnqueueStats,
    notifications: ItemNotifications,
    private readonly sweeps: SweepClock,
  ) {
    notifications.onItems((payload) => {
      if (payload === ENQUEUE_WAKE) this.wake();
    });
    // Wake-ups sent while the connection was away are lost: look once it is back.
    notifications.onListening(() => this.wake());
  }

  /** Carries until nothing waits to be carried and no commit that enqueued is under way (see the class). */
  wake(): void {
    this.woken = true;
    this.endPause?.();
    if (this.active || this.closed) return;
    this.active = this.carryUntilSettled()
      .catch((error: unknown) => this.logger.warn(`Carrying SQL-enqueued items failed: ${message(error)}`))
      .finally(() => (this.active = undefined));
  }

  private async carryUntilSettled(): Promise<void> {
    await this.db.ready;
    let pauseMs = 0;
    let lastRemoved = 0;
    while (!this.closed) {
      this.woken = false;
      const started = performance.now();
      // Right after a carriage that moved rows more are likely: no probe first.
      const carriage = await this.carry(lastRemoved === 0);
      lastRemoved = carriage?.removed ?? 0;
      // Another process is carrying: it looks again after its carriage, as this loop would.
      if (carriage === undefined) return;
      if (carriage.removed > 0 || this.woken) {
        pauseMs = 0;
        // A carriage that took less than a full batch left nothing behind: let the next one gather what commits meanwhile.
        if (carriage.removed > 0 && carriage.taken < CARRY_BATCH) await this.gather(started);
        continue;
      }
      if (carriage.taken > 0) {
        // Every queue's push failed (its line full, the database away): try again after a pause, not at once.
        pauseMs = await this.pause(pauseMs);
        continue;
      }
      const state = await this.inbox.settled();
      if (state === 'idle' && !this.woken) return;
      if (state === 'committing') pauseMs = await this.pause(pauseMs);
    }
  }

  /**
   * Waits until {@link AppConfig} `ENQUEUE_GATHER_MS` after `started` (the start of the carriage
   * before): rows committed meanwhile go in one carriage, each queue's share in one push, instead
   * of a push and a commit per queue for every few rows. Wake-ups do not end it (a busy stream
   * of commits sends few, and the next carriage is coming); closing does.
   */
  private async gather(started: number): Promise<void> {
    const ms = started + this.config.env.ENQUEUE_GATHER_MS - performance.now();
    if (ms <= 0 || this.closed) return;
    await delay(ms, (end) => (this.endGather = end));
    this.endGather = undefined;
  }

  /** Waits twice as long as last time (from {@link SETTLE_FIRST_MS} up to {@link SETTLE_MAX_MS}), or until a wake-up; answers how long it meant to. */
  private async pause(lastMs: number): Promise<number> {
    const ms = Math.min(SETTLE_MAX_MS, Math.max(SETTLE_FIRST_MS, lastMs * 2));
    await delay(ms, (end) => (this.endPause = end));
    this.endPause = undefined;
    return ms;
  }

  onApplicationBootstrap(): void {
    const { MAX_ITEM_BYTES, MAX_PRIORITY } = this.config.env;
    this.db.ready.then(
      () =>
        this.inbox
          .setLimits(MAX_ITEM_BYTES, MAX_PRIORITY)
          .catch((error: unknown) => this.logger.warn(`Could not set the limits of pushpop_enqueue: ${message(error)}`)),
      () => undefined,
    );
    // The idle probe, one question of the sweeps' statement: finding rows (a wake-up was lost) starts carrying.
    this.probe = this.sweeps.register({
      what: 'Carrying SQL-enqueued items',
      question: (now) => ({ work: 'enqueuedCommitted', at: now }),
      intervalMs: () => IDLE_INTERVAL_MS,
      sweep: async () => {
        this.wake();
        return false;
      },
    });
  }

  async onModuleDestroy(): Promise<void> {
    this.closed = true;
    this.endPause?.();
    this.endGather?.();
    await this.probe?.stop();
    await this.active;
  }

  /**
   * One carriage: the rows it took and those it removed (carried or dropped; a queue whose push
   * failed keeps its rows); undefined when another process holds the carrier lock. `probe`:
   * ask first, in one index probe outside any transaction, whether anything waits.
   */
  async carry(probe = true): Promise<{ taken: number; removed: number } | undefined> {
    if (probe && !(await this.inbox.anyCommitted())) return { taken: 0, removed: 0 };
    return this.inbox.underCarrierLock(async (session) => {
      const { rows, xids } = await this.inbox.next(session, CARRY_BATCH);
      const byQueue = new Map<string, EnqueuedRow[]>();
      for (const row of rows) {
        const queueRows = byQueue.get(row.queueId);
        if (queueRows) queueRows.push(row);
        else byQueue.set(row.queueId, [row]);
      }
      let removed = 0;
      /** Rows no push deletes: all those of a part none of whose rows this process can push. */
      const dropped: EnqueuedRow[] = [];
      await Promise.all(
        [...byQueue].map(async ([queueId, queueRows]) => {
          for (let from = 0; from < queueRows.length; from += PUSH_MAX) {
            const part = queueRows.slice(from, from + PUSH_MAX);
            const items: NewItem[] = [];
            for (const row of part) {
              const item = this.itemOf(row);
              if (item) items.push(item);
            }
            try {
              // The part's rows, dropped ones included, are deleted in the push's commit.
              if (items.length > 0) await this.runner.push(queueId, items, this.inbox.claim(part));
              else dropped.push(...part);
            } catch (error) {
              // This part and the queue's later ones stay, in order, for the next carriage.
              this.logger.warn(`Could not carry ${queueRows.length - from} SQL-enqueued item(s) into queue ${queueId}, trying again: ${message(error)}`);
              return;
            }
            removed += part.length;
            this.stats.rowsCarried += items.length;
            this.stats.rowsDropped += part.length - items.length;
          }
        }),
      );
      await this.inbox.remove(session, dropped, xids);
      return { taken: rows.length, removed };
    });
  }

  /** The item a row stands for, checked as an HTTP push checks it; undefined (and logged) when this process cannot push it. */
  private itemOf(row: EnqueuedRow): NewItem | undefined {
    const { MAX_ITEM_BYTES, MAX_PRIORITY } = this.config.env;
    try {
      if (row.priority > MAX_PRIORITY) throw new Error(`priority ${row.priority} is above MAX_PRIORITY ${MAX_PRIORITY}`);
      const headers = row.headers === null ? undefined : encodeHeaders(JSON.parse(row.headers) as Record<string, string>, undefined);
      return {
        priority: row.priority,
        json: encodeItem(JSON.parse(row.item), MAX_ITEM_BYTES),
        ...(headers === undefined ? {} : { headers }),
        delayMs: row.delayMs,
        ...(row.dedupId === null ? {} : { dedupId: row.dedupId }),
      };
    } catch (error) {
      this.logger.warn(`Dropped SQL-enqueued item ${row.seq} of queue ${row.queueId}: ${message(error)}`);
      return undefined;
    }
  }
}
