import type { GivenBackItems } from './given-back-items.js';
import type { PrioritySegments, TakeStep } from './priority-segments.js';
import { segKey, type CoreContext } from './turn-state.js';
import { Needed, type HeldItem, type LockRowsNeed, type SegmentRef } from './types.js';

/** A segment nothing is taken past this turn: it is in the offload store, which could not be read. */
export interface BlockedSegment {
  readonly priority: number;
  readonly segment: number;
}

/**
 * Taking items from the front of a queue: lowest priority first, FIFO within a priority,
 * given-back items before the segments' items (they were pushed before everything still in
 * the segments), spilling into the next priority.
 *
 * Invariants: nothing is taken past a segment that could not be loaded (that would reorder
 * items); everything needed is in memory before anything is taken (else the take returns
 * {@link Needed}, naming every segment and given-back row it needs at once, before any change).
 */
export class QueueFront {
  constructor(
    private readonly ctx: CoreContext,
    private readonly segments: PrioritySegments,
    private readonly givenBack: GivenBackItems,
  ) {}

  /**
   * Takes up to `depth` items into `items`. Emptied head segments are deleted and the head
   * moves on; a priority's entry goes with its last item, unless `heldAfter` is given (the
   * items go under a lock, exclusive or shared): then it is filled with the items taken per priority, and
   * those priorities keep their entries (see `PriorityMetadata.held`). Returns the segment the
   * take stopped at, if it stopped at one it could not load.
   */
  take(depth: number, items: HeldItem[], heldAfter: Map<number, number> | undefined): BlockedSegment | undefined | Needed {
    const plan: TakeStep[] = [];
    const fromReturned = new Map<number, number>();
    const missing: SegmentRef[] = [];
    const rows: LockRowsNeed[] = [];
    let blocked: BlockedSegment | undefined;
    let remaining = depth;
    outer: for (const priority of this.segments.list()) {
      const meta = this.segments.get(priority)!;
      const returned = Math.min(remaining, meta.returned ?? 0);
      if (returned > 0) {
        const need = this.givenBack.need(priority, returned);
        if (need) rows.push(need);
        fromReturned.set(priority, returned);
        remaining -= returned;
      }
      if (meta.count === 0) continue;
      for (let segment = meta.head_segment; remaining > 0 && segment <= meta.tail_segment; segment++) {
        if (this.ctx.turn.unavailable.has(segKey(priority, segment))) {
          blocked = { priority, segment };
          break outer;
        }
        const cached = this.segments.cached(priority, segment);
        // Offloaded segments are asked for bottom up: each comes back only after the one below
        // it did (the range shrinks from its bottom), and one that cannot be read stops the rest.
        if (!cached) missing.push(...this.segments.refsFor(priority, segment));
        const take = Math.min(remaining, cached ? cached.entries.length - cached.offset : this.segments.expectedCount(meta, segment));
        plan.push({ priority, segment, take });
        remaining -= take;
      }
      if (remaining === 0) break;
    }
    if (missing.length > 0 || rows.length > 0)
      return new Needed({ ...(missing.length > 0 ? { segments: missing } : {}), ...(rows.length > 0 ? { lockRows: rows } : {}) });

    if (heldAfter) {
      for (const [priority, take] of fromReturned) heldAfter.set(priority, take);
      // Only priorities it takes from: a step that takes nothing must not keep an emptied priority alive.
      for (const { priority, take } of plan) if (take > 0) heldAfter.set(priority, (heldAfter.get(priority) ?? 0) + take);
    }
    for (const priority of [...new Set([...fromReturned.keys(), ...plan.map((p) => p.priority)])].sort((a, b) => a - b)) {
      const take = fromReturned.get(priority);
      const keep = (heldAfter?.get(priority) ?? 0) > 0;
      if (take) items.push(...this.givenBack.take(priority, take));
      for (const step of plan) if (step.priority === priority) this.segments.take(step, items, keep);
      if (!keep) this.segments.dropIfEmpty(priority);
    }
    return blocked;
  }
}
