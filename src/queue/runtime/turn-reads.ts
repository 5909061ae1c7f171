import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import type { DbSession } from '../../database/unit-of-work.js';
import { OffloadStats } from '../../offload/offload-stats.js';
import { offloadedSegmentKey, OffloadStore } from '../../offload/offload-store.js';
import { DedupIdRepository } from '../../storage/dedup-id.repository.js';
import { DelayedItemRepository } from '../../storage/delayed-item.repository.js';
import { LockRepository } from '../../storage/lock.repository.js';
import { QueueStateRepository } from '../../storage/queue-state.repository.js';
import type { RowReader } from '../core/core-driver.js';
import type { QueueCore } from '../core/queue-core.js';
import { segmentFetchOf, SegmentReadAhead } from './segment-read-ahead.js';
import { NO_OBSERVER, RUNTIME_OBSERVER, type RuntimeObserver } from './runtime-observer.js';
import type { DueFetch, LockRowsFetch, LockRowsNeed, SegmentEntry, SegmentFetch, SegmentRef } from '../core/types.js';

/**
 * A turn under the row lock needs segments from the offload store, which is never read inside a
 * transaction (it would hold the row lock for a store's latency): the runner rolls the attempt
 * back, reads them, and makes the attempt again with them at hand. The one re-run left outside
 * the core's driver, and a rare one: only a turn that lost the version check twice takes the
 * row lock, and only one that reaches an offloaded segment needs the store.
 */
export class StoreReadNeeded extends Error {
  constructor(readonly refs: SegmentRef[]) {
    super('offload store read needed');
  }
}

