import { segKey, type CoreContext } from './turn-state.js';
import { Needed, withTags, type HeldItem, type ItemTags, type PriorityMetadata, type SegmentEntry, type SegmentFetch, type SegmentRef } from './types.js';

/** A segment held in memory: `entries[offset..]` are its items, in order. */
interface CachedSegment {
  entries: SegmentEntry[];
  offset: number;
}

/** Metadata of a priority that has just received its first item(s): one segment, numbered 0. */
const newPriority = (): PriorityMetadata => ({
  count: 0,
  head_segment: 0,
  tail_segment: 0,
  head_offloaded_segment: null,
  tail_offloaded_segment: null,
  next_position: 0,
  head_position: 0,
});

/** Items of one segment a pop takes. */
export interface TakeStep {
  readonly priority: number;
  readonly segment: number;
  readonly take: number;
}

/**
 * A queue's priorities (seed 003's metadata, one entry per priority) and the segments memory
 * holds of them. Every change is recorded in the turn's write set.
 *
 * Invariants:
 * - **Memory mirrors the table plus the turn's writes.** A segment fetched from the table is
 *   merged with the turn's own pending deletes and inserts; segments are evicted only between
 *   turns ({@link evictOutsideWindow}), so nothing the turn wrote is ever read back stale.
 * - **Bounded memory.** Between turns at most the head, `buffer_segments` after it and the
 *   tail of each priority stay in memory.
 */
export class PrioritySegments {
  private readonly priorities = new Map<number, PriorityMetadata>();
  private sorted: number[] | undefined;
  /** Segments in memory, per priority, by number. */
  private readonly cache = new Map<number, Map<number, CachedSegment>>();
  private cachedItems = 0;

  constructor(
    private readonly ctx: CoreContext,
    stored: Readonly<Record<string, PriorityMetadata>> = {},
  ) {
    for (const [p, meta] of Object.entries(stored)) this.priorities.set(Number(p), { ...meta });
  }

  /** Priorities that have an entry (they hold items, or locks hold some of theirs), lowest (popped first) first. */
  list(): readonly number[] {
    this.sorted ??= [...this.priorities.keys()].sort((a, b) => a - b);
    return this.sorted;
  }

  /** A priority's metadata, to read or change (changes are written with the turn). */
  get(priority: number): PriorityMetadata | undefined {
    return this.priorities.get(priority);
  }

  /** Entries of every priority, in no particular order. */
  entries(): IterableIterator<[number, PriorityMetadata]> {
    return this.priorities.entries();
  }

  get size(): number {
    return this.priorities.size;
  }

  /** Items waiting (not held by a lock), given-back ones included. */
  get count(): number {
    let total = 0;
    for (const meta of this.priorities.values()) total += meta.count + (meta.returned ?? 0);
    return total;
  }

  /** Items held in memory. */
  get itemsInMemory(): number {
    return this.cachedItems;
  }

  /** Segment numbers of a priority held in memory, ascending. */
  cachedSegments(priority: number): number[] {
    return [...(this.cache.get(priority)?.keys() ?? [])].sort((a, b) => a - b);
  }

  cached(priority: number, segment: number): CachedSegment | undefined {
    return this.cache.get(priority)?.get(segment);
  }

  isOffloaded(meta: PriorityMetadata | undefined, segment: number): boolean {
    return (
      !!meta &&
      meta.head_offloaded_segment !== null &&
      meta.tail_offloaded_segment !== null &&
      segment >= meta.head_offloaded_segment &&
      segment <= meta.tail_offloaded_segment
    );
  }

  /** Items of a segment according to the metadata: middle segments are full, the tail holds `next_position`. */
  expectedCount(meta: PriorityMetadata, segment: number): number {
    const { segmentSize } = this.ctx.settings;
    if (meta.head_segment === meta.tail_segment) return meta.count;
    if (segment === meta.tail_segment) return meta.next_position;
    if (segment === meta.head_segment) return meta.count - meta.next_position - (meta.tail_segment - meta.head_segment - 1) * segmentSize;
    return segmentSize;
  }

