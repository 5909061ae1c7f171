import { randomInt } from 'node:crypto';
import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { AppConfig } from '../../config/app-config.js';
import { Clock } from '../../common/clock.js';
import { isTransientConflict } from '../../common/store-errors.js';
import { ItemNotifications } from '../../database/item-notifications.js';
import { UnitOfWork, type DbSession } from '../../database/unit-of-work.js';
import { OffloadStats } from '../../offload/offload-stats.js';
import { offloadedSegmentKey, OffloadStore } from '../../offload/offload-store.js';
import type { LoadedQueue, StoredTurnWrite } from '../../database/stored-queue.js';
import { QueueStateRepository } from '../../storage/queue-state.repository.js';
import { QueueCore, type SharedExpiryOutcome } from '../core/queue-core.js';
import { drive, ReadsOutOfStep } from '../core/core-driver.js';
import { applyOp } from '../core/queue-ops.js';
import type { OffloadMove, OrNeed, SegmentFetch, SegmentRef, TurnWrite } from '../core/types.js';
import { QueueEvents } from './queue-events.js';
import { ActorRegistry } from './actor-registry.js';
import { QueueLoads } from './queue-loads.js';
import { QueueStats } from './queue-stats.js';
import { encodeQueueState } from './queue-state-payload.js';
import { NO_OBSERVER, RUNTIME_OBSERVER, type RuntimeObserver } from './runtime-observer.js';
import type { OutcomeOf, TurnOp } from './turn-op.js';
import { TRACING, turnTrace, type Tracing } from '../../telemetry/tracing.js';

export type { TurnOp } from './turn-op.js';
import { StoreReadNeeded, TurnReads } from './turn-reads.js';

