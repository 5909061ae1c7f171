import { Injectable } from '@nestjs/common';
import { UnitOfWork } from '../database/unit-of-work.js';

/** The delay sweep's SQL (delayed items themselves are read and written with their queue, in its turn). */
@Injectable()
export class DelayRepository {
  constructor(private readonly uow: UnitOfWork) {}

  /**
   * Queues whose earliest delayed item is due by `now`, earliest first. Served by the partial
   * index on `queues.next_due_at`: the cost is proportional to the number of due queues, not
   * of queues or of delayed items; with nothing due it is one index probe.
   */
  async findDue(now: number, limit: number): Promise<string[]> {
    const rows = await this.uow.autocommit.query<{ queue_id: string }>(
      `SELECT queue_id FROM queues WHERE next_due_at <= to_timestamp($1 / 1000.0) ORDER BY next_due_at LIMIT $2`,
      [now, limit],
      'pushpop_find_due_queues',
    );
    return rows.map((r) => r.queue_id);
  }
}