export const refKey = (ref: { priority: number; segment: number }): string => `${ref.priority}:${ref.segment}`;
const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * What one attempt at a turn reads for its core (see `drive`): from the attempt's own session,
 * never carried over from an earlier attempt (dedup ids above all: a loser of a race must see
 * the winner's ids), except offloaded segments read before a transaction (`prefetched`).
 */
export class AttemptReader implements RowReader {
  /** Something was read besides the queue's row. */
  read = false;
  /** Segments loaded back from the offload store for use. */
  readonly loaded: SegmentRef[] = [];

  constructor(
    private readonly reads: TurnReads,
    private readonly queueId: string,
    private readonly session: DbSession,
    private readonly transaction: DbSession | undefined,
    private readonly prefetched: ReadonlyMap<string, SegmentFetch>,
    private readonly now: number,
    private readonly core: QueueCore,
  ) {}

  segments(refs: readonly SegmentRef[]): Promise<SegmentFetch[]> {
    this.read = true;
    return this.reads.segments(this.queueId, refs, this.transaction, this.prefetched, this.loaded, this.core);
  }

  dueItems(now: number, limit: number): Promise<DueFetch> {
    this.read = true;
    return this.reads.delayedItems.loadDueItems(this.queueId, now, limit, this.session);
  }

  liveDedupIds(ids: readonly string[]): Promise<ReadonlySet<string>> {
    this.read = true;
    return this.reads.dedupIds.liveDedupIds(this.queueId, ids, this.now, this.session);
  }

  lockRows(need: LockRowsNeed): Promise<LockRowsFetch> {
    this.read = true;
    return this.reads.lockRows(this.queueId, need, this.session);
  }
}

/** The reads turns make for their cores: rows of the queue's tables, and segments of the offload store. */
@Injectable()
export class TurnReads {
  private readonly logger = new Logger('TurnRunner');

  constructor(
    private readonly queueState: QueueStateRepository,
    private readonly locks: LockRepository,
    readonly delayedItems: DelayedItemRepository,
    readonly dedupIds: DedupIdRepository,
    private readonly store: OffloadStore,
    private readonly stats: OffloadStats,
    private readonly readAhead: SegmentReadAhead,
    @Optional() @Inject(RUNTIME_OBSERVER) private readonly observer: RuntimeObserver = NO_OBSERVER,
  ) {}

  /** The reader of one attempt at a turn of `queueId` at `now`, by `core` (whose reads ahead it takes). */
  forAttempt(
    queueId: string,
    core: QueueCore,
    session: DbSession,
    transaction: DbSession | undefined,
    prefetched: ReadonlyMap<string, SegmentFetch>,
    now: number,
  ): AttemptReader {
    return new AttemptReader(this, queueId, session, transaction, prefetched, now, core);
  }

  /** Fetches the segments a core call asked for, in the order asked; under the row lock, throws {@link StoreReadNeeded} for store reads not made yet. */
  async segments(
    queueId: string,
    refs: readonly SegmentRef[],
    transaction: DbSession | undefined,
    prefetched: ReadonlyMap<string, SegmentFetch>,
    loaded: SegmentRef[],
    core?: QueueCore,
  ): Promise<SegmentFetch[]> {
    const fromState = refs.filter((r) => r.from === 'state');
    const fromStore = new Map<string, SegmentFetch>();
    const unread = refs.filter((r) => r.from === 'offload' && !prefetched.has(refKey(r)));
    if (transaction && unread.length > 0) throw new StoreReadNeeded(unread);
    // The table's rows and the store's segments at once: a segment coming back needs both, and
    // one round trip after the other would double what the turn waits for.
    const [rows] = await Promise.all([
      this.tableRows(queueId, fromState, transaction, core),
      this.readStoreInOrder(queueId, refs, fromStore, prefetched, core),
    ]);
    for (const ref of refs) {
      const fetch = fromStore.get(refKey(ref));
      if (ref.from === 'offload' && ref.purpose === 'use' && fetch && !('failed' in fetch) && fetch.entries) loaded.push(ref);
    }
    return refs.map((ref) => (ref.from === 'state' ? { entries: rows.get(refKey(ref)) ?? [] } : fromStore.get(refKey(ref))!));
  }

  /** The table's rows of segments, keyed `priority:segment` (see `QueueStateRepository.loadSegments`): those read ahead for `core` from there. */
  private async tableRows(
    queueId: string,
    refs: readonly SegmentRef[],
    transaction: DbSession | undefined,
    core: QueueCore | undefined,
  ): Promise<Map<string, SegmentEntry[]>> {
    const rows = new Map<string, SegmentEntry[]>();
    const taken = refs.map((ref) => (core ? this.readAhead.take(core, ref) : undefined));
    const unread: SegmentRef[] = [];
    for (const [i, ref] of refs.entries()) {
      const read = await taken[i];
      if (read && !('failed' in read)) rows.set(refKey(ref), [...(read.entries ?? [])]);
      else unread.push(ref);
    }
    if (unread.length > 0) for (const [key, entries] of await this.queueState.loadSegments(queueId, unread, transaction)) rows.set(key, entries);
    return rows;
  }

  /**
   * Reads the offloaded segments among `refs` into `into`, in the order asked (those in
   * `prefetched` from there, then those read ahead for `core`). The segments of a priority come back bottom up, each only after
   * the one below it: past one that could not be read, nothing more of its priority is read
   * (the core would not take it), and those refs are answered as not read.
   */
  async readStoreInOrder(
    queueId: string,
    refs: readonly SegmentRef[],
    into: Map<string, SegmentFetch>,
    prefetched: ReadonlyMap<string, SegmentFetch> = new Map(),
    core?: QueueCore,
  ): Promise<void> {
    const stopped = new Set<number>();
    for (const ref of refs) {
      if (ref.from !== 'offload') continue;
      if (ref.purpose === 'use' && stopped.has(ref.priority)) {
        into.set(refKey(ref), { failed: true });
        continue;
      }
      const fetch = prefetched.get(refKey(ref)) ?? (core && (await this.readAhead.take(core, ref))) ?? (await this.readStore(queueId, ref));
      into.set(refKey(ref), fetch);
      if (ref.purpose === 'use' && ('failed' in fetch || !fetch.entries)) stopped.add(ref.priority);
    }
  }

  /** Reads the shared-lock rows or given-back items a core call asked for. */
  async lockRows(queueId: string, need: LockRowsNeed, session: DbSession): Promise<LockRowsFetch> {
    switch (need.kind) {
      case 'locks': {
        const found = await this.locks.loadSharedLocks(queueId, need.ids, session);
        return { kind: 'locks', locks: new Map(need.ids.map((id) => [id, found.get(id) ?? null])) };
      }
      case 'due':
        return { kind: 'due', ...(await this.locks.loadDueSharedLocks(queueId, need.now, need.limit, session)) };
      case 'next':
        return { kind: 'next', nextExpiry: await this.locks.nextSharedLockExpiry(queueId, session, -Infinity, need.exclude) };
      case 'returned':
        return { kind: 'returned', priority: need.priority, entries: await this.locks.loadReturned(queueId, need.priority, need.limit, session) };
    }
  }

  /** Reads an offloaded segment; a failure (or nothing stored, for a segment the metadata says is there) is counted when the segment was needed. */
  async readStore(queueId: string, ref: SegmentRef): Promise<SegmentFetch> {
    const key = offloadedSegmentKey(ref.priority, ref.segment, queueId);
    const started = performance.now();
    try {
      const segment = await this.store.load(queueId, key);
      if (ref.purpose === 'use') {
        if (!segment) throw new Error(`nothing stored under ${key}`);
        this.observer.segmentLoaded((performance.now() - started) / 1000);
      }
      return segmentFetchOf(segment);
    } catch (error) {
      if (ref.purpose === 'use') {
        this.stats.loadFailures += 1;
        this.logger.error(`Failed to load segment ${ref.segment} for priority ${ref.priority} (actor ${queueId}): ${message(error)}`);
      }
      return { failed: true };
    }
  }
}
