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
    const rows = await this.uow.autocommit.query<{ queue_id: string }>(
      `SELECT queue_id FROM queue_locks WHERE state = 'active' AND expires_at <= to_timestamp($1 / 1000.0) ORDER BY expires_at LIMIT $2`,
      [now, limit],
    );
    return rows.map((r) => r.queue_id);
  }
}
