import { AcknowledgeThenPop, type AcknowledgeOutcome, type NextPop } from './acknowledge-then-pop.js';
import { DedupIds } from './dedup-ids.js';
import { DelayedItems, MAX_DUE_PER_TURN } from './delayed-items.js';
import { ExclusiveLock } from './exclusive-lock.js';
import { GivenBackItems } from './given-back-items.js';
import { LockOperations, type ReleaseHow, type ReleaseOutcome, type ReleaseProblem } from './lock-operations.js';
import { OffloadPlanner } from './offload-planner.js';
import { PrioritySegments } from './priority-segments.js';
import { QueueFront } from './queue-front.js';
import { QueuePops, type PopAck } from './queue-pops.js';
import { DeliveryLimits } from './delivery-limits.js';
import { changeSettings, lockModeOf } from './queue-settings.js';
import { QueueInspection, type QueueView, type StateLookup } from './queue-inspection.js';
import { Redrive, type RedriveBatch, type RedriveRequest } from './redrive.js';
import { SharedLocks, type SharedExpiryOutcome } from './shared-locks.js';
import { TurnState, type CoreContext } from './turn-state.js';
import { deleteQueueWrite, turnWrite } from './turn-write.js';
import {
  type DueFetch,
  type LockMode,
  type LockProblem,
  type LockRowsFetch,
  type LockState,
  Needed,
  type NewItem,
  type PriorityMetadata,
  type QueueRecord,
  type QueueSettings,
  type QueueSnapshot,
  type SegmentFetch,
  type SegmentRef,
  type SettingsPatch,
  type SettingsProblem,
  type SharedLockSummary,
  type TurnWrite,
} from './types.js';

export { MAX_DUE_PER_TURN } from './delayed-items.js';
export { MAX_EXPIRED_LOCKS_PER_TURN, type SharedExpiryOutcome } from './shared-locks.js';
export type { GiveBackOutcome } from './given-back-items.js';
export type { ReleaseHow, ReleaseOutcome, ReleaseProblem } from './lock-operations.js';
export type { PopAck } from './queue-pops.js';
export type { AcknowledgeOutcome, NextPop } from './acknowledge-then-pop.js';
export type { RedriveBatch, RedriveRequest } from './redrive.js';
export type { PriorityView, QueueView, StateLookup } from './queue-inspection.js';

import type { PopOutcome, PushOutcome } from './outcomes.js';

export type { PopOutcome, PushOutcome } from './outcomes.js';

/**
 * The pure core of one queue: the one entry point of the decisions of seed 003 and 004
 * (segments, pops, locks, offloading) and of the contract's additions (shared locks, delayed
 * items, dedup ids, dead letters, pause, retry delays, delivery limits), each kept by a part
 * of its own. No I/O: every operation is synchronous and records its row changes in the
 * turn's {@link TurnState}; the turn runner writes them in one statement and then calls
 * {@link committed}, which starts a fresh turn.
 *
 * Rules every operation keeps:
 * - **Check, then change.** An operation that needs rows it does not hold returns
 *   {@link Needed}, naming all of them, before it changes anything (it never throws to ask);
 *   the driver (`core-driver.ts`) reads them, hands them over (`provide*`), and makes the call
 *   again. A refused operation (locked, wrong lock id, settings it cannot take) changes nothing
 *   and says why in its outcome.
 * - **Time is passed in.** Every operation that depends on the time takes `now` (epoch ms).
 * - **Memory mirrors the table plus the turn's writes**, and is bounded between turns (see
 *   {@link PrioritySegments}).
 */
