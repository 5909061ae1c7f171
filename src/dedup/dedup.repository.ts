import { Injectable } from '@nestjs/common';
import { UnitOfWork } from '../database/unit-of-work.js';

/** The dedup sweep's SQL (live ids are read and written with their queue, in its turn). */
@Injectable()
export class DedupRepository {
  constructor(private readonly uow: UnitOfWork) {}

  /**
   * Deletes up to `limit` dedup ids that expired by `now`, oldest first, through the index on
   * `expires_at`; returns how many. An id a turn renewed meanwhile (a new push accepted it
   * again) is left alone: its row is re-checked after the wait for the turn's row lock.
   */
  async deleteExpired(now: number, limit: number): Promise<number> {
    const rows = await this.uow.autocommit.query<{ n: string }>(
      `WITH expired AS (
         SELECT queue_id, dedup_id FROM dedup_ids WHERE expires_at <= to_timestamp($1 / 1000.0) ORDER BY expires_at LIMIT $2
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
