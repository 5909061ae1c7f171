import { Injectable } from '@nestjs/common';
import type { LockState, ReturnedEntry } from '../queue/core/types.js';
import { UnitOfWork, type DbSession } from '../database/unit-of-work.js';
import { toLockState, type RawLockRow } from './stored-rows.js';

const SHARED_LOCK_COLUMNS = 'lock_id, state, priorities, items, segments, positions, deliveries, dead_lettered_from, headers, created_at, expires_at';

/** Active exclusive locks expired by `t` (an SQL timestamp): the partial index on `queue_locks.expires_at`. */
const EXCLUSIVE_LOCKS_DUE = (t: string): string => `FROM queue_locks WHERE state = 'active' AND expires_at <= ${t}`;
/** Queues with shared locks whose earliest expiry (a lower bound) has passed by `t`: the partial index on `queues.next_lock_expiry`. */
const SHARED_LOCKS_DUE = (t: string): string => `FROM queues WHERE next_lock_expiry <= ${t}`;
/** Expired shared locks whose expiry is older than `t`: the partial index on expired locks' `expires_at`. */
const EXPIRED_SHARED_LOCKS = (t: string): string => `FROM shared_locks WHERE state = 'expired' AND expires_at < ${t}`;

/** The sweep probe's questions about locks (see SweepProbeRepository): one index probe each when the answer is no. */
export const LOCK_QUESTIONS = {
  /** Whether any lock is due at `t`: the rows {@link LockRepository.findDue} finds. */
  locksDue: (t: string): string => `EXISTS (SELECT 1 ${EXCLUSIVE_LOCKS_DUE(t)}) OR EXISTS (SELECT 1 ${SHARED_LOCKS_DUE(t)})`,
  /** Whether any expired shared lock expired before `t`: what {@link LockRepository.forgetExpired} deletes. */
  locksToForget: (t: string): string => `EXISTS (SELECT 1 ${EXPIRED_SHARED_LOCKS(t)})`,
};

/**
 * The SQL of locks: shared locks and the items they gave back, read in a queue's turn, and the
 * lock sweep's statements over all queues. (A queue's exclusive lock is read with its row, by
 * the {@link QueueStateRepository}, and every lock is written by the turn statement.)
 */
@Injectable()
export class LockRepository {
  constructor(private readonly uow: UnitOfWork) {}

  /** The named shared locks of a queue that exist (live or expired), by id. */
  async loadSharedLocks(queueId: string, ids: readonly string[], session: DbSession = this.uow.autocommit): Promise<Map<string, LockState>> {
    const rows = await session.query<RawLockRow>(
      `SELECT ${SHARED_LOCK_COLUMNS} FROM shared_locks WHERE queue_id = $1 AND lock_id = ANY($2::varchar[])`,
      [queueId, ids],
      'pushpop_load_shared_locks',
    );
    return new Map(rows.map((row) => [row.lock_id, toLockState(row)]));
  }

  /**
   * A queue's live shared locks expired at `now`, earliest first, at most `limit`, and the
   * expiry of the first live lock after them (null: none). Both are ranges of the partial
   * index on `(queue_id, expires_at)`.
   */
  async loadDueSharedLocks(
    queueId: string,
    now: number,
    limit: number,
    session: DbSession = this.uow.autocommit,
  ): Promise<{ locks: LockState[]; nextExpiry: number | null }> {
    const rows = await session.query<RawLockRow>(
      `SELECT ${SHARED_LOCK_COLUMNS} FROM shared_locks
        WHERE queue_id = $1 AND state = 'active' AND expires_at <= to_timestamp($2 / 1000.0) ORDER BY expires_at LIMIT $3`,
      [queueId, now, limit],
      'pushpop_load_due_shared_locks',
    );
    const next = rows.length < limit ? await this.nextSharedLockExpiry(queueId, session, now) : null;
    return { locks: rows.map(toLockState), nextExpiry: next };
  }