export class QueueCore {
  /** The stored version; null while the queue has no row. */
  private storedVersion: number | null;
  private exists: boolean;
  private deleted = false;
  private currentSettings: QueueSettings;
  /**
   * This turn's state, made on first use in a turn and dropped when it ends: between turns a
   * core holds none, so a queue's state from its last turn does not live on (and get promoted by
   * V8's young-generation collections, to die later in the old generation) until its next turn.
   */
  private currentOf: TurnState | undefined = undefined;
  private get current(): TurnState {
    return (this.currentOf ??= new TurnState());
  }
  private readonly segments: PrioritySegments;
  private readonly exclusive: ExclusiveLock;
  private readonly givenBack: GivenBackItems;
  private readonly shared: SharedLocks;
  private readonly delayed: DelayedItems;
  private readonly dedup: DedupIds;
  /**
   * Offloading, the runner's side of it: which segments come back or go out with the turn
   * (`loadBack`, `plan`, `offloaded`) and which the next turns bring back (`upcoming`).
   */
  readonly offload: OffloadPlanner;
  private readonly front: QueueFront;
  private readonly locks: LockOperations;
  private readonly pops: QueuePops;
  private readonly ackThenPop: AcknowledgeThenPop;
  private readonly inspection: QueueInspection;
  private readonly redriver: Redrive;
  private readonly limits: DeliveryLimits;
  /** What the turn's write is made of besides the turn itself. */
  private readonly parts: Parameters<typeof turnWrite>[2];

  private constructor(settings: QueueSettings, version: number | null, record?: QueueRecord) {
    this.currentSettings = settings;
    this.storedVersion = version;
    this.exists = version !== null;
    // What the parts share: the settings and the turn as they are now (both change), and the row to be.
    const settingsNow = (): QueueSettings => this.currentSettings;
    const turnNow = (): TurnState => this.current;
    const ctx: CoreContext = {
      get settings() {
        return settingsNow();
      },
      get turn() {
        return turnNow();
      },
      markPresent: () => {
        this.exists = true;
      },
    };
    this.segments = new PrioritySegments(ctx, record?.priorities);
    this.exclusive = new ExclusiveLock(ctx, record?.lock ?? null);
    this.delayed = new DelayedItems(ctx, this.segments, record?.delayed);
    this.givenBack = new GivenBackItems(ctx, this.segments, this.delayed);
    this.shared = new SharedLocks(ctx, this.givenBack, record?.shared);
    this.limits = new DeliveryLimits(ctx, () => this.inFlight, record?.popBudget);
    this.dedup = new DedupIds(ctx, () => this.storedVersion !== null);
    this.offload = new OffloadPlanner(ctx, this.segments);
    this.front = new QueueFront(ctx, this.segments, this.givenBack);
    this.locks = new LockOperations(ctx, this.exclusive, this.shared, this.givenBack);
    this.pops = new QueuePops(ctx, this.segments, this.exclusive, this.shared, this.locks, this.limits, this.front);
    this.ackThenPop = new AcknowledgeThenPop(ctx, this.locks, this.pops);
    this.inspection = new QueueInspection(ctx, this.segments, this.exclusive, this.shared, this.delayed);
    this.redriver = new Redrive(ctx, this.front, this.givenBack);
    this.parts = { segments: this.segments, shared: this.shared, delayed: this.delayed };
  }

  /** A queue with no row: pops find nothing, the first push creates it. */
  static absent(settings: QueueSettings): QueueCore {
    return new QueueCore(settings, null);
  }

  /** A queue as stored. */
  static fromRecord(record: QueueRecord): QueueCore {
    return new QueueCore(record.settings, record.version, record);
  }

  /** The version the queue's row has as far as this core knows; null when it has no row. */
  get version(): number | null {
    return this.storedVersion;
  }

  get isPresent(): boolean {
    return this.exists;
  }

  get settings(): QueueSettings {
    return this.currentSettings;
  }

  get lockMode(): LockMode {
    return lockModeOf(this.currentSettings);
  }

  /** The exclusive lock (or the last one, expired); null when there is none. */
  get lock(): LockState | null {
    return this.exclusive.lock;
  }

  /** Shared locks as the queue row records them. */
  get sharedLocks(): SharedLockSummary {
    return this.shared.state;
  }

  /** Items waiting (not held by a lock), given-back ones included. */
  get count(): number {
    return this.segments.count;
  }

  /** Whether pops hand out nothing (the queue is paused). */
  get paused(): boolean {
    return this.currentSettings.paused === true;
  }

  /**
   * Items a pop could take now: none while the queue is paused, else {@link count}, at most the
   * room `maxInFlight` leaves for a pop with ack. What wakes long polls (the pop budget refills
   * with time, not with a turn: a poll waiting for it waits for the time).
   */
  get available(): number {
    return this.paused ? 0 : Math.min(this.segments.count, this.inFlightRoom);
  }

