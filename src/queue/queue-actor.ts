import type { EntityManager } from 'typeorm';
import type { PriorityMetadata, QueueRow, SegmentEntry, SegmentInsert } from '../segment-storage/queue-metadata.js';
import type { SegmentRepository } from '../segment-storage/segment.repository.js';
import type { LockState } from '../lock/lock-state.js';
import { SegmentUnavailableError } from '../common/errors.js';

/** An item with the priority it was popped from (what an acknowledgement lock keeps). */
export interface PoppedItem {
  priority: number;
  json: string;
}

/** A segment held in memory: `entries[offset..]` are its items, in order. */
interface CachedSegment {
  entries: SegmentEntry[];
  offset: number;
}

/** The database side of one turn: the transaction and the repository that owns the SQL. */
export interface TurnContext {
  readonly tx: EntityManager;
  readonly segments: SegmentRepository;
  /** Queues work to run after the turn's transaction commits, still inside the turn. */
  readonly afterCommit: (task: () => Promise<void>) => void;
}

/**
 * Moves segments between the actor's state and the offload store. The queue code calls it at
 * the points seed 003 names; the offload module provides the implementation (an abstract class
 * so it can be the DI token).
 */
export abstract class SegmentMover {
  /** After a push: move eligible full middle segments out. Never throws. */
  abstract afterPush(actor: QueueActor, ctx: TurnContext, priority: number): Promise<void>;
  /** Before items are taken from or returned to the head: bring segments near the head back. Never throws. */
  abstract beforeHeadAccess(actor: QueueActor, ctx: TurnContext, priority: number): Promise<void>;
  /** Deletes every offloaded segment of the actor (the queue is being deleted). */
  abstract deleteAll(actor: QueueActor, ctx: TurnContext): Promise<void>;
  /** An offloaded segment's items for inspection; undefined unless the metadata says it is offloaded. */
  abstract inspect(actor: QueueActor, ctx: TurnContext, priority: number, segment: number): Promise<string[] | undefined>;
}

/** Metadata of a priority that has just received its first item(s): one segment, numbered 0. */
const newPriority = (): PriorityMetadata => ({ count: 0, head_segment: 0, tail_segment: 0, head_offloaded_segment: null, tail_offloaded_segment: null, next_position: 0, head_position: 0 });

const segmentKey = (priority: number, segment: number): string => `${priority}:${segment}`;

/**
 * One queue id's actor: its metadata and the segments it keeps in memory (per priority at most
 * the head, `buffer_segments` after it and the tail). All methods run inside the queue's turn
 * (keyed mutex in this process, row lock in PostgreSQL) and issue their SQL on that turn's
 * transaction; the caller commits and then stamps the new version with {@link committed}.
 * If the transaction fails the caller discards the actor, so memory never runs ahead of the
 * database.
 */
export class QueueActor {
  version: string;
  readonly segmentSize: number;
  readonly bufferSegments: number;
  readonly createdAt: Date;
  private readonly priorities = new Map<number, PriorityMetadata>();
  private sortedPriorities: number[] | undefined;
  private readonly cache = new Map<string, CachedSegment>();
  private cachedItems = 0;
  /** The acknowledgement lock: undefined until loaded in a turn, null when there is none. */
  lock: LockState | null | undefined = undefined;
  /** Set when metadata changed in this turn and must be saved before commit. */
  dirty = false;
  lastUsed = Date.now();

  constructor(
    readonly queueId: string,
    row: QueueRow,
  ) {
    this.version = row.version;
    this.segmentSize = row.segmentSize;
    this.bufferSegments = row.bufferSegments;
    this.createdAt = row.createdAt;
    for (const [p, meta] of Object.entries(row.priorities)) this.priorities.set(Number(p), { ...meta });
  }

  /** Items waiting (not held by a lock). */
  get count(): number {
    let total = 0;
    for (const meta of this.priorities.values()) total += meta.count;
    return total;
  }

  /** Items of this actor held in memory. */
  get itemsInMemory(): number {
    return this.cachedItems;
  }

  /** Priorities that hold items, lowest (popped first) first. */
  priorityList(): number[] {
    this.sortedPriorities ??= [...this.priorities.keys()].sort((a, b) => a - b);
    return this.sortedPriorities;
  }

  meta(priority: number): PriorityMetadata | undefined {
    return this.priorities.get(priority);
  }

  /** The metadata document as stored in the queue row. */
  metadataRecord(): Record<string, PriorityMetadata> {
    const record: Record<string, PriorityMetadata> = {};
    for (const p of this.priorityList()) record[String(p)] = { ...this.priorities.get(p)! };
    return record;
  }

  isCached(priority: number, segment: number): boolean {
    return this.cache.has(segmentKey(priority, segment));
  }

