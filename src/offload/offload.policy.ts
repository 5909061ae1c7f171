import { Injectable, Logger } from '@nestjs/common';
import { QueueActor, SegmentMover, TurnContext } from '../queue/queue-actor.js';
import { OffloadStats } from './offload-stats.js';
import { offloadedSegmentKey, OffloadStore } from './offload-store.js';

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * Seed 003's offloading rules with the contract's corrections.
 *
 * Invariants:
 * - the offloaded range of a priority is contiguous (`head_offloaded_segment..tail_offloaded_segment`)
 *   and lies strictly between `head_segment + buffer_segments` and `tail_segment`; it grows at
 *   its top after pushes and shrinks at its bottom before head access;
 * - at rest no segment with `n <= head_segment + buffer_segments` is offloaded, unless a load
 *   failed — then the next turn retries, and a pop never passes a head it could not load;
 * - a segment is always in at least one place: written to the store before its rows are
 *   deleted, and deleted from the store only once its rows are back (in the same transaction
 *   for a transactional store, after commit otherwise).
 * Each move runs under a savepoint, so a failing move undoes only itself and the push or pop
 * that triggered it goes on.
 */
@Injectable()
export class OffloadPolicy extends SegmentMover {
  private readonly logger = new Logger('Offload');
  readonly stats = new OffloadStats();

  constructor(private readonly store: OffloadStore) {
    super();
  }

  async afterPush(actor: QueueActor, ctx: TurnContext, priority: number): Promise<void> {
    const meta = actor.meta(priority);
    if (!meta) return;
    let next = meta.tail_offloaded_segment !== null ? meta.tail_offloaded_segment + 1 : meta.head_segment + actor.bufferSegments + 1;
    while (next < meta.tail_segment) {
      const segment = next;
      const key = offloadedSegmentKey(priority, segment, actor.queueId);
      try {
        await ctx.segments.withSavepoint(ctx.tx, async () => {
          const items = await actor.segmentItems(ctx, priority, segment);
          await this.store.save(key, actor.queueId, items, ctx);
          await ctx.segments.deleteSegment(ctx.tx, actor.queueId, priority, segment);
        });
      } catch (error) {
        this.stats.offloadFailures += 1;
        this.logger.warn(`Failed to offload segment ${segment} for priority ${priority} (actor ${actor.queueId}): ${message(error)}`);
        return;
      }
      actor.dropSegment(priority, segment);
      actor.setOffloadedRange(priority, meta.head_offloaded_segment ?? segment, segment);
      this.stats.segmentsOffloaded += 1;
      this.logger.log(`Offloaded segment ${segment} for priority ${priority} to state store (actor ${actor.queueId})`);
      next = segment + 1;
    }
  }

  async beforeHeadAccess(actor: QueueActor, ctx: TurnContext, priority: number): Promise<void> {
    const meta = actor.meta(priority);
    while (meta && meta.head_offloaded_segment !== null && meta.head_offloaded_segment <= meta.head_segment + actor.bufferSegments) {
      const segment = meta.head_offloaded_segment;
      const key = offloadedSegmentKey(priority, segment, actor.queueId);
      const started = performance.now();
      let entries;
      try {
        entries = await ctx.segments.withSavepoint(ctx.tx, async () => {
          const items = await this.store.load(key, ctx);
          if (!items) throw new Error(`nothing stored under ${key}`);
          const loaded = items.map((json, position) => ({ position, json }));
          await ctx.segments.insertItems(ctx.tx, actor.queueId, [{ priority, segment, entries: loaded }]);
          if (this.store.transactional) await this.store.delete([key], ctx);
          // A head that failed to load earlier may already hold items returned by a lock
          // (positions below 0): what the actor keeps in memory must be all of its rows.
          return segment === meta.head_segment ? ctx.segments.loadSegment(ctx.tx, actor.queueId, priority, segment) : loaded;
        });
      } catch (error) {
        this.stats.loadFailures += 1;
        this.logger.error(`Failed to load segment ${segment} for priority ${priority} (actor ${actor.queueId}): ${message(error)}`);
        return;
      }
      if (!this.store.transactional) ctx.afterCommit(() => this.store.delete([key], ctx));
      const tail = meta.tail_offloaded_segment!;
      actor.setOffloadedRange(priority, segment < tail ? segment + 1 : null, segment < tail ? tail : null);
      actor.adoptSegment(priority, segment, entries);
      this.stats.segmentsLoaded += 1;
      this.stats.loadSeconds.push((performance.now() - started) / 1000);
      this.logger.log(`Loaded segment ${segment} for priority ${priority} from state store (actor ${actor.queueId})`);
    }
  }

  /** Keys of every offloaded segment of the actor (queue deletion). */
  offloadedKeys(actor: QueueActor): string[] {
    const keys: string[] = [];
    for (const priority of actor.priorityList()) {
      const meta = actor.meta(priority)!;
      if (meta.head_offloaded_segment === null || meta.tail_offloaded_segment === null) continue;
      for (let n = meta.head_offloaded_segment; n <= meta.tail_offloaded_segment; n++) keys.push(offloadedSegmentKey(priority, n, actor.queueId));
    }
    return keys;
  }

  /** Deletes the actor's offloaded segments (queue deletion). */
  async deleteAll(actor: QueueActor, ctx: TurnContext): Promise<void> {
    const keys = this.offloadedKeys(actor);
    if (keys.length === 0) return;
    if (this.store.transactional) await this.store.delete(keys, ctx);
    else ctx.afterCommit(() => this.store.delete(keys, ctx));
  }

  /** Reads an offloaded segment for inspection; undefined unless the metadata says it is offloaded. */
  async inspect(actor: QueueActor, ctx: TurnContext, priority: number, segment: number): Promise<string[] | undefined> {
    const meta = actor.meta(priority);
    if (!meta || meta.head_offloaded_segment === null || meta.tail_offloaded_segment === null) return undefined;
    if (segment < meta.head_offloaded_segment || segment > meta.tail_offloaded_segment) return undefined;
    return this.store.load(offloadedSegmentKey(priority, segment, actor.queueId), ctx);
  }
}