  /** Items held by live locks (the exclusive one, if active, and the shared ones). */
  get inFlight(): number {
    return (this.exclusive.isActive ? this.exclusive.lock!.items.length : 0) + this.shared.items;
  }

  /** Items a pop with ack may still take under `maxInFlight` (Infinity: no limit). */
  get inFlightRoom(): number {
    return this.limits.room;
  }

  /** Delayed items: stored apart from the segments, invisible until due and moved. */
  get delayedCount(): number {
    return this.delayed.size;
  }

  /** Due time (epoch ms) of the earliest delayed item; null when there is none. */
  get nextDueAt(): number | null {
    return this.delayed.nextDueAt;
  }

  /** Whether delayed items are due at `now` and not moved yet (after {@link moveDueItems}: a backlog for the next turn). */
  hasDueItems(now: number): boolean {
    return this.delayed.hasDue(now);
  }

  /** Items held in memory. */
  get itemsInMemory(): number {
    return this.segments.itemsInMemory + this.shared.knownItems;
  }

  /** Priorities that have an entry (they hold items, or shared locks hold some of theirs), lowest (popped first) first. */
  priorityList(): readonly number[] {
    return this.segments.list();
  }

  meta(priority: number): Readonly<PriorityMetadata> | undefined {
    return this.segments.get(priority);
  }

  /** Whether the metadata says a segment is in the offload store. */
  isOffloadedSegment(priority: number, segment: number): boolean {
    return this.segments.isOffloaded(this.segments.get(priority), segment);
  }

  /** Segment numbers of a priority held in memory, ascending. */
  cachedSegments(priority: number): number[] {
    return this.segments.cachedSegments(priority);
  }

  // ---------------------------------------------------------------------------------------
  // operations

  /**
   * Pushes items in order: each is appended at the tail of its priority, or, with a delay, put
   * aside until `now + delayMs` (see {@link moveDueItems}). An item whose dedup id is live
   * (accepted on this queue within the window, by an earlier turn, an earlier operation of this
   * turn or an earlier item of this push) is skipped; an accepted id is remembered until
   * `now + dedupWindowMs`. Returns {@link Needed}, before changing anything, for ids not checked
   * this turn (a push op declares its ids, so that the turn reads them before it runs).
   */
  push(items: readonly NewItem[], now: number, dedupWindowMs: number): PushOutcome | Needed {
    if (items.some((i) => i.dedupId !== undefined)) {
      const need = this.dedup.need(items.flatMap((i) => (i.dedupId !== undefined ? [i.dedupId] : [])));
      if (need) return new Needed(need);
    }
    let enqueued = 0;
    let duplicates = 0;
    for (const item of items) {
      const { dedupId, delayMs } = item;
      if (dedupId !== undefined && !this.dedup.accept(dedupId, now, dedupWindowMs)) {
        duplicates += 1;
        continue;
      }
      if (delayMs !== undefined && delayMs > 0) this.delayed.add(now + delayMs, item.priority, item.json, undefined, item.headers);
      else this.segments.append(item.priority, item.json, item.headers === undefined ? undefined : { headers: item.headers });
      enqueued += 1;
    }
    if (enqueued > 0) {
      this.exists = true;
      this.current.touch();
    }
    return { enqueued, duplicates };
  }

  /** What must be read so that every dedup id given is checked this turn (the runner asks for all the pushes of a turn at once, so one read serves them). */
  checkDedupIds(ids: readonly string[]): Needed | undefined {
    const need = this.dedup.need(ids);
    return need ? new Needed(need) : undefined;
  }

  /** Hands over which of the dedup ids a {@link Needed} asked for are live. */
  provideDedupIds(ids: readonly string[], live: ReadonlySet<string>): void {
    this.dedup.provide(ids, live);
  }

  /**
   * The step at the start of every turn: delayed items due at `now` join the tails of their
   * priorities before the turn's operations look at the queue (see {@link DelayedItems.moveDue}).
   * If more are due than `limit`, {@link hasDueItems} stays true and the runner gives the
   * backlog turns of its own before any operation, so nothing pushed later overtakes a due item.
   * Items given back and waiting out a retry delay go back where they were pushed.
   */
  moveDueItems(now: number, limit = MAX_DUE_PER_TURN): number | undefined | Needed {
    const due = this.delayed.moveDue(now, limit);
    if (due === undefined || due instanceof Needed) return due;
    if (due.retried.length > 0) this.givenBack.placeRetried(due.retried);
    return due.moved;
  }