  /**
   * Appends one item at the tail of its priority; a full tail segment (`next_position == segment_size`) gets a successor.
   * @param tags - where it was dead-lettered from and its headers (absent: none)
   */
  append(priority: number, json: string, tags?: ItemTags): void {
    const turn = this.ctx.turn;
    const meta = this.priorities.get(priority) ?? this.addPriority(priority);
    if (meta.next_position >= this.ctx.settings.segmentSize) {
      meta.tail_segment += 1;
      meta.next_position = 0;
      // A new segment number: nothing is stored under it.
      this.cacheSegment(priority, meta.tail_segment, []);
    }
    const plain: SegmentEntry = { position: meta.next_position, json };
    const entry: SegmentEntry = tags === undefined ? plain : withTags(plain, tags);
    meta.next_position += 1;
    meta.count += 1;
    turn.writes.insert(priority, meta.tail_segment, [entry]);
    const cached = this.cached(priority, meta.tail_segment);
    if (cached) {
      cached.entries.push(entry);
      this.cachedItems += 1;
    }
    turn.pushed.add(priority);
  }

  /**
   * Puts items back at the front of their priorities, ahead of everything queued there, in
   * the given order. The head segment may grow past `segment_size` for a while (seed 003, edge
   * case 3). Needs no segment in memory.
   */
  returnToFront(items: readonly HeldItem[]): void {
    const turn = this.ctx.turn;
    const byPriority = new Map<number, HeldItem[]>();
    for (const item of items) {
      const list = byPriority.get(item.priority) ?? [];
      list.push(item);
      byPriority.set(item.priority, list);
    }
    for (const [priority, held] of byPriority) {
      const existing = this.priorities.get(priority);
      const meta = existing ?? this.addPriority(priority);
      const start = existing ? meta.head_position - held.length : 0;
      const entries: SegmentEntry[] = held.map((item, i) =>
        withTags({ position: start + i, json: item.json, ...(item.deliveries ? { deliveries: item.deliveries } : {}) }, item),
      );
      meta.count += entries.length;
      if (existing) meta.head_position = start;
      else meta.next_position = entries.length;
      const cached = this.cached(priority, meta.head_segment);
      if (cached) {
        cached.entries = existing ? entries.concat(cached.entries.slice(cached.offset)) : entries;
        cached.offset = 0;
        this.cachedItems += entries.length;
      }
      turn.writes.insert(priority, meta.head_segment, entries);
      turn.headTouched.add(priority);
    }
    if (items.length > 0) {
      this.ctx.markPresent();
      turn.touch();
    }
  }

  /** Takes the planned items of one segment, which memory holds; `keepPriority`: a lock will hold some of the priority's items. */
  take({ priority, segment, take }: TakeStep, items: HeldItem[], keepPriority: boolean): void {
    const writes = this.ctx.turn.writes;
    const meta = this.priorities.get(priority)!;
    const seg = this.cached(priority, segment)!;
    for (let i = 0; i < take; i++) {
      const entry = seg.entries[seg.offset + i];
      const item: HeldItem = { priority, json: entry.json, origin: { segment, position: entry.position }, deliveries: entry.deliveries ?? 0 };
      items.push(withTags(item, entry));
    }
    seg.offset += take;
    this.cachedItems -= take;
    meta.count -= take;
    this.ctx.turn.headTouched.add(priority);
    if (seg.offset < seg.entries.length) {
      if (take > 0) writes.deleteRange(priority, segment, seg.entries[seg.offset - take].position, seg.entries[seg.offset - 1].position);
      meta.head_position = seg.entries[seg.offset].position;
      // Keep memory proportional to what is still queued in this segment.
      if (seg.offset > 64 && seg.offset * 2 > seg.entries.length) {
        seg.entries = seg.entries.slice(seg.offset);
        seg.offset = 0;
      }
      return;
    }
    writes.deleteSegment(priority, segment);
    this.dropSegment(priority, segment);
    if (segment < meta.tail_segment) {
      meta.head_segment = segment + 1;
      meta.head_position = 0;
    } else if (keepPriority || (meta.returned ?? 0) > 0 || (meta.held ?? 0) > 0 || (meta.retrying ?? 0) > 0) {
      // The segments are empty but the priority lives on (given-back items, or items under
      // locks): the next push continues after the last item, so push order stays the
      // order of (segment, position). A full tail is left for the next segment number, so that
      // the (empty) head never sits before a full tail.
      if (meta.next_position >= this.ctx.settings.segmentSize) {
        meta.tail_segment += 1;
        meta.head_segment = meta.tail_segment;
        meta.next_position = 0;
      }
      meta.head_position = meta.next_position;
      this.cacheSegment(priority, meta.tail_segment, []);
    } else {
      // Last item of this priority: its metadata entry goes (seed 003, pop flow step 4).
      this.dropPriority(priority);
    }
  }

