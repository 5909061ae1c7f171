import { Injectable, Logger, OnModuleDestroy, OnModuleInit, Optional } from '@nestjs/common';
import { KeyedMutex } from '@pushpop/keyed-mutex';
import { AppConfig } from '../../config/app-config.js';
import { Clock } from '../../common/clock.js';
import type { QueueCore } from '../core/queue-core.js';
import { SegmentReadAhead } from './segment-read-ahead.js';

/**
 * The virtual actors in memory: one {@link QueueCore} per active queue id, and the keyed mutex
 * that gives each queue one turn at a time in this process. An actor is activated by the turn
 * runner on first use, kept while it matches the stored queue, and deactivated when idle
 * (`ACTOR_IDLE_TIMEOUT_MS`) or when a turn failed (the next turn reloads it). The mutex deletes
 * its entry for a queue with no holder and no waiter, so a million distinct queue ids do not
 * grow memory for ever.
 */
@Injectable()
export class ActorRegistry implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('ActorRegistry');
  private readonly actors = new Map<string, { core: QueueCore; lastUsed: number }>();
  /**
   * One turn at a time per queue id: held by a drain of the queue's line from its first turn to
   * its last (see TurnLines), which is where operations wait. No turn runs another of its queue,
   * so no re-entrancy (and no AsyncLocalStorage).
   */
  readonly turns = new KeyedMutex({ reentrant: false });
  private sweepTimer?: NodeJS.Timeout;

  constructor(
    private readonly config: AppConfig,
    private readonly clock: Clock,
    @Optional() private readonly readAhead?: SegmentReadAhead,
  ) {}

  onModuleInit(): void {
    const idle = this.config.env.ACTOR_IDLE_TIMEOUT_MS;
    this.sweepTimer = setInterval(() => this.deactivateIdle(this.clock.now() - idle), Math.max(50, Math.min(idle / 2, 10_000)));
    this.sweepTimer.unref();
  }

  onModuleDestroy(): void {
    clearInterval(this.sweepTimer);
  }

  /** The actor of a queue, if active (called inside the queue's turn). */
  get(queueId: string): QueueCore | undefined {
    return this.actors.get(queueId)?.core;
  }

  /** Keeps a queue's actor after a committed turn. */
  set(queueId: string, core: QueueCore): void {
    const actor = this.actors.get(queueId);
    // The same record while the actor stays: a new one per turn would only be garbage.
    if (actor?.core === core) actor.lastUsed = this.clock.now();
    else this.actors.set(queueId, { core, lastUsed: this.clock.now() });
  }

  /** Drops a queue's actor from memory; its state stays in the database. */
  deactivate(queueId: string): void {
    this.actors.delete(queueId);
  }

  /** Deactivates actors unused since `before` that are not in a turn. */
  deactivateIdle(before: number): number {
    let dropped = 0;
    for (const [queueId, actor] of this.actors) {
      if (actor.lastUsed < before && !this.turns.isHeld(queueId)) {
        this.actors.delete(queueId);
        dropped += 1;
      }
    }
    if (dropped > 0) this.logger.debug(`Deactivated ${dropped} idle actor(s)`);
    return dropped;
  }

  /** Number of actors in memory. */
  get activeActors(): number {
    return this.actors.size;
  }

  /** Items held in memory over all actors, with the segments read ahead for them. */
  get itemsInMemory(): number {
    let total = 0;
    for (const { core } of this.actors.values()) total += core.itemsInMemory + (this.readAhead?.itemsOf(core) ?? 0);
    return total;
  }

  /** The actor in memory for a queue, if any (inspection and tests). */
  peek(queueId: string): QueueCore | undefined {
    return this.actors.get(queueId)?.core;
  }
}
