import { Injectable } from '@nestjs/common';
import type { DelayedItem } from '../queue/core/types.js';
import { UnitOfWork, type DbSession } from '../database/unit-of-work.js';

/**
 * A queue's due delayed items, oldest first, at most `$3 - 1` of them plus one more to tell
 * whether more are due; and the first item not due yet, for its due time. Both are ranges of
 * the primary key `(queue_id, due_at, seq)`.
 */
const LOAD_DUE = `
  (SELECT due_at, seq, priority, item, origin_segment, origin_position, deliveries, dead_lettered_from, headers FROM delayed_items
    WHERE queue_id = $1 AND due_at <= to_timestamp($2 / 1000.0) ORDER BY due_at, seq LIMIT $3)
  UNION ALL
  (SELECT due_at, seq, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM delayed_items
    WHERE queue_id = $1 AND due_at > to_timestamp($2 / 1000.0) ORDER BY due_at, seq LIMIT 1)`;

/** Queues whose earliest delayed item is due by `t` (an SQL timestamp): the partial index on `queues.next_due_at`. */
const QUEUES_WITH_DUE_ITEMS = (t: string): string => `FROM queues WHERE next_due_at <= ${t}`;

/** The sweep probe's question about delayed items (see SweepProbeRepository): one index probe when the answer is no. */
export const DELAY_QUESTIONS = {
  /** Whether any queue has a delayed item due at `t`: the queues {@link DelayedItemRepository.findDue} finds. */
  delaysDue: (t: string): string => `EXISTS (SELECT 1 ${QUEUES_WITH_DUE_ITEMS(t)})`,
};

/**
 * The SQL of delayed items: a queue's due items, read in its turn, and the delay sweep's and the
 * metric's statements over all queues. (Delayed items are written by the turn statement.)
 */
@Injectable()
export class DelayedItemRepository {
  constructor(private readonly uow: UnitOfWork) {}

  /**
   * A queue's delayed items due at `now`, in `(due_at, seq)` order, at most `limit`, and the due
   * time of the first delayed item after them (due or not; null when there is none).
   */
  async loadDueItems(
    queueId: string,
    now: number,
    limit: number,
    session: DbSession = this.uow.autocommit,
  ): Promise<{ items: DelayedItem[]; nextDueAt: number | null }> {
    const rows = await session.query<{
      due_at: Date;
      seq: string;
      priority: number | null;
      item: string | null;
      origin_segment: string | null;
      origin_position: number | null;
      deliveries: number | null;
      dead_lettered_from: string | null;
      headers: string | null;
    }>(LOAD_DUE, [queueId, now, limit + 1], 'pushpop_load_due');
    const due: DelayedItem[] = [];
    let later: number | null = null;
    for (const row of rows) {
      if (row.item === null) later = row.due_at.getTime();
      else {
        const item: DelayedItem = {
          dueAt: row.due_at.getTime(),
          seq: Number(row.seq),
          priority: row.priority!,
          json: row.item,
          ...(row.dead_lettered_from !== null ? { from: row.dead_lettered_from } : {}),
          ...(row.headers !== null ? { headers: row.headers } : {}),
        };
        // A given-back item waiting out its retry delay carries where it was pushed.
        due.push(
          row.origin_segment !== null && row.origin_position !== null
            ? { ...item, origin: { segment: Number(row.origin_segment), position: row.origin_position }, deliveries: row.deliveries ?? 0 }
            : item,
        );
      }
    }
    due.sort((a, b) => a.dueAt - b.dueAt || a.seq - b.seq);
    if (due.length > limit) return { items: due.slice(0, limit), nextDueAt: due[limit].dueAt };
    return { items: due, nextDueAt: later };
  }

  /** Delayed items over all queues (the queues that have any, through the partial index on `next_due_at`). */
  async countDelayed(): Promise<number> {
    const rows = await this.uow.autocommit.query<{ n: string | null }>(`SELECT sum(delayed_count) AS n FROM queues WHERE next_due_at IS NOT NULL`);
    return Number(rows[0]?.n ?? 0);
  }

  /**
   * Queues whose earliest delayed item is due by `now`, earliest first. Served by the partial
   * index on `queues.next_due_at`: the cost is proportional to the number of due queues, not
   * of queues or of delayed items; with nothing due it is one index probe.
   */
  async findDue(now: number, limit: number): Promise<string[]> {
    const rows = await this.uow.autocommit.query<{ queue_id: string }>(
      `SELECT queue_id ${QUEUES_WITH_DUE_ITEMS('to_timestamp($1 / 1000.0)')} ORDER BY next_due_at LIMIT $2`,
      [now, limit],
      'pushpop_find_due_queues',
    );
    return rows.map((r) => r.queue_id);
  }
}
