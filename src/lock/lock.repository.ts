import { Injectable } from '@nestjs/common';
import { UnitOfWork } from '../database/unit-of-work.js';

/** The sweep's SQL (locks themselves are read and written with their queue, in its turn). */
@Injectable()
export class LockRepository {
  constructor(private readonly uow: UnitOfWork) {}

  /**
   * Queues whose active lock expired by `now`, oldest first. Served by the partial index on
   * `expires_at`: the cost is proportional to the number of due locks, not of queues.
   */
  async findDue(now: number, limit: number): Promise<string[]> {
    // Exclusive locks by their own index; queues with shared locks by the lower bound of their earliest expiry.
    const rows = await this.uow.autocommit.query<{ queue_id: string }>(
      `(SELECT queue_id FROM queue_locks WHERE state = 'active' AND expires_at <= to_timestamp($1 / 1000.0) ORDER BY expires_at LIMIT $2)
       UNION
       (SELECT queue_id FROM queues WHERE next_lock_expiry <= to_timestamp($1 / 1000.0) ORDER BY next_lock_expiry LIMIT $2)`,
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
           SELECT queue_id, lock_id FROM shared_locks WHERE state = 'expired' AND expires_at < to_timestamp($1 / 1000.0) LIMIT $2)
         RETURNING 1)
       SELECT count(*) AS n FROM gone`,
      [before, limit],
    );
    return Number(rows[0]?.n ?? 0);
  }
}
