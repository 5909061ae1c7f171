import { Injectable } from '@nestjs/common';
import { ENQUEUE_GATE } from '../database/functions/enqueue.function.js';
import { UnitOfWork, type DbSession } from '../database/unit-of-work.js';

/** A committed row of `enqueued_items`, as the carrier takes it. */
export interface EnqueuedRow {
  /** The adding transaction (`xid8` as text) and the call's sequence number: the row's key. */
  readonly xid: string;
  readonly seq: string;
  readonly queueId: string;
  /** The item's JSON text, as `jsonb` prints it. */
  readonly item: string;
  readonly priority: number;
  /** Milliseconds until the item is due, by the database's clock (0: due). */
  readonly delayMs: number;
  readonly dedupId: string | null;
  /** The headers' JSON text, or null. */
  readonly headers: string | null;
}

/** The question the carrier's idle probe puts with the sweeps' (see `SweepProbeRepository`): committed rows wait to be carried. */
export const ENQUEUE_QUESTIONS = {
  enqueuedCommitted: (): string => `EXISTS (SELECT 1 FROM enqueue_commits)`,
};

interface Row {
  xid: string;
  seq: string;
  queue_id: string;
  item: string;
  priority: number;
  delay_ms: number;
  dedup_id: string | null;
  headers: string | null;
}

/**
 * The SQL of the inbox that `pushpop_enqueue` fills (migration 1764100000016): the carrier's
 * probe, its batch in commit order under the carrier lock of the schema, the deletion of what
 * it carried, the limits the function checks, and the figures of the metrics.
 */
@Injectable()
export class EnqueueInboxRepository {
  constructor(private readonly uow: UnitOfWork) {}

  /** Whether any committed transaction has rows to carry (one probe of a small index). */
  async anyCommitted(): Promise<boolean> {
    const rows = await this.uow.autocommit.query<{ any: boolean }>(`SELECT ${ENQUEUE_QUESTIONS.enqueuedCommitted()} AS any`, [], 'enqueue_probe');
    return rows[0].any;
  }

  /**
   * Whether a carrier may stop: `committing` while a transaction that enqueued is between its
   * commit trigger and being visible (it holds the gate shared: nothing waited for), else
   * `rows` or `idle` by what a look taken after that answer finds.
   */
  async settled(): Promise<'rows' | 'committing' | 'idle'> {
    return this.uow.transaction(async (session) => {
      const [{ gate }] = await session.query<{ gate: boolean }>(`SELECT pg_try_advisory_xact_lock(${ENQUEUE_GATE}) AS gate`);
      if (!gate) return 'committing';
      // A statement of its own: its snapshot is taken after the lock, when every commit that held it is visible.
      const [{ any }] = await session.query<{ any: boolean }>(`SELECT ${ENQUEUE_QUESTIONS.enqueuedCommitted()} AS any`);
      return any ? 'rows' : 'idle';
    });
  }

  /**
   * Runs `fn` in a transaction holding the schema's carrier lock (a transaction-scoped advisory
   * lock: released by the commit, the rollback, or the end of the connection when its process
   * dies); undefined without running it when another transaction holds the lock.
   */
  async underCarrierLock<T>(fn: (session: DbSession) => Promise<T>): Promise<T | undefined> {
    return this.uow.transaction(async (session) => {
      const [{ locked }] = await session.query<{ locked: boolean }>(
        `SELECT pg_try_advisory_xact_lock(hashtext('pushpop_enqueue_carrier'), hashtext(current_schema())) AS locked`,
      );
      return locked ? fn(session) : undefined;
    });
  }

  /** Up to `limit` rows of committed transactions, in commit order, and in call order within a transaction. */
  async next(session: DbSession, limit: number): Promise<EnqueuedRow[]> {
    const rows = await session.query<Row>(
      `SELECT i.xid::text AS xid, i.seq::text AS seq, i.queue_id, i.item::text AS item, i.priority, i.dedup_id, i.headers::text AS headers,
              CASE WHEN i.deliver_at IS NULL THEN 0
                   ELSE greatest(0, ceil(extract(epoch FROM i.deliver_at - clock_timestamp()) * 1000))::float8 END AS delay_ms
         FROM (SELECT xid, commit_seq FROM enqueue_commits ORDER BY commit_seq LIMIT $1) c
         JOIN enqueued_items i ON i.xid = c.xid
        ORDER BY c.commit_seq, i.seq
        LIMIT $1`,
      [limit],
    );
    return rows.map((r) => ({
      xid: r.xid,
      seq: r.seq,
      queueId: r.queue_id,
      item: r.item,
      priority: r.priority,
      delayMs: r.delay_ms,
      dedupId: r.dedup_id,
      headers: r.headers,
    }));
  }

  /** Deletes carried rows, and the commits of transactions that have none left. */
  async remove(session: DbSession, rows: readonly Pick<EnqueuedRow, 'xid' | 'seq'>[]): Promise<void> {
    if (rows.length === 0) return;
    const xids = rows.map((r) => r.xid);
    await session.query(`DELETE FROM enqueued_items i USING unnest($1::xid8[], $2::bigint[]) AS d(xid, seq) WHERE i.xid = d.xid AND i.seq = d.seq`, [
      xids,
      rows.map((r) => r.seq),
    ]);
    await session.query(`DELETE FROM enqueue_commits c WHERE c.xid = ANY($1::xid8[]) AND NOT EXISTS (SELECT 1 FROM enqueued_items i WHERE i.xid = c.xid)`, [
      [...new Set(xids)],
    ]);
  }

  /** Makes the function check this service's limits (a write only when they changed). */
  async setLimits(maxItemBytes: number, maxPriority: number): Promise<void> {
    await this.uow.autocommit.query(
      `UPDATE enqueue_limits SET max_item_bytes = $1, max_priority = $2 WHERE (max_item_bytes, max_priority) IS DISTINCT FROM ($1, $2)`,
      [maxItemBytes, maxPriority],
    );
  }

  /** Rows not carried yet (committed ones: those of open transactions are not seen). */
  async waiting(): Promise<number> {
    const [{ n }] = await this.uow.autocommit.query<{ n: string }>(`SELECT count(*) AS n FROM enqueued_items i JOIN enqueue_commits c ON c.xid = i.xid`);
    return Number(n);
  }

  /** Seconds since the oldest transaction whose rows wait committed (0: none waits). */
  async oldestAgeSeconds(): Promise<number> {
    const [{ age }] = await this.uow.autocommit.query<{ age: number | null }>(
      `SELECT extract(epoch FROM clock_timestamp() - min(committed_at))::float8 AS age FROM enqueue_commits`,
    );
    return age ?? 0;
  }
}
