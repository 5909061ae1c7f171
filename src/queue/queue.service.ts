import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { AppConfig } from '../config/app-config.js';
import { PushpopError, QueueNotFoundError, StateKeyNotFoundError, ValidationFailedError } from '../common/errors.js';
import { LockIdRequiredError } from '../lock/lock.errors.js';
import { LockService } from '../lock/lock.service.js';
import { Clock } from '../common/clock.js';
import { ActorRegistry } from './actor-registry.js';
import { SegmentRepository } from '../segment-storage/segment.repository.js';
import { encodeItem } from './item-codec.js';
import { QueueEvents } from './queue-events.js';
import { QUEUE_ID_PATTERN } from './queue-id.pipe.js';
import { QueueActor, SegmentMover } from './queue-actor.js';
import type { Turn, TurnMode } from './actor-registry.js';

export interface PopOptions {
  depth: number;
  requireAck: boolean;
  ttlSeconds: number;
  waitSeconds: number;
}

export interface PopResult {
  items: Record<string, unknown>[];
  count: number;
  locked?: boolean;
  lock_id?: string;
  lock_expires_at?: number;
}

export interface PriorityInfo {
  count: number;
  head_segment: number;
  tail_segment: number;
  head_offloaded_segment: number | null;
  tail_offloaded_segment: number | null;
  head_segment_count: number;
  tail_segment_count: number;
}

export interface QueueInfo {
  queue_id: string;
  count: number;
  priorities: Record<string, PriorityInfo>;
  config: { segment_size: number; buffer_segments: number };
  lock: { expires_at: number; created_at: number; item_count: number } | null;
}

/** How often a long-polling pop re-checks the store for items pushed by another process. */
const LONG_POLL_RECHECK_MS = 500;

const SEGMENT_KEY = /^queue_(\d{1,9})_seg_(\d{1,15})$/;
const OFFLOADED_KEY = /^offloaded_queue_(\d{1,9})_seg_(\d{1,15})_(.+)$/;

/**
 * The queue operations of the HTTP contract, each run as one turn of the queue's actor.
 */
@Injectable()
export class QueueService {
  constructor(
    private readonly config: AppConfig,
    private readonly actors: ActorRegistry,
    private readonly locks: LockService,
    private readonly clock: Clock,
    private readonly mover: SegmentMover,
    private readonly events: QueueEvents,
    private readonly dataSource: DataSource,
    private readonly segments: SegmentRepository,
  ) {}

  /** One turn of the queue's actor, its lock loaded and expired if due. */
  private turn<T>(queueId: string, mode: TurnMode, fn: (turn: Turn) => Promise<T>): Promise<T> {
    return this.locks.turn(queueId, mode, fn, this.mover);
  }

  private checkPriority(priority: number | undefined, field = 'priority'): number {
    const p = priority ?? 0;
    if (p > this.config.env.MAX_PRIORITY) throw new ValidationFailedError(`${field} must not be greater than ${this.config.env.MAX_PRIORITY}`);
    return p;
  }

  async push(queueId: string, item: unknown, priority: number | undefined): Promise<{ priority: number }> {
    const p = this.checkPriority(priority);
    const json = encodeItem(item, this.config.env.MAX_ITEM_BYTES);
    await this.turn(queueId, 'create', async ({ actor, ...ctx }) => actor!.push(ctx, [{ priority: p, json }], this.mover));
    this.events.notify(queueId);
    return { priority: p };
  }

  async pushBatch(queueId: string, entries: { item: unknown; priority?: number }[]): Promise<number> {
    const items = entries.map((entry, i) => ({
      priority: this.checkPriority(entry.priority, `items.${i}.priority`),
      json: encodeItem(entry.item, this.config.env.MAX_ITEM_BYTES, `items.${i}.item`),
    }));
    await this.turn(queueId, 'create', async ({ actor, ...ctx }) => actor!.push(ctx, items, this.mover));
    this.events.notify(queueId);
    return items.length;
  }

