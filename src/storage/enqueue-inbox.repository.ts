import { Injectable } from '@nestjs/common';
import { createFunctionStatement } from '../database/functions/database-function.js';
import { enqueueLimitFunctions } from '../database/functions/enqueue-limits.function.js';
import { ENQUEUE_GATE } from '../database/functions/enqueue.function.js';
import { UnitOfWork, type DbSession, type InTurnCommit } from '../database/unit-of-work.js';

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

/**
 * A carriage's share of the inbox: its rows, and every transaction it looked at (those whose
 * rows are all gone included), whose `enqueue_commits` row goes once none of its rows is left.
 */
export interface CarriageRows {
  readonly rows: EnqueuedRow[];
  readonly xids: string[];
}

/** Rows a push claimed were no longer in the inbox when its turn deleted them: carried already, by another carriage. */
export class InboxRowsGone extends Error {
  constructor(claimed: number, found: number) {
    super(`${claimed - found} of ${claimed} SQL-enqueued row(s) were carried already`);
    this.name = 'InboxRowsGone';
  }
}

interface Row {
  xid: string;
  seq: string | null;
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
 * it pushed (in the push's own commit, {@link claim}) or dropped, the limits the function
 * checks, and the figures of the metrics.
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

  /**
   * Up to `limit` rows of committed transactions, in commit order, and in call order within a
   * transaction; with the transactions looked at (one whose rows a carriage cut short already
   * pushed has none left, and is in `xids` all the same).
   */
  async next(session: DbSession, limit: number): Promise<CarriageRows> {
    const found = await session.query<Row>(
      `SELECT c.xid::text AS xid, i.seq::text AS seq, i.queue_id, i.item::text AS item, i.priority, i.dedup_id, i.headers::text AS headers,
              CASE WHEN i.deliver_at IS NULL THEN 0
                   ELSE greatest(0, ceil(extract(epoch FROM i.deliver_at - clock_timestamp()) * 1000))::float8 END AS delay_ms
         FROM (SELECT xid, commit_seq FROM enqueue_commits ORDER BY commit_seq LIMIT $1) c
         LEFT JOIN enqueued_items i ON i.xid = c.xid
        ORDER BY c.commit_seq, i.seq
        LIMIT $1`,
      [limit],
    );
    const rows: EnqueuedRow[] = [];
    const xids: string[] = [];
    for (const r of found) {
      if (xids.at(-1) !== r.xid) xids.push(r.xid);
      if (r.seq === null) continue;
      rows.push({
        xid: r.xid,
        seq: r.seq,
        queueId: r.queue_id,
        item: r.item,
        priority: r.priority,
        delayMs: r.delay_ms,
        dedupId: r.dedup_id,
        headers: r.headers,
      });
    }
    return { rows, xids };
  }

  /**
   * The deletion of rows a push carries, as statements in that push's commit
   * (`TurnRunner.push`): the items and the deletion commit together or not at all. It fails the
   * push ({@link InboxRowsGone}) when any row is gone: another carriage pushed it, and this push
   * must not commit a second copy.
   */
  claim(rows: readonly Pick<EnqueuedRow, 'xid' | 'seq'>[]): InTurnCommit {
    const xids = rows.map((r) => r.xid);
    const seqs = rows.map((r) => r.seq);
    return async (session) => {
      const [{ n }] = await session.query<{ n: number }>(
        `WITH d AS (DELETE FROM enqueued_items i USING unnest($1::xid8[], $2::bigint[]) AS d(xid, seq) WHERE i.xid = d.xid AND i.seq = d.seq RETURNING 1)
         SELECT count(*)::int AS n FROM d`,
        [xids, seqs],
        'pushpop_enqueue_claim',
      );
      if (n !== rows.length) throw new InboxRowsGone(rows.length, n);
    };
  }

  /** Deletes rows no push carries (dropped), then the commits of `xids` (transactions) that have no row left. */
  async remove(session: DbSession, rows: readonly Pick<EnqueuedRow, 'xid' | 'seq'>[], xids: readonly string[]): Promise<void> {
    if (rows.length > 0) {
      await session.query(`DELETE FROM enqueued_items i USING unnest($1::xid8[], $2::bigint[]) AS d(xid, seq) WHERE i.xid = d.xid AND i.seq = d.seq`, [
        rows.map((r) => r.xid),
        rows.map((r) => r.seq),
      ]);
    }
    if (xids.length === 0) return;
    // A statement of its own, after the pushes committed: its snapshot sees their deletions.
    await session.query(`DELETE FROM enqueue_commits c WHERE c.xid = ANY($1::xid8[]) AND NOT EXISTS (SELECT 1 FROM enqueued_items i WHERE i.xid = c.xid)`, [
      xids,
    ]);
  }

  /**
   * Makes the function check this service's limits: the two functions that hold them are
   * replaced only when they differ (enqueue-limits.function.ts), under a lock of the schema so
   * that processes starting at once replace them one after the other.
   */
  async setLimits(maxItemBytes: number, maxPriority: number): Promise<void> {
    const holdsThese = async (session: DbSession): Promise<boolean> => {
      const [now] = await session.query<{ bytes: number; priority: number }>(
        `SELECT pushpop_enqueue_max_item_bytes() AS bytes, pushpop_enqueue_max_priority() AS priority`,
      );
      return now.bytes === maxItemBytes && now.priority === maxPriority;
    };
    if (await holdsThese(this.uow.autocommit)) return;
    await this.uow.transaction(async (session) => {
      await session.query(`SELECT pg_advisory_xact_lock(hashtext('pushpop_enqueue_limits'), hashtext(current_schema()))`);
      if (await holdsThese(session)) return;
      for (const fn of enqueueLimitFunctions({ maxItemBytes, maxPriority })) await session.query(createFunctionStatement(fn));
    });
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
