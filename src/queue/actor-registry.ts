import { Injectable, Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { KeyedMutex, KeyedMutexBusyError } from '@pushpop/keyed-mutex';
import { DataSource, EntityManager } from 'typeorm';
import { AppConfig } from '../config/app-config.js';
import { QueueBusyError } from '../common/errors.js';
import type { QueueRow } from '../segment-storage/queue-metadata.js';
import { SegmentRepository } from '../segment-storage/segment.repository.js';
import { QueueActor, TurnContext } from './queue-actor.js';

/** What a turn's function receives: the actor (undefined when the queue does not exist) and the transaction. */
export interface Turn extends TurnContext {
  readonly actor: QueueActor | undefined;
}

/** Turn modes: `create` makes the queue if it is missing (push); `existing` does not. */
export type TurnMode = 'create' | 'existing';

/**
 * The virtual-actor runtime: activates a queue's actor on first use, gives it one turn at a
 * time, and deactivates it when idle. Hand-written because it is the core of the service's
 * correctness; no library combines a per-key turn with a database row lock and a version check.
 *
 * A turn is: the queue's keyed mutex in this process (FIFO, bounded waiting line) → a database
 * transaction → the queue row locked `FOR UPDATE` (serialising turns across processes) → the
 * cached actor reused only if its version equals the row's, else rebuilt from the row → the
 * work → metadata saved under a new version → commit. If anything fails the actor is
 * discarded, so the next turn reloads from the committed state.
 *
 * The turn function receives the transaction; several operations waiting on one queue can be
 * applied inside a single turn and so committed together.
 */
@Injectable()
export class ActorRegistry implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('ActorRegistry');
  private readonly actors = new Map<string, QueueActor>();
  private readonly mutex: KeyedMutex;
  private sweepTimer?: NodeJS.Timeout;
  /** Observes each turn's database time (metrics). */
  observer?: { turn(seconds: number, ok: boolean): void };

  constructor(
    private readonly config: AppConfig,
    private readonly dataSource: DataSource,
    private readonly segments: SegmentRepository,
  ) {
    this.mutex = new KeyedMutex({ maxWaitersPerKey: config.env.MAX_PENDING_PER_QUEUE });
  }

  onModuleInit(): void {
    const idle = this.config.env.ACTOR_IDLE_TIMEOUT_MS;
    this.sweepTimer = setInterval(() => this.deactivateIdle(Date.now() - idle), Math.max(50, Math.min(idle / 2, 10_000)));
    this.sweepTimer.unref();
  }

  onModuleDestroy(): void {
    clearInterval(this.sweepTimer);
  }

  /** Runs `fn` as one turn of the queue's actor (see class doc). */
  async turn<T>(queueId: string, mode: TurnMode, fn: (turn: Turn) => Promise<T>): Promise<T> {
    try {
      return await this.mutex.run(queueId, () => this.runTurn(queueId, mode, fn));
    } catch (error) {
      if (error instanceof KeyedMutexBusyError) throw new QueueBusyError(queueId);
      throw error;
    }
  }

  private async runTurn<T>(queueId: string, mode: TurnMode, fn: (turn: Turn) => Promise<T>): Promise<T> {
    let actor: QueueActor | undefined;
    const afterCommit: (() => Promise<void>)[] = [];
    const started = performance.now();
    try {
      const result = await this.dataSource.transaction(async (tx) => {
        actor = await this.activate(tx, queueId, mode);
        const value = await fn({ actor, tx, segments: this.segments, afterCommit: (task) => afterCommit.push(task) });
        if (actor?.dirty) actor.version = await this.segments.saveQueue(tx, queueId, actor.count, actor.metadataRecord());
        return value;
      });
      this.observer?.turn((performance.now() - started) / 1000, true);
      if (actor) {
        actor.committed(actor.version);
        actor.lastUsed = Date.now();
      }
      // Still inside the queue's turn: nothing else of this queue runs until these are done.
      for (const task of afterCommit) {
        await task().catch((error: unknown) => this.logger.warn(`After-commit task of queue ${queueId} failed: ${error instanceof Error ? error.message : String(error)}`));
      }
      return result;
    } catch (error) {
      this.observer?.turn((performance.now() - started) / 1000, false);
      this.deactivate(queueId);
      throw error;
    }
  }

  private async activate(tx: EntityManager, queueId: string, mode: TurnMode): Promise<QueueActor | undefined> {
    const { segmentSize, bufferSegments } = this.config.queueDefaults;
    const row: QueueRow | undefined =
      mode === 'create' ? await this.segments.lockOrCreateQueue(tx, queueId, segmentSize, bufferSegments) : await this.segments.lockQueue(tx, queueId);
    if (!row) {
      this.deactivate(queueId);
      return undefined;
    }
    const cached = this.actors.get(queueId);
    if (cached && cached.version === row.version && !cached.dirty) return cached;
    if (cached) cached.clear();
    const actor = new QueueActor(queueId, row);
    this.actors.set(queueId, actor);
    return actor;
  }

  /** Drops a queue's actor from memory; its state stays in the database. */
  deactivate(queueId: string): void {
    const actor = this.actors.get(queueId);
    if (!actor) return;
    actor.clear();
    this.actors.delete(queueId);
  }

  /** Deactivates actors unused since `before` that are not in a turn. */
  deactivateIdle(before: number): number {
    let dropped = 0;
    for (const [queueId, actor] of this.actors) {
      if (actor.lastUsed < before && !this.mutex.isHeld(queueId)) {
        this.deactivate(queueId);
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

  /** Items held in memory over all actors. */
  get itemsInMemory(): number {
    let total = 0;
    for (const actor of this.actors.values()) total += actor.itemsInMemory;
    return total;
  }

  /** Operations waiting for a turn over all queues. */
  get waitingOperations(): number {
    return this.mutex.totalWaiting;
  }

  /** The actor in memory for a queue, if any (inspection and tests). */
  peek(queueId: string): QueueActor | undefined {
    return this.actors.get(queueId);
  }
}