  /** Expiry of a queue's earliest live shared lock (after `after`, if given; not one of `exclude`); null when there is none. */
  async nextSharedLockExpiry(
    queueId: string,
    session: DbSession = this.uow.autocommit,
    after = -Infinity,
    exclude: readonly string[] = [],
  ): Promise<number | null> {
    // -Infinity: every live lock (`'-infinity'` is a timestamptz PostgreSQL knows).
    const rows = await session.query<{ expires_at: Date }>(
      `SELECT expires_at FROM shared_locks
        WHERE queue_id = $1 AND state = 'active' AND expires_at > coalesce(to_timestamp($2 / 1000.0), '-infinity') AND lock_id <> ALL($3::varchar[])
        ORDER BY expires_at LIMIT 1`,
      [queueId, Number.isFinite(after) ? after : null, exclude],
      'pushpop_next_shared_lock_expiry',
    );
    return rows[0] ? rows[0].expires_at.getTime() : null;
  }

  /** The first `limit` given-back items of a queue's priority, in push order (one range of the primary key). */
  async loadReturned(queueId: string, priority: number, limit: number, session: DbSession = this.uow.autocommit): Promise<ReturnedEntry[]> {
    const rows = await session.query<{
      segment: string;
      position: number;
      item: string;
      deliveries: number;
      dead_lettered_from: string | null;
      headers: string | null;
    }>(
      `SELECT segment, position, item, deliveries, dead_lettered_from, headers FROM returned_items WHERE queue_id = $1 AND priority = $2 ORDER BY segment, position LIMIT $3`,
      [queueId, priority, limit],
      'pushpop_load_returned',
    );
    return rows.map((r) => ({
      segment: Number(r.segment),
      position: r.position,
      json: r.item,
      deliveries: r.deliveries,
      ...(r.dead_lettered_from !== null ? { from: r.dead_lettered_from } : {}),
      ...(r.headers !== null ? { headers: r.headers } : {}),
    }));
  }

  /** Live locks over all queues (the metric), exclusive and shared (through the partial indexes on their expiries). */
  async countLiveLocks(): Promise<number> {
    const rows = await this.uow.autocommit.query<{ n: string | null }>(
      `SELECT (SELECT count(*) FROM queue_locks WHERE state = 'active') + (SELECT coalesce(sum(live_locks), 0) FROM queues WHERE next_lock_expiry IS NOT NULL) AS n`,
    );
    return Number(rows[0]?.n ?? 0);
  }

  /**
   * Queues whose active lock expired by `now`, oldest first. Served by the partial index on
   * `expires_at`: the cost is proportional to the number of due locks, not of queues.
   */
  async findDue(now: number, limit: number): Promise<string[]> {
    // Exclusive locks by their own index; queues with shared locks by the lower bound of their earliest expiry.
    const rows = await this.uow.autocommit.query<{ queue_id: string }>(
      `(SELECT queue_id ${EXCLUSIVE_LOCKS_DUE('to_timestamp($1 / 1000.0)')} ORDER BY expires_at LIMIT $2)
       UNION
       (SELECT queue_id ${SHARED_LOCKS_DUE('to_timestamp($1 / 1000.0)')} ORDER BY next_lock_expiry LIMIT $2)`,
      [now, limit],
    );
    return rows.map((r) => r.queue_id);
  }

  /**
   * Forgets expired shared locks (their ids answer 404 from then on) whose expiry is older than
   * `before`, at most `limit`; returns how many. Only 410 answers read these rows, so no turn is
   * needed. Served by the partial index on expired locks' `expires_at`.
   */
  async forgetExpired(before: number, limit: number): Promise<number> {
    const rows = await this.uow.autocommit.query<{ n: string }>(
      `WITH gone AS (
         DELETE FROM shared_locks WHERE (queue_id, lock_id) IN (
           SELECT queue_id, lock_id ${EXPIRED_SHARED_LOCKS('to_timestamp($1 / 1000.0)')} LIMIT $2)
         RETURNING 1)
       SELECT count(*) AS n FROM gone`,
      [before, limit],
    );
    return Number(rows[0]?.n ?? 0);
  }
}