  /** Segment numbers of a priority held in memory, ascending. */
  cachedSegments(priority: number): number[] {
    const out: number[] = [];
    for (const key of this.cache.keys()) {
      const [p, s] = key.split(':').map(Number);
      if (p === priority) out.push(s);
    }
    return out.sort((a, b) => a - b);
  }

  /** Items of a cached segment, for inspection. */
  cachedSegmentItems(priority: number, segment: number): string[] | undefined {
    const seg = this.cache.get(segmentKey(priority, segment));
    return seg?.entries.slice(seg.offset).map((e) => e.json);
  }

  /**
   * Appends items (each with its priority) at the tails, in order. A full tail segment
   * (`next_position == segment_size`) gets a successor. One insert statement for all of them.
   */
  async push(ctx: TurnContext, items: { priority: number; json: string }[], mover?: SegmentMover): Promise<void> {
    const inserts: SegmentInsert[] = [];
    const touched = new Set<number>();
    for (const { priority, json } of items) {
      let meta = this.priorities.get(priority);
      if (!meta) {
        meta = newPriority();
        this.priorities.set(priority, meta);
        this.sortedPriorities = undefined;
        this.cacheSegment(priority, 0, []);
      }
      if (meta.next_position >= this.segmentSize) {
        meta.tail_segment += 1;
        meta.next_position = 0;
        this.cacheSegment(priority, meta.tail_segment, []);
      }
      const entry: SegmentEntry = { position: meta.next_position, json };
      meta.next_position += 1;
      meta.count += 1;
      const last = inserts.at(-1);
      if (last && last.priority === priority && last.segment === meta.tail_segment) last.entries.push(entry);
      else inserts.push({ priority, segment: meta.tail_segment, entries: [entry] });
      const cached = this.cache.get(segmentKey(priority, meta.tail_segment));
      if (cached) {
        cached.entries.push(entry);
        this.cachedItems += 1;
      }
      touched.add(priority);
    }
    this.dirty = true;
    await ctx.segments.insertItems(ctx.tx, this.queueId, inserts);
    for (const p of touched) {
      // Offload first: a segment that just stopped being the tail is still in memory, so moving
      // it out needs no read; eviction then drops whatever else left the window.
      if (mover) await mover.afterPush(this, ctx, p);
      this.evictOutsideWindow(p);
    }
  }

  /**
   * Removes up to `depth` items from the front: lowest priority first, FIFO within a priority,
   * spilling into the next priority. Emptied head segments are deleted and the head moves on;
   * a priority's metadata goes with its last item.
   */
  async pop(ctx: TurnContext, depth: number, mover?: SegmentMover): Promise<PoppedItem[]> {
    const out: PoppedItem[] = [];
    for (const priority of [...this.priorityList()]) {
      while (out.length < depth) {
        const meta = this.priorities.get(priority);
        if (!meta) break;
        if (mover) await mover.beforeHeadAccess(this, ctx, priority);
        const head = meta.head_segment;
        if (meta.head_offloaded_segment !== null && meta.head_offloaded_segment <= head) {
          // The head itself could not be loaded back: popping past it would reorder items.
          if (out.length === 0) throw new SegmentUnavailableError(this.queueId, priority, head);
          return out;
        }
        const seg = await this.segment(ctx, priority, head);
        const available = seg.entries.length - seg.offset;
        const take = Math.min(depth - out.length, available);
        for (let i = 0; i < take; i++) out.push({ priority, json: seg.entries[seg.offset + i].json });
        seg.offset += take;
        this.cachedItems -= take;
        meta.count -= take;
        this.dirty = true;
        if (seg.offset < seg.entries.length) {
          meta.head_position = seg.entries[seg.offset].position;
          await ctx.segments.deleteThrough(ctx.tx, this.queueId, priority, head, seg.entries[seg.offset - 1].position);
          // Keep memory proportional to what is still queued in this segment.
          if (seg.offset > 64 && seg.offset * 2 > seg.entries.length) {
            seg.entries = seg.entries.slice(seg.offset);
            seg.offset = 0;
          }
          continue;
        }
        await ctx.segments.deleteSegment(ctx.tx, this.queueId, priority, head);
        this.dropSegment(priority, head);
        if (head < meta.tail_segment) {
          meta.head_segment = head + 1;
          meta.head_position = 0;
          this.evictOutsideWindow(priority);
          // Keep the invariant at rest: segments that came into the buffer are back before we answer.
          if (mover) await mover.beforeHeadAccess(this, ctx, priority);
        } else {
          // Last item of this priority: its metadata entry goes (seed 003, pop flow step 4).
          this.priorities.delete(priority);
          this.sortedPriorities = undefined;
        }
      }
      if (out.length >= depth) break;
    }
    return out;
  }

