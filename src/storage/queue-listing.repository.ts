import { Injectable } from '@nestjs/common';
import type { QueueListRow } from '../database/stored-queue.js';
import { UnitOfWork } from '../database/unit-of-work.js';

/**
 * The least string greater than every string that starts with `prefix`, in the byte order of the
 * `C` collation of queue ids (the last character's code plus one; queue ids are ASCII).
 */
export function prefixEnd(prefix: string): string {
  return prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
}

/**
 * Reads over many queues at once, outside their turns: the listing of `GET /queues`, and which
 * of a set of queues hold something to pop (for the long-poll wake-ups), and the ready set of fair pops.
 */
@Injectable()
export class QueueListingRepository {
  constructor(private readonly uow: UnitOfWork) {}

  /** Queues in id order after `cursor`, whose id starts with `prefix`. Uses the primary key index. */
  async listQueues(prefix: string, after: string | undefined, limit: number): Promise<QueueListRow[]> {
    const params: unknown[] = [];
    const where: string[] = [];
    if (prefix !== '') {
      params.push(prefix.replace(/[\\%_]/g, (c) => `\\${c}`) + '%');
      where.push(`queue_id LIKE $${params.length}`);
    }
    if (after !== undefined) {
      params.push(after);
      where.push(`queue_id > $${params.length}`);
    }
    params.push(limit);
    const rows = await this.uow.autocommit.query<{ queue_id: string; item_count: string; lock_expires_at: Date | null; live_locks: number; paused: boolean }>(
      `SELECT q.queue_id, q.item_count, l.expires_at AS lock_expires_at, q.live_locks, q.paused
         FROM (SELECT queue_id, item_count, live_locks, paused FROM queues ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY queue_id LIMIT $${params.length}) q
         LEFT JOIN queue_locks l ON l.queue_id = q.queue_id AND l.state = 'active'
        ORDER BY q.queue_id`,
      params,
    );
    return rows.map((r) => ({
      queueId: r.queue_id,
      count: Number(r.item_count),
      lockExpiresAt: r.lock_expires_at ? r.lock_expires_at.getTime() : null,
      liveLocks: r.live_locks,
      paused: r.paused,
    }));
  }

  /**
   * Those of `queueIds` that hold items a pop could take (not counting items under a lock, and
   * not paused), with their counts: one statement, one primary-key probe per id, whatever the
   * number of ids.
   */
  async queuesWithItems(queueIds: readonly string[]): Promise<{ queueId: string; count: number }[]> {
    const rows = await this.uow.autocommit.query<{ queue_id: string; item_count: string }>(
      `SELECT queue_id, item_count FROM queues WHERE queue_id = ANY($1::varchar[]) AND item_count > 0 AND NOT paused`,
      [queueIds],
      'pushpop_queues_with_items',
    );
    return rows.map((r) => ({ queueId: r.queue_id, count: Number(r.item_count) }));
  }

  /**
   * Those of `queueIds` a pop would find something on at `now`: items, a lock (active: the pop
   * is refused; expired: its items come back), delayed items that are due, or a pause (the pop
   * answers `paused`). One statement,
   * one primary-key probe per id; a queue that does not exist is not among them.
   */
  async queuesToPopFrom(queueIds: readonly string[], now: number): Promise<string[]> {
    const rows = await this.uow.autocommit.query<{ queue_id: string }>(
      `SELECT q.queue_id FROM queues q
        WHERE q.queue_id = ANY($1::varchar[])
          AND (q.item_count <> 0 OR q.paused OR q.next_due_at <= to_timestamp($2 / 1000.0) OR q.next_lock_expiry <= to_timestamp($2 / 1000.0)
               OR EXISTS (SELECT 1 FROM queue_locks l WHERE l.queue_id = q.queue_id))`,
      [queueIds, now],
      'pushpop_queues_to_pop_from',
    );
    return rows.map((r) => r.queue_id);
  }

  /**
   * Up to `limit` ids of ready queues (items to hand out, not paused: `queues.ready`) whose id
   * starts with `prefix`, in id order after `after` and then, wrapping around, from the first
   * one up to `after` included: the next candidates of a fair pop. Two range scans of the partial
   * index `IDX_queues_ready`, the second read only when the first finds fewer than `limit`: the
   * cost is that of the rows returned, whatever the number of queues under the prefix that
   * hold nothing (they are not in the index).
   */
  async readyQueues(prefix: string, after: string | null, limit: number): Promise<string[]> {
    const rows = await this.uow.autocommit.query<{ queue_id: string }>(
      `SELECT queue_id FROM (
         (SELECT queue_id, 0 AS part FROM queues WHERE ready AND queue_id >= $1 AND queue_id < $2 AND queue_id > $3 ORDER BY queue_id LIMIT $4)
         UNION ALL
         (SELECT queue_id, 1 AS part FROM queues WHERE ready AND queue_id >= $1 AND queue_id < $2 AND queue_id <= $3 ORDER BY queue_id LIMIT $4)
       ) candidates ORDER BY part, queue_id LIMIT $4`,
      [prefix, prefixEnd(prefix), after ?? '', limit],
      'pushpop_ready_queues',
    );
    return rows.map((r) => r.queue_id);
  }

  /**
   * Items waiting in all queues (their `count`s summed): one pass over the queues table, so it is
   * read for /metrics at most every 10 s, never on an operation's path.
   */
  async countQueuedItems(): Promise<number> {
    const rows = await this.uow.autocommit.query<{ n: string }>(`SELECT coalesce(sum(item_count), 0) AS n FROM queues`, [], 'pushpop_count_queued_items');
    return Number(rows[0]?.n ?? 0);
  }

  /** Paused queues, through the partial index on `queues.paused`: proportional to the paused queues, not to all queues. */
  async countPaused(): Promise<number> {
    const rows = await this.uow.autocommit.query<{ n: string }>(`SELECT count(*) AS n FROM queues WHERE paused`, [], 'pushpop_count_paused');
    return Number(rows[0]?.n ?? 0);
  }
}