interface Pending {
  readonly op: TurnOp;
  /** With tracing on: the trace context the operation was asked for in. */
  readonly trace?: unknown;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

interface SegmentId {
  priority: number;
  segment: number;
}

interface Prepared {
  core: QueueCore;
  /** Items a pop could take on the queue as committed before this turn (none while paused). */
  countBefore: number;
  write: TurnWrite | undefined;
  /** The operations' outcomes; undefined: they did not run (a turn of its own for a backlog of due delayed items). */
  results: unknown[] | undefined;
  /** Delayed items that came due and joined their priorities in this turn (undefined: none was due). */
  dueMoved: number | undefined;
  /** Items the exclusive lock gave back on expiry in this turn (undefined: it did not expire). */
  lockExpired: number | undefined;
  /** What the expiry of due shared locks did in this turn. */
  sharedExpired: SharedExpiryOutcome | undefined;
  offloaded: OffloadMove[];
  loaded: SegmentRef[];
  /** Saves to a store outside the database that failed, and may have written a copy. */
  failedSaves: SegmentId[];
  /** With tracing on: when the write statement ran (`performance.now()`). */
  sql?: { start: number; end: number };
}

/** The queue row changed under an optimistic turn: run it again on the current row (carried when known; null: no row). */
class VersionConflict extends Error {
  constructor(readonly current?: LoadedQueue | null) {
    super('the queue changed');
  }
}

/**
 * {@link TurnRunner.run} refused an operation: `MAX_PENDING_PER_QUEUE` operations already wait
 * on the queue. Nothing ran; the service answers 429 QUEUE_BUSY.
 */
export class QueueLineFull extends Error {
  constructor(readonly queueId: string) {
    super(`too many operations are waiting on queue ${queueId}`);
    this.name = 'QueueLineFull';
  }
}

/** Operations and items one turn takes from a queue's line at most. */
const MAX_TURN_OPERATIONS = 64;
const MAX_TURN_WEIGHT = 1000;
/** Optimistic attempts before a turn takes the row lock. */
const OPTIMISTIC_ATTEMPTS = 2;
const MAX_ATTEMPTS = 8;
/**
 * Turns of their own a backlog of due delayed items may take before the waiting operations
 * run anyway (each turn moves up to MAX_DUE_PER_TURN items).
 */
const MAX_BACKLOG_TURNS = 100;
/** Attempts at deleting unused copies from a store outside the database within one turn. */
const CLEAN_UP_ATTEMPTS = 3;
/** Unused copies remembered for later turns at most (beyond it they are logged and left). */
const MAX_LEFTOVERS = 10_000;

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * The turn runner: every operation on a queue runs here, as part of a turn of the queue's actor.
 *
 * **A turn** takes the queue's mutex (one turn at a time per queue in this process), then every
 * operation waiting in the queue's line, up to a bound (group commit): the steps at its start
 * (due delayed items, expired locks) and then the operations run in arrival order against the
 * queue's core, which decides everything in memory; then the turn's changes are written in
 * **one statement** (`pushpop_write_turn`), applied only if the queue's row still has the
 * version the core was computed from. Only after it committed does any operation get its
 * outcome (a refusal is an outcome like any other). A failed write fails the turn's operations
 * together, and the actor is dropped so the next turn reloads it.
 *
 * **Expired locks** give their items back at the start of every turn, after due delayed items
 * and before the operations, in the same write (seed 004): no operation ever sees an expired
 * lock as active. An expired lock is kept as `expired`, so its id answers 410.
 *
 * **Across processes** a queue stays one actor: if another process changed the queue, the
 * version check fails, nothing is written, and the turn runs again on a reloaded core; after
 * {@link OPTIMISTIC_ATTEMPTS} it runs in a transaction holding the queue's row lock, so it
 * cannot lose again. A turn that writes nothing checks the version instead (unless it read
 * nothing but the row it just loaded).
 *
 * **Offloading** is planned by the core and carried out here: segments are saved to the store
 * before the write that removes their rows, read from it before the write that puts them back,
 * and deleted from it after that write committed (still inside the turn). The store is never
 * called inside a transaction: under the row lock, segments to load are read first (the
 * transaction is rolled back, the store read, the turn redone) and offloading waits for a
 * later turn.
 *
 * **Delayed items** due at the turn's `now` are moved to their priorities first, before
 * expired locks and the operations: the core asks for them only when the queue row's earliest due time
 * has passed (one read), and the move is part of the turn's write. If more are due than one
 * turn moves, the turn writes only that and the operations wait for the next turn, so that
 * nothing pushed later overtakes an item that was due.
 *
 * **Dedup ids** of all the turn's pushes are read with one query before the first operation
 * runs, on the attempt's own session and never from an earlier attempt: a turn that lost the
 * version check to another process's push of the same id reads that id again and answers
 * `duplicate`. The accepted ids are written by the turn's statement.
 */
@Injectable()
export class TurnRunner {
  private readonly logger = new Logger('TurnRunner');
  private readonly lockLogger = new Logger('Locks');
  private readonly lines = new Map<string, Pending[]>();
  /** Copies in a store outside the database that nothing refers to and could not be deleted yet, per queue. */
  private readonly leftovers = new Map<string, Map<string, SegmentId>>();
  private leftoverCount = 0;

  constructor(
    private readonly config: AppConfig,
    private readonly registry: ActorRegistry,
    private readonly queueState: QueueStateRepository,
    private readonly uow: UnitOfWork,
    private readonly store: OffloadStore,
    private readonly stats: OffloadStats,
    private readonly clock: Clock,
    private readonly events: QueueEvents,
    private readonly queueStats: QueueStats,
    private readonly notifications: ItemNotifications,
    private readonly loads: QueueLoads,
    private readonly reads: TurnReads,
    @Optional() @Inject(RUNTIME_OBSERVER) private readonly observer: RuntimeObserver = NO_OBSERVER,
    @Optional() @Inject(TRACING) private readonly tracing?: Tracing,
  ) {}

  /**
   * Runs an operation in a turn of the queue's actor and answers with its outcome once the turn committed.
   * @throws QueueLineFull when `MAX_PENDING_PER_QUEUE` operations already wait on the queue
   */
  run<O extends TurnOp>(queueId: string, op: O): Promise<OutcomeOf<O>> {
    if (this.isLineFull(queueId)) return Promise.reject(new QueueLineFull(queueId));
    let line = this.lines.get(queueId);
    return new Promise<OutcomeOf<O>>((resolve, reject) => {
      if (!line) this.lines.set(queueId, (line = []));
      line.push(this.tracing ? { op, resolve, reject, trace: this.tracing.currentContext() } : { op, resolve, reject });
      // One pass of the mutex per operation; a pass whose operation an earlier turn took finds the line empty.
      this.registry.turns
        .run(queueId, () => this.drain(queueId))
        .catch((error: unknown) => this.logger.error(`Turn of queue ${queueId} failed unexpectedly: ${message(error)}`));
    });
  }