  /**
   * Puts items back at the front of their priorities, ahead of everything queued there, in the
   * given order (lock expiry and release). The head segment may grow past `segment_size`.
   */
  async returnToFront(ctx: TurnContext, items: PoppedItem[], mover?: SegmentMover): Promise<void> {
    const byPriority = new Map<number, string[]>();
    for (const item of items) {
      const list = byPriority.get(item.priority) ?? [];
      list.push(item.json);
      byPriority.set(item.priority, list);
    }
    const inserts: SegmentInsert[] = [];
    for (const [priority, jsons] of byPriority) {
      let meta = this.priorities.get(priority);
      if (!meta) {
        meta = newPriority();
        const entries = jsons.map((json, i) => ({ position: i, json }));
        meta.next_position = entries.length;
        meta.count = entries.length;
        this.priorities.set(priority, meta);
        this.sortedPriorities = undefined;
        this.cacheSegment(priority, 0, entries);
        inserts.push({ priority, segment: 0, entries });
        continue;
      }
      if (mover) await mover.beforeHeadAccess(this, ctx, priority);
      const start = meta.head_position - jsons.length;
      const entries = jsons.map((json, i) => ({ position: start + i, json }));
      meta.head_position = start;
      meta.count += entries.length;
      const cached = this.cache.get(segmentKey(priority, meta.head_segment));
      if (cached) {
        cached.entries = entries.concat(cached.entries.slice(cached.offset));
        cached.offset = 0;
        this.cachedItems += entries.length;
      }
      inserts.push({ priority, segment: meta.head_segment, entries });
    }
    this.dirty = true;
    await ctx.segments.insertItems(ctx.tx, this.queueId, inserts);
  }

  /** Marks the turn's changes as committed under `version`. */
  committed(version: string): void {
    this.version = version;
    this.dirty = false;
  }

  /** Drops everything held in memory (the actor is being deactivated or deleted). */
  clear(): void {
    this.cache.clear();
    this.cachedItems = 0;
  }

  /** Sets the offloaded range of a priority (used by the offload policy). */
  setOffloadedRange(priority: number, head: number | null, tail: number | null): void {
    const meta = this.priorities.get(priority);
    if (!meta) return;
    meta.head_offloaded_segment = head;
    meta.tail_offloaded_segment = tail;
    this.dirty = true;
  }

  /** Forgets a segment held in memory (it has been moved to the offload store). */
  dropSegment(priority: number, segment: number): void {
    const key = segmentKey(priority, segment);
    const seg = this.cache.get(key);
    if (!seg) return;
    this.cachedItems -= seg.entries.length - seg.offset;
    this.cache.delete(key);
  }

  /** A segment's items (JSON text, in order) from memory or the database, without caching it. */
  async segmentItems(ctx: TurnContext, priority: number, segment: number): Promise<string[]> {
    return this.cachedSegmentItems(priority, segment) ?? (await ctx.segments.loadSegment(ctx.tx, this.queueId, priority, segment)).map((e) => e.json);
  }

  /** Takes a segment loaded back from the offload store into memory, if it lies in the window. */
  adoptSegment(priority: number, segment: number, entries: SegmentEntry[]): void {
    const meta = this.priorities.get(priority);
    if (meta && segment >= meta.head_segment && segment <= meta.head_segment + this.bufferSegments) this.cacheSegment(priority, segment, entries);
  }

  /** The segment, from memory or loaded from the database (and then kept while in the window). */
  private async segment(ctx: TurnContext, priority: number, segment: number): Promise<CachedSegment> {
    const key = segmentKey(priority, segment);
    const cached = this.cache.get(key);
    if (cached) return cached;
    const entries = await ctx.segments.loadSegment(ctx.tx, this.queueId, priority, segment);
    return this.cacheSegment(priority, segment, entries);
  }

  private cacheSegment(priority: number, segment: number, entries: SegmentEntry[]): CachedSegment {
    this.dropSegment(priority, segment);
    const seg: CachedSegment = { entries, offset: 0 };
    this.cache.set(segmentKey(priority, segment), seg);
    this.cachedItems += entries.length;
    return seg;
  }

  /**
   * Keeps in memory only the segments of the window: head..head+buffer_segments and the tail.
   * Anything else stays in the database and is read again if it enters the window.
   */
  private evictOutsideWindow(priority: number): void {
    const meta = this.priorities.get(priority);
    for (const segment of this.cachedSegments(priority)) {
      if (!meta || !(segment === meta.tail_segment || (segment >= meta.head_segment && segment <= meta.head_segment + this.bufferSegments))) {
        this.dropSegment(priority, segment);
      }
    }
  }
}
