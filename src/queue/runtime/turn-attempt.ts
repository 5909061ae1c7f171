import { randomInt } from 'node:crypto';
import { Injectable, Logger } from '@nestjs/common';
import { AppConfig } from '../../config/app-config.js';
import { Clock } from '../../common/clock.js';
import { isTransientConflict } from '../../common/store-errors.js';
import { UnitOfWork, type DbSession } from '../../database/unit-of-work.js';
import { offloadedSegmentKey } from '../../offload/offload-store.js';
import type { LoadedQueue, StoredTurnWrite } from '../../database/stored-queue.js';
import { QueueStateRepository } from '../../storage/queue-state.repository.js';
import { QueueCore, type SharedExpiryOutcome } from '../core/queue-core.js';
import { drive, ReadsOutOfStep } from '../core/core-driver.js';
import { applyOp } from '../core/queue-ops.js';
import type { OffloadMove, OrNeed, SegmentFetch, SegmentRef, TurnWrite } from '../core/types.js';
import { ActorRegistry } from './actor-registry.js';
import { OffloadCarriage, type SegmentId } from './offload-carriage.js';
import { QueueLoads } from './queue-loads.js';
import type { InTurnCommit, Pending } from './turn-lines.js';
import { StoreReadNeeded, TurnReads } from './turn-reads.js';

/** A turn's attempt that reached its write (or found nothing to write), for what happens after the commit. */
export interface Prepared {
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
  /** When the write statement ran (`performance.now()`), for a trace of the turn. */
  sql?: { start: number; end: number };
}

/** How the attempts at a turn ended: committed (or nothing to commit), or failed for good; with the attempts made. */
export type Attempted =
  { readonly ok: true; readonly prepared: Prepared; readonly attempts: number } | { readonly ok: false; readonly error: unknown; readonly attempts: number };

/** The queue row changed under an optimistic turn: run it again on the current row (carried when known; null: no row). */
class VersionConflict extends Error {
  constructor(readonly current?: LoadedQueue | null) {
    super('the queue changed');
  }
}

/** Runs statements in a turn's commit one after the other, on its transaction. */
async function runAll(statements: readonly InTurnCommit[], tx: DbSession): Promise<void> {
  for (const run of statements) await run(tx);
}

/** Optimistic attempts before a turn takes the row lock. */
const OPTIMISTIC_ATTEMPTS = 2;
const MAX_ATTEMPTS = 8;

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * The attempts at one turn: load (or keep) the queue's core, drive it through the turn's steps
 * and operations, build the write and run it; again on a lost race.
 *
 * **The write**: the core decides everything in memory; then the turn's changes are written in
 * **one statement** (`pushpop_write_turn`), applied only if the queue's row still has the
 * version the core was computed from. A failed write fails the turn's operations together, and
 * the actor is dropped so the next turn reloads it.
 *
 * **Expired locks** give their items back at the start of every turn, after due delayed items
 * and before the operations, in the same write (seed 004): no operation ever sees an expired
 * lock as active. An expired lock is kept as `expired`, so its id answers 410.
 *
 * **Across processes** a queue stays one actor: if another process changed the queue, the
 * version check fails, nothing is written, and the turn runs again on a reloaded core; after
 * {@link OPTIMISTIC_ATTEMPTS} it runs in a transaction holding the queue's row lock, so it
 * cannot lose again. A turn that writes nothing checks the version instead (unless it read
 * nothing but the row it just loaded). Under the row lock, segments to load from the offload
 * store are read outside the transaction ({@link StoreReadNeeded}: rolled back, read, redone).
 *
 * **Delayed items** due at the turn's `now` are moved to their priorities first, before
 * expired locks and the operations: the core asks for them only when the queue row's earliest
 * due time has passed (one read), and the move is part of the turn's write.
 *
 * **Dedup ids** of all the turn's pushes are read with one query before the first operation
 * runs, on the attempt's own session and never from an earlier attempt: a turn that lost the
 * version check to another process's push of the same id reads that id again and answers
 * `duplicate`. The accepted ids are written by the turn's statement.
 *
 * **Lock ids** of all the turn's acknowledgements, extensions and releases are read likewise (in
 * shared lock mode): a turn of many of them reads their locks with one query.
 *
 * **Statements in the turn's commit** (`Pending.inCommit`, see `InTurnCommit`) run once the
 * operations ran, in the transaction of the turn's write: the attempt's own under the row lock,
 * else one that holds only the write and them (everything before it runs as in any optimistic
 * attempt, on the pool). A write that loses the version check commits nothing of them; the next
 * attempt runs them again. A turn that writes nothing runs them in a transaction of their own
 * once its version check passed.
 */
@Injectable()
export class TurnAttempt {
  private readonly logger = new Logger('TurnRunner');

