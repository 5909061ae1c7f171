import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { AppConfig } from '../../config/app-config.js';
import { OffloadStats } from '../../offload/offload-stats.js';
import { offloadedSegmentKey, OffloadStore, type StoredSegment } from '../../offload/offload-store.js';
import { QueueStateRepository } from '../../storage/queue-state.repository.js';
import type { QueueCore } from '../core/queue-core.js';
import { segKey } from '../core/turn-state.js';
import type { SegmentFetch, SegmentRef, TurnWrite } from '../core/types.js';
import type { SegmentId } from './offload-carriage.js';
import { NO_OBSERVER, RUNTIME_OBSERVER, type RuntimeObserver } from './runtime-observer.js';

/** Segments read ahead for one actor at most, in `READ_AHEAD_SEGMENTS` (several priorities popped at once), so that its memory stays bounded. */
const MAX_PRIORITIES_READ_AHEAD = 4;

/** A stored segment as a turn's core takes it: entries by position, with `from` and `headers` where the segment has them. */
export function segmentFetchOf(segment: StoredSegment | undefined): SegmentFetch {
  const from = segment?.from;
  const headers = segment?.headers;
  return {
    entries: segment?.items.map((json, position) => {
      const entry: { position: number; json: string; from?: string; headers?: string } = { position, json };
      if (from?.[position]) entry.from = from[position];
      if (headers?.[position]) entry.headers = headers[position];
      return entry;
    }),
  };
}

/** A read under way or made, with the items it brought once it did (for `pushpop_items_in_memory`). */
interface Read {
  readonly fetch: Promise<SegmentFetch | undefined>;
  items: number;
}

/** A read whose items are counted once it answered. */
function counted(fetch: Promise<SegmentFetch | undefined>): Read {
  const read: Read = { fetch, items: 0 };
  void fetch.then((found) => {
    read.items = found && 'entries' in found ? (found.entries?.length ?? 0) : 0;
  });
  return read;
}

/** The key of a read: the segment, and which of its two parts. */
const readKey = (from: SegmentRef['from'], priority: number, segment: number): string => `${from}:${segKey(priority, segment)}`;

/**
 * Forgets the reads of the table's rows of the segments `rows` wrote. A write lists its rows
 * segment by segment (a push of a thousand items, a thousand inserts in a few segments): one key
 * a segment, not one an item.
 */
function forgetRowsOf(reads: Map<string, Read>, rows: readonly { readonly priority: number; readonly segment: number }[]): void {
  let priority = NaN;
  let segment = NaN;
  for (const row of rows) {
    if (row.priority === priority && row.segment === segment) continue;
    priority = row.priority;
    segment = row.segment;
    reads.delete(readKey('state', priority, segment));
  }
}

/**
 * Reads ahead of the turns of an actor the offloaded segments they will load back (see
 * `OffloadPlanner.upcoming`), once a turn committed and before the next one starts: the store's
 * segment, and the table's rows of it (items given back into it while it was out), which a load
 * back reads as well. The turn that loads a segment back takes the reads instead of making them;
 * everything else about the load (the write, the order of a priority's segments, a failure) is
 * the turn's, as without a read ahead.
 *
 * A read belongs to the actor (the core) it was made for: a core replaced after another process
 * changed the queue starts with none, and an attempt that used one loses the version check as it
 * would without it. Within the actor, a segment's rows and its copy in the store change only by
 * its own turns, one at a time, and a committed turn forgets the reads of every segment whose
 * rows it wrote or that it saved to or deleted from the store, before the next turn starts; a
 * read made after that commit sees it. A read that fails, or finds nothing in the store, is
 * dropped: the turn reads for itself, and counts and logs a failure as always. Hand-written,
 * because which segments come next and when a read is stale are the segment logic's own.
 */
@Injectable()
export class SegmentReadAhead {
  private readonly logger = new Logger('TurnRunner');
  private readonly reads = new WeakMap<QueueCore, Map<string, Read>>();

  /**
   * Segments read past the buffer for each priority a turn popped from (`READ_AHEAD_SEGMENTS`;
   * 0: none). A consumer draining a deep queue takes about a segment a turn: with two, each is
   * read a whole turn before one needs it.
   */
  readonly segments: number;
  private readonly maxSegmentsPerActor: number;