  /** Hands over the due items a {@link Needed} asked for. */
  provideDueItems(fetch: DueFetch): void {
    this.current.dueFetch = fetch;
  }

  /** Removes up to `depth` items from the front, with `ack` under a new lock or a lock per item (see {@link QueuePops.pop}). */
  pop(depth: number, now: number, ack?: PopAck): PopOutcome | Needed {
    return this.pops.pop(depth, now, ack);
  }

  /** Gives back the items of the exclusive lock if its time has come at `now` (a step at the start of every turn). */
  expireLock(now: number): number | undefined {
    return this.locks.expireExclusive(now);
  }

  /** Gives back the items of shared locks expired at `now` (a step at the start of every turn); see {@link SharedLocks.expireDue}. */
  expireSharedLocks(now: number): SharedExpiryOutcome | undefined | Needed {
    return this.shared.expireDue(now);
  }

  /** The contract's checks for acknowledge, extend-lock and release, in order (see {@link LockOperations.check}). */
  checkLock(lockId: string, now: number): LockState | LockProblem | Needed {
    return this.locks.check(lockId, now);
  }

  /** Removes the lock and its items for good; the number of items, or why not. */
  acknowledge(lockId: string, now: number): number | LockProblem | Needed {
    return this.locks.acknowledge(lockId, now);
  }

  /** Sets the lock's expiry to `now + ttlMs`. */
  extendLock(lockId: string, now: number, ttlMs: number): LockState | LockProblem | Needed {
    return this.locks.extend(lockId, now, ttlMs);
  }

  /** Gives the lock's items back now (to where they were; dead-lettered past `maxDeliveries`) and removes the lock. */
  release(lockId: string, now: number): number | ReleaseProblem | Needed {
    const released = this.locks.release(lockId, now);
    return released instanceof Needed ? released : released.returned;
  }

  /**
   * {@link release}, telling items given back from items dead-lettered and items waiting out a
   * retry delay; `how.delayMs` replaces the queue's retry delay for this release, `how.deadLetter`
   * sends every item to the dead-letter queue (see {@link LockOperations.release}).
   */
  releaseLock(lockId: string, now: number, how?: ReleaseHow): ReleaseOutcome | Needed {
    return this.locks.release(lockId, now, how);
  }

  /** Acknowledges each lock in order, as {@link acknowledge} would, then pops with `next` if any was (see {@link AcknowledgeThenPop}). */
  acknowledgeAll(lockIds: readonly string[], now: number, next?: NextPop): AcknowledgeOutcome | Needed {
    return this.ackThenPop.run(lockIds, now, next);
  }

  /** Releases each lock in order, as {@link releaseLock} would (see {@link LockOperations.releaseAll}). */
  releaseAll(lockIds: readonly string[], now: number, how?: ReleaseHow): ReleaseOutcome[] | Needed {
    return this.locks.releaseAll(lockIds, now, how);
  }

  /** What must be read so that the locks named are known this turn (the runner asks for the lock ids of all a turn's operations at once). */
  checkLockIds(lockIds: readonly string[]): Needed | undefined {
    return this.locks.need(lockIds);
  }

  /**
   * Changes the queue's settings (creating the queue if it has no row). The segment layout
   * changes only while the queue holds nothing (items, delayed items, locks); the lock mode
   * only while no lock lives; every refusal is one of {@link changeSettings}'s.
   */
  updateSettings(patch: SettingsPatch): QueueSettings | SettingsProblem {
    const holdsAnything = this.count > 0 || this.delayed.size > 0 || this.segments.size > 0;
    const lockExpiresAt = this.exclusive.isActive ? this.exclusive.lock!.expiresAt : this.shared.nextExpiry;
    const lockLives = this.exclusive.isActive || this.shared.live > 0;
    const next = changeSettings(this.currentSettings, patch, { holdsAnything, lockLives, lockExpiresAt });
    if ('refused' in next) return next;
    this.limits.settingsChanging(this.currentSettings, next);
    this.currentSettings = next;
    this.current.writes.settingsChanged = true;
    this.exists = true;
    this.current.touch();
    return next;
  }

