import type { PrioritySegments } from './priority-segments.js';
import { segKey, type CoreContext } from './turn-state.js';
import { Needed, segmentItems, type OffloadMove, type SegmentRef } from './types.js';

/**
 * Offloading (seed 003), planned here and carried out by the turn runner: full middle segments
 * past the buffer move to the offload store after pushes, and come back as the head approaches.
 *
 * Invariant at rest, for every priority: the offloaded range is contiguous, lies strictly
 * between head and tail, and starts after `head_segment + buffer_segments` (unless a load
 * failed: then it may start at the head, never before).
 */
export class OffloadPlanner {
  constructor(
    private readonly ctx: CoreContext,
    private readonly segments: PrioritySegments,
  ) {}

  /**
   * Keeps the invariant for every priority whose head was worked on this turn: no segment with
   * `n <= head_segment + buffer_segments` stays in the offload store. Returns {@link Needed}
   * naming every such segment, bottom up per priority (each comes back once the one below it
   * did; one that cannot be read leaves those above it where they are, for a later turn).
   */
  loadBack(): Needed | undefined {
    const turn = this.ctx.turn;
    const missing: SegmentRef[] = [];
    for (const priority of turn.headTouched) {
      const meta = this.segments.get(priority);
      if (!meta || meta.head_offloaded_segment === null) continue;
      const last = Math.min(meta.tail_offloaded_segment ?? meta.head_offloaded_segment, meta.head_segment + this.ctx.settings.bufferSegments);
      for (let segment = meta.head_offloaded_segment; segment <= last; segment++) {
        if (turn.unavailable.has(segKey(priority, segment))) break;
        missing.push(...this.segments.refsFor(priority, segment));
      }
    }
    return missing.length > 0 ? new Needed({ segments: missing }) : undefined;
  }

  /**
   * The offloaded segments {@link loadBack} will ask for next, on the priorities whose head this
   * turn worked on: those up to `ahead` segments past the buffer, bottom up. What the runner
   * reads before a turn needs them (a read ahead), so that a consumer draining a deep queue does
   * not wait for the store in every turn; the turn that loads one back still decides everything.
   */
  upcoming(ahead: number): SegmentRef[] {
    const turn = this.ctx.turn;
    const refs: SegmentRef[] = [];
    for (const priority of turn.headTouched) {
      const meta = this.segments.get(priority);
      if (!meta || meta.head_offloaded_segment === null) continue;
      const last = Math.min(meta.tail_offloaded_segment ?? meta.head_offloaded_segment, meta.head_segment + this.ctx.settings.bufferSegments + ahead);
      for (let segment = meta.head_offloaded_segment; segment <= last; segment++) refs.push({ priority, segment, from: 'offload', purpose: 'use' });
    }
    return refs;
  }

  /**
   * After pushes: the full middle segments past the buffer that should move to the offload
   * store, per priority in ascending order (the offloaded range grows at its top). The runner
   * saves them and reports each success with {@link offloaded}, stopping a priority at its
   * first failure so that the range stays contiguous.
   */
  plan(): OffloadMove[] | Needed {
    const moves: OffloadMove[] = [];
    const missing: SegmentRef[] = [];
    for (const priority of this.ctx.turn.pushed) {
      const meta = this.segments.get(priority);
      if (!meta) continue;
      const first = meta.tail_offloaded_segment !== null ? meta.tail_offloaded_segment + 1 : meta.head_segment + this.ctx.settings.bufferSegments + 1;
      for (let segment = first; segment < meta.tail_segment; segment++) {
        const cached = this.segments.cached(priority, segment);
        if (!cached) missing.push(...this.segments.refsFor(priority, segment));
        else {
          moves.push(segmentItems(priority, segment, cached.entries.slice(cached.offset)));
        }
      }
    }
    return missing.length > 0 ? new Needed({ segments: missing }) : moves;
  }

  /** A planned move's segment is in the offload store now: its rows go, the range grows by it. */
  offloaded(priority: number, segment: number): void {
    const meta = this.segments.get(priority);
    if (!meta) return;
    this.ctx.turn.writes.deleteSegment(priority, segment);
    this.segments.dropSegment(priority, segment);
    meta.head_offloaded_segment ??= segment;
    meta.tail_offloaded_segment = segment;
    this.ctx.turn.touch();
  }

  /** Offloaded segments of every priority, to delete from the store (the queue is deleted). */
  deleteAll(): void {
    const writes = this.ctx.turn.writes;
    for (const [priority, meta] of this.segments.entries()) {
      if (meta.head_offloaded_segment === null || meta.tail_offloaded_segment === null) continue;
      for (let s = meta.head_offloaded_segment; s <= meta.tail_offloaded_segment; s++) writes.storeDeletes.push({ priority, segment: s });
    }
  }
}