  /**
   * Pops, optionally under a new lock. While an unexpired lock exists every pop answers 423.
   * A long poll waits outside the turn and tries again when a push arrives.
   */
  async pop(queueId: string, options: PopOptions): Promise<PopResult> {
    const deadline = Date.now() + options.waitSeconds * 1000;
    for (;;) {
      const outcome = await this.turn(queueId, 'existing', async ({ actor, ...ctx }): Promise<PopResult | PushpopError> => {
        if (!actor) return options.requireAck ? { items: [], count: 0, locked: false } : { items: [], count: 0 };
        const locked = this.locks.lockedError(actor);
        if (locked) return locked;
        const popped = await actor.pop(ctx, options.depth, this.mover);
        const items = popped.map((i) => JSON.parse(i.json) as Record<string, unknown>);
        if (!options.requireAck) return { items, count: items.length };
        if (popped.length === 0) return { items, count: 0, locked: false };
        const lock = await this.locks.create(actor, ctx, popped, options.ttlSeconds);
        return { items, count: items.length, locked: true, lock_id: lock.lockId, lock_expires_at: lock.expiresAt / 1000 };
      });
      if (outcome instanceof PushpopError) throw outcome;
      const remaining = deadline - Date.now();
      if (outcome.count > 0 || remaining <= 0 || this.events.closed) return outcome;
      await this.events.wait(queueId, Math.min(remaining, LONG_POLL_RECHECK_MS));
    }
  }

  /** Removes the lock's items for good. */
  async acknowledge(queueId: string, lockId: unknown): Promise<number> {
    return this.lockOperation(queueId, lockId, (actor, ctx) => this.locks.acknowledge(actor, ctx));
  }

  /** Sets the lock's expiry to now + ttl; returns the new expiry in unix seconds. */
  async extendLock(queueId: string, lockId: unknown, ttlSeconds: number): Promise<number> {
    return this.lockOperation(queueId, lockId, async (actor, ctx, lock) => (await this.locks.extend(actor, ctx, lock, ttlSeconds)).expiresAt / 1000);
  }

  /** Gives the lock's items back to the front of their priorities now. */
  async release(queueId: string, lockId: unknown): Promise<number> {
    const returned = await this.lockOperation(queueId, lockId, (actor, ctx, lock) => this.locks.release(actor, ctx, lock, this.mover));
    if (returned > 0) this.events.notify(queueId);
    return returned;
  }

  /**
   * Runs a lock operation after the contract's checks. A failed check is thrown only after the
   * turn commits, so an expiry applied at the start of the turn is kept.
   */
  private async lockOperation<T>(
    queueId: string,
    lockId: unknown,
    fn: (actor: QueueActor, ctx: Turn, lock: NonNullable<QueueActor['lock']>) => Promise<T>,
  ): Promise<T> {
    // First in the contract's order, and needs no turn.
    if (typeof lockId !== 'string' || lockId === '') throw new LockIdRequiredError();
    const outcome = await this.turn(queueId, 'existing', async (turn): Promise<{ value: T } | PushpopError> => {
      const checked = this.locks.check(turn.actor, lockId);
      if (checked instanceof PushpopError) return checked;
      return { value: await fn(checked.actor, turn, checked.lock) };
    });
    if (outcome instanceof PushpopError) throw outcome;
    return outcome.value;
  }

  async getQueue(queueId: string): Promise<QueueInfo> {
    return this.turn(queueId, 'existing', async ({ actor }) => {
      if (!actor) throw new QueueNotFoundError(queueId);
      const lock = actor.lock?.state === 'active' ? actor.lock : undefined;
      const priorities: Record<string, PriorityInfo> = {};
      for (const p of actor.priorityList()) {
        const m = actor.meta(p)!;
        priorities[String(p)] = {
          count: m.count,
          head_segment: m.head_segment,
          tail_segment: m.tail_segment,
          head_offloaded_segment: m.head_offloaded_segment,
          tail_offloaded_segment: m.tail_offloaded_segment,
          // Middle segments are full and the tail is only ever pushed to, so both follow from the pointers.
          head_segment_count: m.head_segment === m.tail_segment ? m.count : m.count - m.next_position - (m.tail_segment - m.head_segment - 1) * actor.segmentSize,
          tail_segment_count: m.head_segment === m.tail_segment ? m.count : m.next_position,
        };
      }
      return {
        queue_id: queueId,
        count: actor.count,
        priorities,
        config: { segment_size: actor.segmentSize, buffer_segments: actor.bufferSegments },
        lock: lock ? { expires_at: lock.expiresAt / 1000, created_at: lock.createdAt / 1000, item_count: lock.items.length } : null,
      };
    });
  }