  /** Removes a priority's entry (nothing of it is left anywhere). */
  dropPriority(priority: number): void {
    this.priorities.delete(priority);
    this.sorted = undefined;
    this.ctx.turn.returnedCache.delete(priority);
  }

  /** Drops the entry of a priority with nothing left in segments, given back, held or waiting out a retry delay. */
  dropIfEmpty(priority: number): void {
    const meta = this.priorities.get(priority);
    if (meta && meta.count === 0 && !meta.returned && !meta.held && !meta.retrying) {
      this.ctx.turn.writes.deleteSegment(priority, meta.tail_segment);
      this.dropSegment(priority, meta.tail_segment);
      this.dropPriority(priority);
    }
  }

  /** Forgets every priority and segment (the queue is deleted). */
  clear(): void {
    this.priorities.clear();
    this.sorted = undefined;
    this.cache.clear();
    this.cachedItems = 0;
  }

  /**
   * Hands over a segment a {@link Needed} asked for. From the table: merged with the
   * turn's pending row changes and kept in memory (until the end of the turn if outside the
   * window). From the offload store for use: loaded back (written as one packed row, its
   * store copy is deleted after commit, the offloaded range shrinks); if the store could not
   * be read, nothing is taken past it this turn.
   */
  provide(ref: SegmentRef, fetch: SegmentFetch): void {
    const turn = this.ctx.turn;
    const k = segKey(ref.priority, ref.segment);
    if (ref.purpose === 'peek') {
      turn.peeked.set(k, ref.from === 'state' && !('failed' in fetch) ? { entries: this.merged(ref.priority, ref.segment, fetch.entries ?? []) } : fetch);
      return;
    }
    const meta = this.priorities.get(ref.priority);
    if (ref.from === 'state') {
      const rows = 'failed' in fetch ? [] : (fetch.entries ?? []);
      if (this.isOffloaded(meta, ref.segment)) turn.rowsOfOffloaded.set(k, rows);
      else this.cacheSegment(ref.priority, ref.segment, this.merged(ref.priority, ref.segment, rows));
      return;
    }
    // Only the bottom of the offloaded range can come back, so that the range stays contiguous.
    if (!meta || meta.head_offloaded_segment !== ref.segment) return;
    if ('failed' in fetch || fetch.entries === undefined) {
      turn.unavailable.add(k);
      return;
    }
    const loaded = fetch.entries;
    // The table's rows of the segment (items returned into it while it was out) as the turn left them.
    const rows = this.merged(ref.priority, ref.segment, turn.rowsOfOffloaded.get(k) ?? []);
    const entries = [...rows, ...loaded].sort((a, b) => a.position - b.position);
    // One packed row instead of a row per item: never rewritten by pops, deleted with the segment.
    turn.writes.pack(ref.priority, ref.segment, loaded);
    turn.writes.storeDeletes.push({ priority: ref.priority, segment: ref.segment });
    turn.rowsOfOffloaded.delete(k);
    const last = meta.tail_offloaded_segment!;
    meta.head_offloaded_segment = ref.segment < last ? ref.segment + 1 : null;
    meta.tail_offloaded_segment = ref.segment < last ? last : null;
    this.cacheSegment(ref.priority, ref.segment, entries);
    turn.touch();
  }