  /**
   * One batch of a redrive (see {@link Redrive}); with the items left on the queue after it
   * (not counting those held by locks), or undefined when the queue does not exist.
   */
  redrive(request: RedriveRequest): (RedriveBatch & { readonly count: number }) | undefined | Needed {
    if (!this.exists) return undefined;
    const batch = this.redriver.batch(request);
    return batch instanceof Needed ? batch : { ...batch, count: this.count };
  }

  /** Tokens of the pop budget at `now`; null without a rate limit. */
  popTokens(now: number): number | null {
    return this.limits.tokens(now);
  }

  /** Hands over lock rows a {@link Needed} asked for. */
  provideLockRows(fetch: LockRowsFetch): void {
    if (fetch.kind === 'returned') this.givenBack.provide(fetch.priority, fetch.entries);
    else this.shared.provide(fetch);
  }

  /** Deletes the queue with everything in it; the items it held (waiting, locked and delayed), or undefined when there is no queue. */
  deleteQueue(): number | undefined {
    if (!this.exists) return undefined;
    const held = (this.exclusive.isActive ? this.exclusive.lock!.items.length : 0) + this.shared.items;
    const deleted = this.count + held + this.delayed.size;
    this.offload.deleteAll();
    this.segments.clear();
    this.exclusive.clear();
    this.shared.clear();
    this.current.returnedCache.clear();
    this.delayed.clear();
    this.exists = false;
    this.deleted = true;
    return deleted;
  }

  /** The queue as inspection shows it; undefined when there is no queue. */
  view(): QueueView | undefined | Needed {
    return this.exists ? this.inspection.view() : undefined;
  }

  /** The raw state under seed 003's key names (metadata document, a segment in state, an offloaded segment). */
  lookupState(queueId: string, key: string): StateLookup | Needed {
    return this.exists ? this.inspection.lookupState(queueId, key) : 'not-found';
  }

  /** Seed 003's metadata document (never the lock). */
  metadataDocument(): unknown {
    return this.inspection.metadataDocument();
  }

  // ---------------------------------------------------------------------------------------
  // the runner's side of a turn

  /** Hands over a segment a {@link Needed} asked for (see {@link PrioritySegments.provide}). */
  provide(ref: SegmentRef, fetch: SegmentFetch): void {
    this.segments.provide(ref, fetch);
  }

  /**
   * The turn's row changes as one write, or undefined when the turn changed nothing (the
   * runner then only checks that the stored version is still the one this core holds).
   * @param createdVersion - gives the version a queue created by this turn starts at
   */
  pendingWrite(createdVersion: () => number): TurnWrite | undefined {
    if (this.deleted) return this.storedVersion === null ? undefined : deleteQueueWrite(this.storedVersion, this.settings);
    return turnWrite(this.current, this.settings, this.parts, this.storedVersion, createdVersion);
  }

  /** Offloaded segments to delete from the store once the turn's write has committed. */
  storeDeletes(): readonly { priority: number; segment: number }[] {
    return this.current.writes.storeDeletes;
  }

  /**
   * The queue as committed, in the form activating it reads (see {@link QueueInspection.snapshot});
   * undefined in the middle of a turn, or for a queue memory does not hold entirely.
   */
  snapshot(): QueueSnapshot | undefined {
    if (this.storedVersion === null || this.deleted || (this.currentOf !== undefined && !this.currentOf.writes.isEmpty)) return undefined;
    // The pop budget is not part of the snapshot's form: a receiver must read it with the row.
    if (this.currentSettings.maxPopsPerSecond != null) return undefined;
    return this.inspection.snapshot(this.storedVersion);
  }

  /** The turn's write (if any) has committed: the core now mirrors the stored queue. Ends the turn; the next starts afresh. */
  committed(write: TurnWrite | undefined): void {
    if (write) this.storedVersion = write.deleteQueue ? null : write.newVersion;
    // A deleted queue's locks are gone, whatever the turn read of them before.
    if (write?.deleteQueue) this.shared.forget();
    else if (this.currentOf) this.shared.remember(this.currentOf);
    this.deleted = false;
    this.currentOf = undefined;
    this.segments.evictOutsideWindow();
  }
}