  constructor(
    config: AppConfig,
    private readonly store: OffloadStore,
    private readonly queueState: QueueStateRepository,
    private readonly stats: OffloadStats,
    @Optional() @Inject(RUNTIME_OBSERVER) private readonly observer: RuntimeObserver = NO_OBSERVER,
  ) {
    this.segments = config.env.READ_AHEAD_SEGMENTS;
    this.maxSegmentsPerActor = MAX_PRIORITIES_READ_AHEAD * this.segments;
  }

  /**
   * The read made ahead for `core` of `ref` (the table's rows or the store's segment), taken (a
   * read serves one turn), or undefined: none was made. It answers undefined when it failed.
   */
  take(core: QueueCore, ref: SegmentRef): Promise<SegmentFetch | undefined> | undefined {
    const reads = this.reads.get(core);
    if (!reads) return undefined;
    const key = readKey(ref.from, ref.priority, ref.segment);
    const read = reads.get(key);
    reads.delete(key);
    return read?.fetch;
  }

  /**
   * A turn of `core` committed: forgets the reads of the segments it changed, and reads the
   * `upcoming` ones not read yet (as many as {@link MAX_PRIORITIES_READ_AHEAD} priorities need, per actor).
   * @param write - the turn's write: the segments whose rows it wrote
   * @param inStore - every segment the turn saved to the store, deleted from it, or tried to save
   */
  committed(queueId: string, core: QueueCore, upcoming: readonly SegmentRef[], write: TurnWrite | undefined, inStore: readonly SegmentId[]): void {
    if (!core.isPresent) {
      this.reads.delete(core);
      return;
    }
    let reads = this.reads.get(core);
    if (reads) {
      for (const s of inStore) reads.delete(readKey('offload', s.priority, s.segment));
      if (write) for (const rows of [write.deletes, write.inserts, write.packs ?? []]) forgetRowsOf(reads, rows);
    }
    const rows: SegmentRef[] = [];
    for (const ref of upcoming) {
      // Two reads a segment, the rows' counted once their query is made below.
      if ((reads?.size ?? 0) + rows.length >= 2 * this.maxSegmentsPerActor) break;
      reads ??= this.readsOf(core);
      const stored = readKey('offload', ref.priority, ref.segment);
      if (!reads.has(stored)) reads.set(stored, counted(this.readStore(queueId, ref)));
      if (!reads.has(readKey('state', ref.priority, ref.segment))) rows.push(ref);
    }
    if (!reads || rows.length === 0) return;
    // The rows of all of them in one query.
    const read = this.queueState.loadSegments(queueId, rows).catch(() => undefined);
    for (const ref of rows) {
      reads.set(
        readKey('state', ref.priority, ref.segment),
        counted(read.then((found) => found && { entries: found.get(segKey(ref.priority, ref.segment)) ?? [] })),
      );
    }
  }

  /** Items that reads made for `core` hold, not taken yet. */
  itemsOf(core: QueueCore): number {
    let items = 0;
    for (const read of this.reads.get(core)?.values() ?? []) items += read.items;
    return items;
  }

  private readsOf(core: QueueCore): Map<string, Read> {
    const reads = new Map<string, Read>();
    this.reads.set(core, reads);
    return reads;
  }

  /**
   * One read of the store; undefined when it failed or found nothing (the turn then reads for
   * itself). A failure counts as any failed load does (`pushpop_segment_load_failures_total`
   * counts the store's failed reads); the turn's own read logs it if the store still fails.
   */
  private async readStore(queueId: string, ref: SegmentRef): Promise<SegmentFetch | undefined> {
    const started = performance.now();
    try {
      const segment = await this.store.load(queueId, offloadedSegmentKey(ref.priority, ref.segment, queueId));
      if (!segment) return undefined;
      this.observer.segmentLoaded((performance.now() - started) / 1000);
      return segmentFetchOf(segment);
    } catch (error) {
      this.stats.loadFailures += 1;
      this.logger.debug(
        `Reading segment ${ref.segment} for priority ${ref.priority} ahead failed (actor ${queueId}): ${error instanceof Error ? error.message : String(error)}`,
      );
      return undefined;
    }
  }
}
