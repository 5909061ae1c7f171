import type { DelayedItems } from './delayed-items.js';
import type { ExclusiveLock } from './exclusive-lock.js';
import type { PrioritySegments } from './priority-segments.js';
import type { SharedLocks } from './shared-locks.js';
import type { CoreContext } from './turn-state.js';
import { Needed, type LockState, type PriorityMetadata, type QueueSettings, type QueueSnapshot, type SegmentEntry } from './types.js';

/** A priority as inspection shows it. */
export interface PriorityView extends PriorityMetadata {
  readonly head_segment_count: number;
  readonly tail_segment_count: number;
}

/** A queue as inspection shows it. */
export interface QueueView {
  readonly count: number;
  readonly priorities: ReadonlyMap<number, PriorityView>;
  readonly settings: QueueSettings;
  readonly lock: LockState | null;
  /** Shared mode: its live locks; null otherwise. */
  readonly locks: { readonly count: number; readonly itemCount: number; readonly nextExpiresAt: number | null } | null;
  /** Delayed items, not yet visible. */
  readonly delayed: number;
}

/** What `GET /queue/{id}/state/{key}` finds: a value, nothing (404), or a store that could not be read. */
export type StateLookup = { readonly value: unknown } | 'not-found' | { readonly unavailable: { readonly priority: number; readonly segment: number } };

const SEGMENT_KEY = /^queue_(\d{1,9})_seg_(\d{1,15})$/;
const OFFLOADED_KEY = /^offloaded_queue_(\d{1,9})_seg_(\d{1,15})_(.+)$/;

/**
 * What a queue shows of itself: the view of `GET /queue/{id}`, the raw state under seed 003's
 * key names, and the snapshot another process activates the queue from. Reads only; a segment
 * it must show and does not hold is asked for like any other ({@link Needed}), and never adopted.
 */
export class QueueInspection {
  constructor(
    private readonly ctx: CoreContext,
    private readonly segments: PrioritySegments,
    private readonly exclusive: ExclusiveLock,
    private readonly shared: SharedLocks,
    private readonly delayed: DelayedItems,
  ) {}

  /** The queue as inspection shows it (the queue exists). */
  view(): QueueView | Needed {
    const needed = this.shared.needExactNextExpiry();
    if (needed) return needed;
    const priorities = new Map<number, PriorityView>();
    for (const p of this.visiblePriorities()) {
      const m = this.segments.get(p)!;
      // `count`: every item waiting at the priority, given-back ones (kept apart from the segments) included.
      const view = { ...m, count: m.count + (m.returned ?? 0) };
      priorities.set(p, {
        ...view,
        head_segment_count: this.segments.expectedCount(m, m.head_segment),
        tail_segment_count: m.head_segment === m.tail_segment ? m.count : m.next_position,
      });
    }
    const settings = this.ctx.settings;
    const locks =
      (settings.lockMode ?? 'exclusive') === 'shared' ? { count: this.shared.live, itemCount: this.shared.items, nextExpiresAt: this.shared.nextExpiry } : null;
    return { count: this.segments.count, priorities, settings, lock: this.exclusive.lock, locks, delayed: this.delayed.size };
  }