  /** Whether `MAX_PENDING_PER_QUEUE` operations already wait on the queue: {@link run} would refuse another. */
  isLineFull(queueId: string): boolean {
    const line = this.lines.get(queueId);
    return line !== undefined && line.length >= this.config.env.MAX_PENDING_PER_QUEUE;
  }

  /** Operations waiting for a turn over all queues. */
  get waitingOperations(): number {
    let total = 0;
    for (const line of this.lines.values()) total += line.length;
    return total;
  }

  private async drain(queueId: string): Promise<void> {
    const line = this.lines.get(queueId);
    if (!line || line.length === 0) return;
    const batch = [line.shift()!];
    let weight = batch[0].op.weight ?? 1;
    while (line.length > 0 && batch.length < MAX_TURN_OPERATIONS && !batch.at(-1)!.op.endsTurn && weight + (line[0].op.weight ?? 1) <= MAX_TURN_WEIGHT) {
      weight += line[0].op.weight ?? 1;
      batch.push(line.shift()!);
    }
    if (line.length === 0) this.lines.delete(queueId);
    await this.turn(queueId, batch);
  }

  private async turn(queueId: string, batch: Pending[]): Promise<void> {
    let started = performance.now();
    const prefetched = new Map<string, SegmentFetch>();
    let current: LoadedQueue | null | undefined;
    let backlogTurns = 0;
    for (let attempt = 0; ; attempt++) {
      const locked = attempt >= OPTIMISTIC_ATTEMPTS;
      const known = current;
      current = undefined;
      const runOps = backlogTurns >= MAX_BACKLOG_TURNS;
      let prepared: Prepared;
      try {
        prepared = locked
          ? await this.uow.transaction((session) => this.attempt(queueId, batch, session, prefetched, undefined, runOps))
          : await this.attempt(queueId, batch, undefined, prefetched, known, runOps);
      } catch (error) {
        this.registry.deactivate(queueId);
        if (attempt + 1 < MAX_ATTEMPTS && error instanceof VersionConflict) {
          current = error.current;
          continue;
        }
        // The rows read disagreed with the row (another process changed the queue meanwhile): start again from a fresh row.
        if (attempt + 1 < MAX_ATTEMPTS && error instanceof ReadsOutOfStep) continue;
        if (attempt + 1 < MAX_ATTEMPTS && isTransientConflict(error)) {
          this.logger.warn(`Turn of queue ${queueId} lost a race in the database (${message(error)}); running it again`);
          continue;
        }
        if (attempt + 1 < MAX_ATTEMPTS && error instanceof StoreReadNeeded) {
          await this.reads.readStoreInOrder(queueId, error.refs, prefetched);
          continue;
        }
        this.observer.turnFinished((performance.now() - started) / 1000, false, batch.length);
        this.tracing?.turnFinished(turnTrace(queueId, batch, started, false, attempt + 1));
        for (const pending of batch) pending.reject(error);
        return;
      }
      if (!prepared.results) {
        // A backlog of due delayed items took this turn: the operations wait for the next one,
        // so nothing they push overtakes an item that was due before them.
        this.observer.turnFinished((performance.now() - started) / 1000, true, 0);
        await this.committed(queueId, [], prepared);
        backlogTurns += 1;
        attempt = -1;
        started = performance.now();
        continue;
      }
      this.observer.turnFinished((performance.now() - started) / 1000, true, batch.length);
      this.tracing?.turnFinished(turnTrace(queueId, batch, started, true, attempt + 1, prepared.sql));
      await this.committed(queueId, batch, prepared);
      return;
    }
  }