  constructor(
    private readonly config: AppConfig,
    private readonly registry: ActorRegistry,
    private readonly queueState: QueueStateRepository,
    private readonly uow: UnitOfWork,
    private readonly clock: Clock,
    private readonly loads: QueueLoads,
    private readonly reads: TurnReads,
    private readonly carriage: OffloadCarriage,
  ) {}

  /**
   * Attempts the turn until it commits, or fails for good.
   * @param runOps - run the operations even when more delayed items are due than one turn moves
   * @param prefetched - offloaded segments read outside a transaction, kept over the attempts
   */
  async run(queueId: string, batch: readonly Pending[], runOps: boolean, prefetched: Map<string, SegmentFetch>): Promise<Attempted> {
    let current: LoadedQueue | null | undefined;
    for (let attempt = 0; ; attempt++) {
      const locked = attempt >= OPTIMISTIC_ATTEMPTS;
      const known = current;
      current = undefined;
      try {
        const prepared = locked
          ? await this.uow.transaction((session) => this.attempt(queueId, batch, session, prefetched, undefined, runOps))
          : await this.attempt(queueId, batch, undefined, prefetched, known, runOps);
        return { ok: true, prepared, attempts: attempt + 1 };
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
        return { ok: false, error, attempts: attempt + 1 };
      }
    }
  }

  /**
   * One attempt at the turn: everything up to and including the write (see the class doc).
   * @param transaction - the transaction holding the queue's row lock, or undefined (optimistic, on the pool)
   */
  private async attempt(
    queueId: string,
    batch: readonly Pending[],
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
    const reader = this.reads.forAttempt(queueId, actor, session, transaction, prefetched, now);
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
      if (batch.some((p) => p.op.lockIds)) {
        // The locks the turn's acknowledgements and releases name: their rows with one read.
        const lockIds = batch.flatMap((p) => p.op.lockIds ?? []);
        await run(() => actor.checkLockIds(lockIds));
      }
      for (const pending of batch) {
        const outcome = run(() => applyOp(actor, pending.op, now));
        results.push(outcome instanceof Promise ? await outcome : outcome);
      }
    }
    const loaded = run(() => actor.offload.loadBack());
    if (loaded instanceof Promise) await loaded;
    let moves = run(() => actor.offload.plan());
    if (moves instanceof Promise) moves = await moves;
    const inDatabase = this.carriage.inDatabase;
    let carried = this.carriage.carry(queueId, actor, moves, locked);
    if (carried instanceof Promise) carried = await carried;
    const { offloaded, failedSaves } = carried;

    const write = actor.pendingWrite(() => randomInt(2 ** 40, 2 ** 47));
    // Not in a turn a backlog of due delayed items took for itself: its operations did not run.
    const inCommit = results ? batch.flatMap((p) => (p.inCommit ? [p.inCommit] : [])) : [];
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
      const start = performance.now();
      if (!(await this.commitWrite(queueId, stored, transaction, inCommit))) throw new VersionConflict();
      sql = { start, end: performance.now() };
    } else if (!locked && (!activated || reader.read || offered)) {
      // Nothing to write: the answers hold if the queue is still the one they were computed from.
      // If it is not (another process changed it: a pop answered 423 for a lock acknowledged
      // there), the turn runs again on the row read here, with the front segment for a pop.
      const current = readsFront
        ? await this.queueState.recheckQueue(queueId, actor.version)
        : await this.queueState.loadQueue(queueId).then((queue) => queue && { queue });
      if ((current?.queue.version ?? null) !== actor.version) throw new VersionConflict(current ?? null);
    }
    if (!write && inCommit.length > 0) await this.inTransaction(transaction, (tx) => runAll(inCommit, tx));
    return { core: actor, countBefore, write, results, dueMoved, lockExpired, sharedExpired, offloaded, loaded: reader.loaded, failedSaves, sql };
  }

  /** The turn's write, with the statements in its commit (see the class doc): whether it applied. */
  private async commitWrite(queueId: string, stored: StoredTurnWrite, transaction: DbSession | undefined, inCommit: readonly InTurnCommit[]): Promise<boolean> {
    if (inCommit.length === 0) return this.queueState.writeTurn(queueId, stored, transaction ?? this.uow.autocommit);
    return this.inTransaction(transaction, async (tx) => {
      if (!(await this.queueState.writeTurn(queueId, stored, tx))) throw new VersionConflict();
      await runAll(inCommit, tx);
      return true;
    });
  }

  /** Runs `fn` in the attempt's transaction, or in one of its own. */
  private inTransaction<T>(transaction: DbSession | undefined, fn: (tx: DbSession) => Promise<T>): Promise<T> {
    return transaction ? fn(transaction) : this.uow.transaction(fn);
  }
}
