import { randomBytes } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import type { PushpopError } from '../common/errors.js';
import { ActorRegistry, Turn, TurnMode } from '../queue/actor-registry.js';
import type { PoppedItem, QueueActor, SegmentMover, TurnContext } from '../queue/queue-actor.js';
import type { LockState } from './lock-state.js';
import { InvalidLockIdError, LockExpiredError, LockIdRequiredError, LockNotFoundError, QueueLockedError } from './lock.errors.js';
import { LockRepository } from './lock.repository.js';

/** A turn whose actor exists (the queue has a row). */
export type ActorTurn = Turn & { readonly actor: QueueActor };

/** Observers of lock events (metrics). */
export interface LockEvents {
  expired(items: number): void;
  released(items: number): void;
}

/**
 * Acknowledgement locks (seed 004 with the contract's corrections). A lock lives with its
 * queue's actor and is persisted in the same transaction as the turn that changed it, so a
 * lock and its items survive a crash and still expire on schedule.
 *
 * Invariant: every turn starts with {@link prepare}, which returns the items of a lock whose
 * time has come to the front of their original priorities before the operation looks at the
 * queue — so no operation ever sees an expired lock as active, and an expired lock's items
 * are never dropped.
 */
@Injectable()
export class LockService {
  private readonly logger = new Logger('Locks');
  events?: LockEvents;

  constructor(
    private readonly actors: ActorRegistry,
    private readonly locks: LockRepository,
    private readonly clock: Clock,
  ) {}

  /** Runs a turn of the queue's actor with its lock loaded and expiry applied. */
  turn<T>(queueId: string, mode: TurnMode, fn: (turn: Turn) => Promise<T>, mover?: SegmentMover): Promise<T> {
    return this.actors.turn(queueId, mode, async (turn) => {
      if (turn.actor) await this.prepare(turn.actor, turn, mover);
      return fn(turn);
    });
  }

  /** Loads the actor's lock if not in memory and expires it if due. */
  private async prepare(actor: QueueActor, ctx: TurnContext, mover?: SegmentMover): Promise<void> {
    if (actor.lock === undefined) actor.lock = await this.locks.load(ctx.tx, actor.queueId);
    const lock = actor.lock;
    if (lock?.state !== 'active' || lock.expiresAt > this.clock.now()) return;
    const items = lock.items;
    await actor.returnToFront(ctx, items, mover);
    actor.lock = { ...lock, state: 'expired', items: [] };
    await this.locks.save(ctx.tx, actor.queueId, actor.lock);
    actor.dirty = true;
    this.logger.log(`Lock on queue ${actor.queueId} expired; ${items.length} item(s) returned to the front`);
    this.events?.expired(items.length);
  }

  /** The 423 answer while an unexpired lock exists. */
  lockedError(actor: QueueActor): PushpopError | undefined {
    return actor.lock?.state === 'active' ? new QueueLockedError(actor.lock.expiresAt) : undefined;
  }

  /** Holds popped items under a new lock. */
  async create(actor: QueueActor, ctx: TurnContext, items: PoppedItem[], ttlSeconds: number): Promise<LockState> {
    const now = this.clock.now();
    // 8 random bytes -> 11 URL-safe characters, as seed 004's token_urlsafe(8).
    const lock: LockState = { lockId: randomBytes(8).toString('base64url'), state: 'active', items, createdAt: now, expiresAt: now + ttlSeconds * 1000 };
    await this.locks.save(ctx.tx, actor.queueId, lock);
    actor.lock = lock;
    actor.dirty = true;
    return lock;
  }

  /**
   * The contract's check order for acknowledge, extend-lock and release: lock_id present,
   * a lock exists, not expired, id matches.
   */
  check(actor: QueueActor | undefined, lockId: unknown): { lock: LockState; actor: QueueActor } | PushpopError {
    if (typeof lockId !== 'string' || lockId === '') return new LockIdRequiredError();
    const lock = actor?.lock;
    if (!actor || !lock) return new LockNotFoundError();
    if (lock.state === 'expired') return new LockExpiredError();
    if (lock.lockId !== lockId) return new InvalidLockIdError();
    return { lock, actor };
  }

  /** Removes the lock and its items for good. */
  async acknowledge(actor: QueueActor, ctx: TurnContext): Promise<number> {
    const count = actor.lock?.items.length ?? 0;
    await this.locks.delete(ctx.tx, actor.queueId);
    actor.lock = null;
    actor.dirty = true;
    return count;
  }

  async extend(actor: QueueActor, ctx: TurnContext, lock: LockState, ttlSeconds: number): Promise<LockState> {
    const extended = { ...lock, expiresAt: this.clock.now() + ttlSeconds * 1000 };
    await this.locks.save(ctx.tx, actor.queueId, extended);
    actor.lock = extended;
    actor.dirty = true;
    return extended;
  }

  /** Gives the items back now, to the front of their priorities, and removes the lock. */
  async release(actor: QueueActor, ctx: TurnContext, lock: LockState, mover?: SegmentMover): Promise<number> {
    await actor.returnToFront(ctx, lock.items, mover);
    await this.locks.delete(ctx.tx, actor.queueId);
    actor.lock = null;
    actor.dirty = true;
    this.events?.released(lock.items.length);
    return lock.items.length;
  }

  /** Drops the lock with the queue (queue deletion); returns how many items it held. */
  async discard(actor: QueueActor, ctx: TurnContext): Promise<number> {
    const held = actor.lock?.state === 'active' ? actor.lock.items.length : 0;
    await this.locks.delete(ctx.tx, actor.queueId);
    actor.lock = null;
    return held;
  }
}