  /**
   * One attempt at the turn: everything up to and including the write (see the class doc).
   * @param transaction - the transaction holding the queue's row lock, or undefined (optimistic, on the pool)
   */
  private async attempt(
    queueId: string,
    batch: Pending[],
    transaction: DbSession | undefined,
    prefetched: Map<string, SegmentFetch>,
    known: LoadedQueue | null | undefined,
    runOpsInBacklog: boolean,
  ): Promise<Prepared> {
    const locked = transaction !== undefined;
    const session = transaction ?? this.uow.autocommit;
    const readsFront = batch.some((p) => p.op.readsFront);
    let core = locked || known !== undefined ? undefined : this.registry.get(queueId);
    // An empty actor whose queue another process has pushed to since is outdated: a pop starts
    // from the state that push sent instead, when it came.
    if (core && readsFront && core.count === 0 && this.loads.hasOffered(queueId)) core = undefined;
    const activated = !core;
    // Started from a state another process sent: it may be outdated, so a turn that writes
    // nothing checks it (as for an actor kept in memory).
    let offered = false;
    if (!core) {
      let loaded: LoadedQueue | null | undefined = known;
      if (locked) {
        const queue = await this.queueState.loadQueue(queueId, session, true);
        loaded = queue && { queue };
      } else if (known === undefined) {
        // A pop woken by another process's push starts from the state that push committed, when
        // it came with the notification; otherwise the load is batched with the other
        // activations under way (see QueueLoads).
        const state = readsFront ? this.loads.take(queueId, this.clock.now()) : undefined;
        offered = state !== undefined;
        loaded = state ?? (await this.loads.load(queueId, readsFront));
      }
      core = loaded ? QueueCore.fromRecord(loaded.queue) : QueueCore.absent(this.config.queueDefaults);
      // Read in the same snapshot as the row: as if the actor had been in memory with it.
      const front = loaded?.front;
      if (front) core.provide({ priority: front.priority, segment: front.segment, from: 'state', purpose: 'use' }, { entries: front.entries });
    }
    const actor = core;
    const now = this.clock.now();
    const countBefore = actor.available;
    const reader = this.reads.forAttempt(queueId, session, transaction, prefetched, now);
    // A core call that needs no rows answers at once: awaited only when the driver had to read
    // (an await of a plain value still costs a promise and a trip through the microtask queue,
    // half a dozen times per turn).
    const run = <T>(call: () => OrNeed<T>): T | Promise<T> => drive(actor, call, reader);

    // Delayed items that came due join the tails of their priorities before anything else looks at the queue.
    let dueMoved = run(() => actor.moveDueItems(now));
    if (dueMoved instanceof Promise) dueMoved = await dueMoved;
    let lockExpired = run(() => actor.expireLock(now));
    if (lockExpired instanceof Promise) lockExpired = await lockExpired;
    let sharedExpired = run(() => actor.expireSharedLocks(now));
    if (sharedExpired instanceof Promise) sharedExpired = await sharedExpired;
    let results: unknown[] | undefined;
    if (!actor.hasDueItems(now) || runOpsInBacklog) {
      results = [];
      if (batch.some((p) => p.op.dedupIds)) {
        const dedupIds = batch.flatMap((p) => p.op.dedupIds ?? []);
        await run(() => actor.checkDedupIds(dedupIds));
      }
      for (const pending of batch) {
        const outcome = run(() => applyOp(actor, pending.op, now));
        results.push(outcome instanceof Promise ? await outcome : outcome);
      }
    }
    const loaded = run(() => actor.loadBack());
    if (loaded instanceof Promise) await loaded;
    let moves = run(() => actor.planOffload());
    if (moves instanceof Promise) moves = await moves;
    const inDatabase = this.store.inDatabase;
    const failedSaves: SegmentId[] = [];
    let offloaded: OffloadMove[] = [];
    if (inDatabase) {
      // Written by the turn's own statement.
      for (const move of moves) actor.offloaded(move.priority, move.segment);
      offloaded = [...moves];
    } else if (!locked) {
      offloaded = await this.offload(queueId, actor, moves, failedSaves);
    }

    const write = actor.pendingWrite(() => randomInt(2 ** 40, 2 ** 47));
    let sql: Prepared['sql'];
    if (write) {
      const key = (s: SegmentId): string => offloadedSegmentKey(s.priority, s.segment, queueId);
      const defaults = this.config.queueDefaults;
      const stored: StoredTurnWrite = {
        ...write,
        storeSaves: inDatabase
          ? offloaded.map((m) => ({ key: key(m), items: m.items, ...(m.from ? { from: m.from } : {}), ...(m.headers ? { headers: m.headers } : {}) }))
          : [],
        storeDeletes: inDatabase ? actor.storeDeletes().map(key) : [],
        ...(write.deadLetters || write.redriven.length > 0 ? { deadLetterDefaults: { ...defaults, version: randomInt(2 ** 40, 2 ** 47), now } } : {}),
      };
      const start = this.tracing ? performance.now() : 0;
      if (!(await this.queueState.writeTurn(queueId, stored, session))) throw new VersionConflict();
      if (this.tracing) sql = { start, end: performance.now() };
    } else if (!locked && (!activated || reader.read || offered)) {
      // Nothing to write: the answers hold if the queue is still the one they were computed from.
      // If it is not (another process changed it: a pop answered 423 for a lock acknowledged
      // there), the turn runs again on the row read here, with the front segment for a pop.
      const current = readsFront
        ? await this.queueState.recheckQueue(queueId, actor.version)
        : await this.queueState.loadQueue(queueId).then((queue) => queue && { queue });
      if ((current?.queue.version ?? null) !== actor.version) throw new VersionConflict(current ?? null);
    }
    return { core: actor, countBefore, write, results, dueMoved, lockExpired, sharedExpired, offloaded, loaded: reader.loaded, failedSaves, sql };
  }