  /** Refs to fetch so that a segment can be worked on: an offloaded one also needs the table's rows (items returned into it). */
  refsFor(priority: number, segment: number): SegmentRef[] {
    if (!this.isOffloaded(this.priorities.get(priority), segment)) return [{ priority, segment, from: 'state', purpose: 'use' }];
    const refs: SegmentRef[] = [];
    if (!this.ctx.turn.rowsOfOffloaded.has(segKey(priority, segment))) refs.push({ priority, segment, from: 'state', purpose: 'use' });
    refs.push({ priority, segment, from: 'offload', purpose: 'use' });
    return refs;
  }

  /** A segment fetched only to be shown, or {@link Needed} to have it read. */
  peek(ref: SegmentRef): SegmentFetch | Needed {
    return this.ctx.turn.peeked.get(segKey(ref.priority, ref.segment)) ?? new Needed({ segments: [ref] });
  }

  cacheSegment(priority: number, segment: number, entries: SegmentEntry[]): void {
    this.dropSegment(priority, segment);
    let segments = this.cache.get(priority);
    if (!segments) this.cache.set(priority, (segments = new Map()));
    segments.set(segment, { entries, offset: 0 });
    this.cachedItems += entries.length;
  }

  dropSegment(priority: number, segment: number): void {
    const segments = this.cache.get(priority);
    const seg = segments?.get(segment);
    if (!seg) return;
    this.cachedItems -= seg.entries.length - seg.offset;
    segments!.delete(segment);
    if (segments!.size === 0) this.cache.delete(priority);
  }

  /** Between turns: keeps in memory only the window of each priority, head..head+buffer_segments and the tail. */
  evictOutsideWindow(): void {
    for (const priority of [...this.cache.keys()]) {
      const meta = this.priorities.get(priority);
      for (const segment of [...(this.cache.get(priority)?.keys() ?? [])]) {
        const inWindow =
          meta && (segment === meta.tail_segment || (segment >= meta.head_segment && segment <= meta.head_segment + this.ctx.settings.bufferSegments));
        if (!inWindow) this.dropSegment(priority, segment);
      }
    }
  }

  /**
   * An empty entry for a priority that has none, whose segments start at `segment`: it holds
   * items given back and waiting out a retry delay (see `PriorityMetadata.retrying`) whose
   * origins lie below `segment`, so that items pushed meanwhile come after them in push order.
   */
  reserve(priority: number, segment: number): PriorityMetadata {
    const existing = this.priorities.get(priority);
    if (existing) return existing;
    const meta = newPriority();
    meta.head_segment = segment;
    meta.tail_segment = segment;
    this.priorities.set(priority, meta);
    this.sorted = undefined;
    this.cacheSegment(priority, segment, []);
    this.ctx.turn.touch();
    return meta;
  }

  private addPriority(priority: number): PriorityMetadata {
    const meta = newPriority();
    this.priorities.set(priority, meta);
    this.sorted = undefined;
    // A new priority starts at segment 0, which holds nothing (an emptied priority's segments
    // were all deleted, in this turn or before).
    this.cacheSegment(priority, 0, []);
    return meta;
  }

  /**
   * Stored entries of a segment (its rows, and the items of its packed row where no row has
   * their position) as the turn left them: minus what was popped (positions below the head's
   * `head_position`: a packed row keeps its popped items) and its pending deletes, plus what the
   * turn packed and its pending inserts.
   */
  private merged(priority: number, segment: number, rows: readonly SegmentEntry[]): SegmentEntry[] {
    const writes = this.ctx.turn.writes;
    const through = writes.deletedThrough(priority, segment);
    const meta = this.priorities.get(priority);
    // (A row stored before `head_position` was kept has none: then nothing is left out.)
    const first = meta && meta.head_segment === segment ? (meta.head_position ?? -Infinity) : -Infinity;
    const byPosition = new Map<number, SegmentEntry>();
    for (const entry of writes.pendingPacked(priority, segment)) byPosition.set(entry.position, entry);
    for (const row of rows) if (row.position > through && row.position >= first) byPosition.set(row.position, row);
    for (const entry of writes.pendingInserts(priority, segment)) byPosition.set(entry.position, entry);
    return [...byPosition.values()].sort((a, b) => a.position - b.position);
  }
}