  /** The raw state under seed 003's key names (see the contract's state endpoint). */
  async getState(queueId: string, key: string): Promise<unknown> {
    return this.turn(queueId, 'existing', async (turn) => {
      const { actor } = turn;
      if (!actor) throw new StateKeyNotFoundError(key);
      if (key === 'metadata') return this.metadataDocument(actor);
      const offloaded = OFFLOADED_KEY.exec(key);
      if (offloaded && offloaded[3] === queueId) {
        const jsons = await this.mover.inspect(actor, turn, Number(offloaded[1]), Number(offloaded[2]));
        if (jsons) return jsons.map((j) => JSON.parse(j) as unknown);
        throw new StateKeyNotFoundError(key);
      }
      const match = SEGMENT_KEY.exec(key);
      if (match) {
        const priority = Number(match[1]);
        const segment = Number(match[2]);
        const meta = actor.meta(priority);
        const inState =
          meta !== undefined &&
          segment >= meta.head_segment &&
          segment <= meta.tail_segment &&
          !(meta.head_offloaded_segment !== null && segment >= meta.head_offloaded_segment && segment <= meta.tail_offloaded_segment!);
        if (inState) {
          const jsons = await actor.segmentItems(turn, priority, segment);
          if (jsons.length > 0) return jsons.map((j) => JSON.parse(j) as unknown);
        }
      }
      throw new StateKeyNotFoundError(key);
    });
  }

  private metadataDocument(actor: QueueActor): unknown {
    const queues: Record<string, { metadata: Record<string, number> }> = {};
    for (const p of actor.priorityList()) {
      const m = actor.meta(p)!;
      const metadata: Record<string, number> = { count: m.count, head_segment: m.head_segment, tail_segment: m.tail_segment };
      if (m.head_offloaded_segment !== null && m.tail_offloaded_segment !== null) {
        metadata.head_offloaded_segment = m.head_offloaded_segment;
        metadata.tail_offloaded_segment = m.tail_offloaded_segment;
      }
      queues[`queue_${p}`] = { metadata };
    }
    return { config: { segment_size: actor.segmentSize, buffer_segments: actor.bufferSegments }, queues };
  }

  async listQueues(prefix: string, limit: number, cursor: string | undefined): Promise<{ queues: { queue_id: string; count: number; locked: boolean }[]; next_cursor: string | null }> {
    let after: string | undefined;
    if (cursor !== undefined && cursor !== '') {
      after = Buffer.from(cursor, 'base64url').toString('utf8');
      if (!QUEUE_ID_PATTERN.test(after)) throw new ValidationFailedError('cursor is not a cursor this service returned');
    }
    const rows = await this.segments.listQueues(this.dataSource.manager, prefix, after, limit + 1);
    const page = rows.slice(0, limit);
    const next = rows.length > limit ? Buffer.from(page.at(-1)!.queueId, 'utf8').toString('base64url') : null;
    const now = this.clock.now();
    return {
      queues: page.map((r) => ({ queue_id: r.queueId, count: r.count, locked: r.lockExpiresAt !== null && r.lockExpiresAt > now })),
      next_cursor: next,
    };
  }

  async deleteQueue(queueId: string): Promise<number> {
    return this.turn(queueId, 'existing', async (turn) => {
      const { actor, tx, segments } = turn;
      if (!actor) throw new QueueNotFoundError(queueId);
      const deleted = actor.count + (await this.locks.discard(actor, turn));
      await this.mover.deleteAll(actor, turn);
      await segments.deleteQueue(tx, queueId);
      actor.dirty = false;
      this.actors.deactivate(queueId);
      return deleted;
    });
  }
}