  /** After the write committed: answers first, then the actor, the counters and the store's clean-up (still inside the turn). */
  private async committed(
    queueId: string,
    batch: Pending[],
    { core, countBefore, write, results, dueMoved, lockExpired, sharedExpired, offloaded, loaded, failedSaves }: Prepared,
  ): Promise<void> {
    const unused = this.store.inDatabase ? [] : [...core.storeDeletes(), ...failedSaves];
    core.committed(write);
    if (core.isPresent) this.registry.set(queueId, core);
    else this.registry.deactivate(queueId);
    results?.forEach((outcome, i) => batch[i].resolve(outcome));
    if (lockExpired !== undefined) {
      this.queueStats.lockExpirations += 1;
      this.queueStats.itemsRedelivered.expired += lockExpired;
      this.lockLogger.log(`Lock on queue ${queueId} expired; ${lockExpired} item(s) returned to the front`);
    }
    if (sharedExpired && sharedExpired.locks > 0) {
      this.queueStats.lockExpirations += sharedExpired.locks;
      this.queueStats.itemsRedelivered.expired += sharedExpired.returned;
      this.lockLogger.log(`${sharedExpired.locks} shared lock(s) on queue ${queueId} expired; ${sharedExpired.returned} item(s) given back`);
    }
    if (write) {
      // Items given back that wait out a retry delay (by expiry or release): delayed items with an origin.
      for (const d of write.delayedInserts) if (d.origin) this.queueStats.itemsRetryDelayed += 1;
    }
    if (dueMoved) {
      this.queueStats.delayedItemsDue += dueMoved;
      this.logger.debug(`${dueMoved} delayed item(s) of queue ${queueId} came due`);
    }
    this.stats.segmentsOffloaded += offloaded.length;
    this.stats.segmentsLoaded += loaded.length;
    for (const m of offloaded) this.logger.log(`Offloaded segment ${m.segment} for priority ${m.priority} to state store (actor ${queueId})`);
    for (const r of loaded) this.logger.log(`Loaded segment ${r.segment} for priority ${r.priority} from state store (actor ${queueId})`);
    if (write?.deadLetters) {
      // The dead-letter queue's row moved on: its actor here reloads at its next turn, which
      // moves the dead letters to its tails (so does the delay sweep, with no traffic).
      const target = write.deadLetters.queueId;
      this.queueStats.itemsDeadLettered += write.deadLetters.items.length;
      this.registry.deactivate(target);
      this.events.wake(target, write.deadLetters.items.length, 'local');
      this.notifications.announce(target);
      this.logger.log(`${write.deadLetters.items.length} item(s) of queue ${queueId} reached their delivery limit and went to queue ${target}`);
    }
    if (write && write.redriven.length > 0) {
      // The destinations' rows moved on: their actors here reload at their next turns, which move
      // the redriven items to their tails (so does the delay sweep, with no traffic).
      const counts = new Map<string, number>();
      for (const item of write.redriven) counts.set(item.queueId, (counts.get(item.queueId) ?? 0) + 1);
      this.queueStats.itemsRedriven += write.redriven.length;
      for (const [target, n] of counts) {
        this.registry.deactivate(target);
        this.events.wake(target, n, 'local');
        this.notifications.announce(target);
      }
      this.logger.log(`${write.redriven.length} item(s) of queue ${queueId} redriven to ${[...counts.keys()].join(', ')}`);
    }
    if (write && core.available > 0) {
      // Long polls of this process waiting on the queue take what the turn left (after pushes,
      // returned items, delayed items that came due, also in the delay sweep's turns, and a
      // resume); other processes' long polls wait only on a queue they found empty or paused,
      // so they hear of the transition from none to some (a resume of a queue holding items is
      // one).
      this.events.wake(queueId, core.available, 'local');
      if (countBefore === 0) {
        // With the state just committed, when memory holds all of it: a long poll of another
        // process woken by it can take the item without reading the queue first.
        const snapshot = core.snapshot();
        this.notifications.announce(queueId, snapshot && encodeQueueState(queueId, snapshot));
      }
    }
    // Inside the turn: a later turn of this queue must not save under a key before this delete ran.
    if (unused.length > 0 || this.leftovers.has(queueId)) await this.cleanUp(queueId, core, unused);
  }

