import { Injectable } from '@nestjs/common';
import { UnitOfWork, type DbSession } from '../database/unit-of-work.js';

/** Dedup ids expired by `t` (an SQL timestamp): the index on `dedup_ids.expires_at`. */
const EXPIRED_DEDUP_IDS = (t: string): string => `FROM dedup_ids WHERE expires_at <= ${t}`;

/** The sweep probe's question about dedup ids (see SweepProbeRepository): one probe of the index on `expires_at` when the answer is no. */
export const DEDUP_QUESTIONS = {
  /** Whether any dedup id has expired by `t` (an SQL timestamp): what {@link DedupIdRepository.deleteExpired} deletes. */
  dedupIdsExpired: (t: string): string => `EXISTS (SELECT 1 ${EXPIRED_DEDUP_IDS(t)})`,
};

/**
 * The SQL of dedup ids: the live ones among a push's ids, read in its turn, and the dedup
 * sweep's deletion of expired ones. (Ids are written by the turn statement.)
 */
@Injectable()
export class DedupIdRepository {
  constructor(private readonly uow: UnitOfWork) {}

  /** Which of `ids` were accepted on the queue and have not expired at `now`. */
  async liveDedupIds(queueId: string, ids: readonly string[], now: number, session: DbSession = this.uow.autocommit): Promise<Set<string>> {
    const rows = await session.query<{ dedup_id: string }>(
      `SELECT dedup_id FROM dedup_ids WHERE queue_id = $1 AND dedup_id = ANY($2::varchar[]) AND expires_at > to_timestamp($3 / 1000.0)`,
      [queueId, ids, now],
      'pushpop_live_dedup_ids',
    );
    return new Set(rows.map((r) => r.dedup_id));
  }

  /**
   * Deletes up to `limit` dedup ids that expired by `now`, oldest first, through the index on
   * `expires_at`; returns how many. An id a turn renewed meanwhile (a new push accepted it
   * again) is left alone: its row is re-checked after the wait for the turn's row lock.
   */
  async deleteExpired(now: number, limit: number): Promise<number> {
    const rows = await this.uow.autocommit.query<{ n: string }>(
      `WITH expired AS (
         SELECT queue_id, dedup_id ${EXPIRED_DEDUP_IDS('to_timestamp($1 / 1000.0)')} ORDER BY expires_at LIMIT $2
       ), deleted AS (
         DELETE FROM dedup_ids d USING expired e
          WHERE d.queue_id = e.queue_id AND d.dedup_id = e.dedup_id AND d.expires_at <= to_timestamp($1 / 1000.0)
         RETURNING 1
       )
       SELECT count(*) AS n FROM deleted`,
      [now, limit],
      'pushpop_delete_expired_dedup_ids',
    );
    return Number(rows[0]?.n ?? 0);
  }
}