  /** The raw state under seed 003's key names (metadata document, a segment in state, an offloaded segment) of a queue that exists. */
  lookupState(queueId: string, key: string): StateLookup | Needed {
    if (key === 'metadata') return { value: this.metadataDocument() };
    const offloaded = OFFLOADED_KEY.exec(key);
    if (offloaded && offloaded[3] === queueId) {
      const [priority, segment] = [Number(offloaded[1]), Number(offloaded[2])];
      if (!this.segments.isOffloaded(this.segments.get(priority), segment)) return 'not-found';
      const fetched = this.segments.peek({ priority, segment, from: 'offload', purpose: 'peek' });
      if (fetched instanceof Needed) return fetched;
      if ('failed' in fetched) return { unavailable: { priority, segment } };
      return fetched.entries ? { value: fetched.entries.map((e) => JSON.parse(e.json) as unknown) } : 'not-found';
    }
    const match = SEGMENT_KEY.exec(key);
    if (!match) return 'not-found';
    const [priority, segment] = [Number(match[1]), Number(match[2])];
    const meta = this.segments.get(priority);
    if (!meta || segment < meta.head_segment || segment > meta.tail_segment || this.segments.isOffloaded(meta, segment)) return 'not-found';
    const cached = this.segments.cached(priority, segment);
    const peeked = cached ? undefined : this.segments.peek({ priority, segment, from: 'state', purpose: 'peek' });
    if (peeked instanceof Needed) return peeked;
    const entries = cached ? cached.entries.slice(cached.offset) : (peeked as { entries: SegmentEntry[] }).entries;
    return entries.length > 0 ? { value: entries.map((e) => JSON.parse(e.json) as unknown) } : 'not-found';
  }

  /** Seed 003's metadata document (never the lock). */
  metadataDocument(): unknown {
    const queues: Record<string, { metadata: Record<string, number> }> = {};
    for (const p of this.visiblePriorities()) {
      const m = this.segments.get(p)!;
      // The segments' items: given-back ones wait apart from them (GET /queue/{id} counts them at their priority).
      const metadata: Record<string, number> = { count: m.count, head_segment: m.head_segment, tail_segment: m.tail_segment };
      if (m.head_offloaded_segment !== null && m.tail_offloaded_segment !== null) {
        metadata.head_offloaded_segment = m.head_offloaded_segment;
        metadata.tail_offloaded_segment = m.tail_offloaded_segment;
      }
      queues[`queue_${p}`] = { metadata };
    }
    const settings = this.ctx.settings;
    return { config: { segment_size: settings.segmentSize, buffer_segments: settings.bufferSegments }, queues };
  }

  /**
   * The queue as committed at `version`, in the form activating it reads: its record, and the
   * rows of the front segment (the head segment of its lowest priority holding items in
   * segments). Only for a queue that memory holds entirely: no lock (exclusive or shared), no
   * delayed item, no given-back or held item, and a front segment in memory (not offloaded)
   * with every row the metadata counts. Undefined otherwise, or when nothing is in the segments.
   */
  snapshot(version: number): QueueSnapshot | undefined {
    if (this.exclusive.lock !== null) return undefined;
    if (this.shared.live !== 0 || this.shared.items !== 0 || this.delayed.size !== 0 || this.delayed.nextDueAt !== null) return undefined;
    let front: QueueSnapshot['front'] | undefined;
    for (const priority of this.segments.list()) {
      const meta = this.segments.get(priority)!;
      if ((meta.returned ?? 0) !== 0 || (meta.held ?? 0) !== 0) return undefined;
      if (front || meta.count === 0) continue;
      const segment = meta.head_segment;
      const seg = this.segments.cached(priority, segment);
      if (!seg || this.segments.isOffloaded(meta, segment)) return undefined;
      const entries = seg.entries.slice(seg.offset);
      if (entries.length !== this.segments.expectedCount(meta, segment) || entries[0].position !== meta.head_position) return undefined;
      front = { priority, segment, entries };
    }
    if (!front) return undefined;
    const priorities: Record<string, PriorityMetadata> = {};
    for (const [priority, meta] of this.segments.entries()) priorities[priority] = { ...meta };
    const record = {
      version,
      settings: { ...this.ctx.settings },
      priorities,
      lock: null,
      delayed: { count: 0, nextDueAt: null, nextSeq: this.delayed.seq },
      shared: this.shared.state,
    };
    return { record, front };
  }

  /** Priorities with items waiting (an entry kept only for items under shared locks is not shown). */
  private visiblePriorities(): number[] {
    return this.segments.list().filter((p) => {
      const m = this.segments.get(p)!;
      return m.count + (m.returned ?? 0) > 0;
    });
  }
}