  /**
   * Deletes copies in a store outside the database that nothing refers to (segments loaded
   * back, a deleted queue's segments, saves that failed after writing), and those earlier
   * turns of the queue could not delete. Never a segment the committed metadata refers to.
   */
  private async cleanUp(queueId: string, core: QueueCore, unused: SegmentId[]): Promise<void> {
    const pending = this.leftovers.get(queueId) ?? new Map<string, SegmentId>();
    this.leftovers.delete(queueId);
    this.leftoverCount -= pending.size;
    for (const s of unused) pending.set(offloadedSegmentKey(s.priority, s.segment, queueId), s);
    const keys = [...pending].filter(([, s]) => !core.isOffloadedSegment(s.priority, s.segment)).map(([k]) => k);
    if (keys.length === 0) return;
    let lastError: unknown;
    for (let attempt = 0; attempt < CLEAN_UP_ATTEMPTS; attempt++) {
      try {
        await this.store.delete(queueId, keys);
        return;
      } catch (error) {
        lastError = error;
      }
    }
    if (this.leftoverCount + keys.length > MAX_LEFTOVERS) {
      this.logger.warn(`Could not delete ${keys.length} unused segment(s) of queue ${queueId} from the offload store; left behind: ${message(lastError)}`);
      return;
    }
    this.logger.warn(
      `Could not delete ${keys.length} unused segment(s) of queue ${queueId} from the offload store; retried after its next turn: ${message(lastError)}`,
    );
    this.leftovers.set(queueId, new Map(keys.map((k) => [k, pending.get(k)!])));
    this.leftoverCount += keys.length;
  }

  /** Saves planned moves to a store outside the database; a priority stops at its first failure (the range stays contiguous). */
  private async offload(queueId: string, core: QueueCore, moves: readonly OffloadMove[], failedSaves: SegmentId[]): Promise<OffloadMove[]> {
    const done: OffloadMove[] = [];
    const failed = new Set<number>();
    for (const move of moves) {
      if (failed.has(move.priority)) continue;
      try {
        await this.store.save(queueId, offloadedSegmentKey(move.priority, move.segment, queueId), move.items, move.from, move.headers);
      } catch (error) {
        failed.add(move.priority);
        failedSaves.push(move);
        this.stats.offloadFailures += 1;
        this.logger.warn(`Failed to offload segment ${move.segment} for priority ${move.priority} (actor ${queueId}): ${message(error)}`);
        continue;
      }
      core.offloaded(move.priority, move.segment);
      done.push(move);
    }
    return done;
  }
}
