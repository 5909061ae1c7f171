import { Injectable } from '@nestjs/common';
import { StoreUnavailableError } from '../common/errors.js';
import { StatementGroups } from '../common/statement-groups.js';
import { AppConfig } from '../config/app-config.js';
import { WRITE_TURN_FULL } from '../database/functions/write-turn.function.js';
import { SHORT_FORM_LENGTH, writeTurnValues } from '../database/functions/write-turn.parameters.js';
import { UnitOfWork, type DbSession } from '../database/unit-of-work.js';
import type {
  LoadedQueue,
  QueueListRow,
  StoredDelayedItem,
  StoredEntry,
  StoredHeldItem,
  StoredLock,
  StoredPriority,
  StoredQueue,
  StoredReturnedEntry,
  StoredTurnWrite,
} from '../database/stored-queue.js';

interface RawQueueRow {
  version: string;
  segment_size: number;
  buffer_segments: number;
  priorities: Record<string, StoredPriority>;
  lock_id: string | null;
  lock_state: 'active' | 'expired' | null;
  lock_priorities: number[] | null;
  lock_items: string[] | null;
  lock_segments: string[] | null;
  lock_positions: number[] | null;
  lock_deliveries: number[] | null;
  lock_created_at: Date | null;
  lock_expires_at: Date | null;
  delayed_count: string;
  next_due_at: Date | null;
  delayed_seq: string;
  lock_mode: 'exclusive' | 'shared';
  max_deliveries: number | null;
  dead_letter_queue: string | null;
  live_locks: number;
  locked_items: string;
  next_lock_expiry: Date | null;
}

/** The front segment's columns of {@link LOAD_QUEUES}. */
interface RawFront {
  front_priority: number | null;
  front_segment: string | null;
  front_positions: number[] | null;
  front_items: string[] | null;
  front_deliveries: number[] | null;
}

/** A `queue_locks` / `shared_locks` row as read. */
interface RawLockRow {
  lock_id: string;
  state: 'active' | 'expired';
  priorities: number[];
  items: string[];
  segments: string[] | null;
  positions: number[] | null;
  deliveries: number[] | null;
  created_at: Date;
  expires_at: Date;
}

/** The columns of a queue row and its exclusive lock (`queues q LEFT JOIN queue_locks l`), as {@link RawQueueRow}. */
const QUEUE_COLUMNS = `
         q.version, q.segment_size, q.buffer_segments, q.priorities, q.delayed_count, q.next_due_at, q.delayed_seq,
         q.lock_mode, q.max_deliveries, q.dead_letter_queue, q.live_locks, q.locked_items, q.next_lock_expiry,
         l.lock_id, l.state AS lock_state, l.priorities AS lock_priorities, l.items AS lock_items,
         l.segments AS lock_segments, l.positions AS lock_positions, l.deliveries AS lock_deliveries,
         l.created_at AS lock_created_at, l.expires_at AS lock_expires_at`;

const LOAD_QUEUE = `
  SELECT ${QUEUE_COLUMNS}
    FROM queues q LEFT JOIN queue_locks l ON l.queue_id = q.queue_id
   WHERE q.queue_id = $1`;

/** The front segment's columns ({@link RawFront}), from {@link frontJoins}. */
const FRONT_COLUMNS = `
         f.priority AS front_priority, f.segment AS front_segment,
         h.positions AS front_positions, h.items AS front_items, h.deliveries AS front_deliveries`;

/**
 * When `condition` holds for the queue row `q`: the rows of the head segment of its lowest
 * priority whose segments hold items (as arrays), which is what a pop takes first. Otherwise
 * the {@link FRONT_COLUMNS} are null, and PostgreSQL reads nothing more (the condition refers
 * only to the outer row, so it is checked once before the reads).
 */
const frontJoins = (condition: string): string => `
    LEFT JOIN LATERAL (
      SELECT p.key::int AS priority, (p.value->>'head_segment')::bigint AS segment
        FROM jsonb_each(q.priorities) AS p
       WHERE ${condition} AND (p.value->>'count')::bigint > 0
       ORDER BY p.key::int LIMIT 1) f ON true
    LEFT JOIN LATERAL (
      SELECT array_agg(s.position ORDER BY s.position) AS positions, array_agg(s.item ORDER BY s.position) AS items,
             array_agg(s.deliveries ORDER BY s.position) AS deliveries
        FROM segment_items s
       WHERE f.priority IS NOT NULL AND s.queue_id = q.queue_id AND s.priority = f.priority AND s.segment = f.segment) h ON true`;

/**
 * Several queue rows at once (the {@link QUEUE_COLUMNS}), in one snapshot, with the front
 * segment of the ids marked `front`: what a pop on the freshly loaded queue takes first, so that
 * it needs no statement of its own. Ids with no row give no row.
 */
const LOAD_QUEUES = `
  SELECT r.queue_id, ${QUEUE_COLUMNS}, ${FRONT_COLUMNS}
    FROM unnest($1::varchar[], $2::bool[]) AS r(queue_id, front)
    JOIN queues q ON q.queue_id = r.queue_id
    LEFT JOIN queue_locks l ON l.queue_id = q.queue_id${frontJoins('r.front')}`;

/** One queue row, with its front segment only if its version is no longer `$2` (see {@link SegmentRepository.recheckQueue}). */
const RECHECK_QUEUE = `
  SELECT ${QUEUE_COLUMNS}, ${FRONT_COLUMNS}
    FROM queues q LEFT JOIN queue_locks l ON l.queue_id = q.queue_id${frontJoins('q.version IS DISTINCT FROM $2::bigint')}
   WHERE q.queue_id = $1`;

/** `$from+1, …, $from+n`. */
const placeholders = (n: number, from = 0): string => Array.from({ length: n }, (_, i) => `$${from + i + 1}`).join(', ');
/** The turn statement with everything. */
const WRITE_TURN = `SELECT pushpop_write_turn(${placeholders(WRITE_TURN_FULL.parameters.length)}) AS applied`;
/** Its short form, for turns that give none of the full form's own parameters: most pushes and pops. */
const WRITE_TURN_BASIC = `SELECT pushpop_write_turn(${placeholders(SHORT_FORM_LENGTH)}) AS applied`;
/** Turn writes of the short form one statement carries at most. */
const MAX_WRITE_GROUP = 16;
/**
 * Several turns' writes of the short form in one statement (one round trip, one commit): one
 * call per queue, in the order of the values, each applied only if its queue's version matches.
 */
const writeTurnsBasic = (n: number): string =>
  `SELECT ${Array.from({ length: n }, (_, w) => `pushpop_write_turn(${placeholders(SHORT_FORM_LENGTH, w * SHORT_FORM_LENGTH)}) AS a${w}`).join(', ')}`;
const WRITE_TURNS_BASIC = Array.from({ length: MAX_WRITE_GROUP + 1 }, (_, n) => (n < 2 ? '' : writeTurnsBasic(n)));

const SHARED_LOCK_COLUMNS = 'lock_id, state, priorities, items, segments, positions, deliveries, created_at, expires_at';

/** A lock's items from its parallel arrays (origins and deliveries absent in rows written before they were kept). */
function heldItems(priorities: number[], items: string[], segments: string[] | null, positions: number[] | null, deliveries: number[] | null): StoredHeldItem[] {
  return items.map((json, i) => {
    const item: { priority: number; json: string; origin?: { segment: number; position: number }; deliveries?: number } = { priority: priorities[i], json };
    if (segments && positions) item.origin = { segment: Number(segments[i]), position: positions[i] };
    if (deliveries) item.deliveries = deliveries[i];
    return item;
  });
}

function toStoredLock(row: RawLockRow): StoredLock {
  return {
    lockId: row.lock_id,
    state: row.state,
    items: heldItems(row.priorities, row.items, row.segments, row.positions, row.deliveries),
    createdAt: row.created_at.getTime(),
    expiresAt: row.expires_at.getTime(),
  };
}

/**
 * A queue's due delayed items, oldest first, at most `$3 - 1` of them plus one more to tell
 * whether more are due; and the first item not due yet, for its due time. Both are ranges of
 * the primary key `(queue_id, due_at, seq)`.
 */
const LOAD_DUE = `
  (SELECT due_at, seq, priority, item FROM delayed_items
    WHERE queue_id = $1 AND due_at <= to_timestamp($2 / 1000.0) ORDER BY due_at, seq LIMIT $3)
  UNION ALL
  (SELECT due_at, seq, NULL, NULL FROM delayed_items
    WHERE queue_id = $1 AND due_at > to_timestamp($2 / 1000.0) ORDER BY due_at, seq LIMIT 1)`;

/** A segment row as the core takes it (no `deliveries` for an item never delivered). */
function toEntry(position: number, json: string, deliveries: number): StoredEntry {
  return deliveries > 0 ? { position, json, deliveries } : { position, json };
}

function toStoredQueue(raw: RawQueueRow): StoredQueue {
  return {
    version: Number(raw.version),
    settings: {
      segmentSize: raw.segment_size,
      bufferSegments: raw.buffer_segments,
      lockMode: raw.lock_mode,
      maxDeliveries: raw.max_deliveries,
      deadLetterQueue: raw.dead_letter_queue,
    },
    priorities: raw.priorities,
    lock:
      raw.lock_id === null
        ? null
        : {
            lockId: raw.lock_id,
            state: raw.lock_state!,
            items: heldItems(raw.lock_priorities!, raw.lock_items!, raw.lock_segments, raw.lock_positions, raw.lock_deliveries),
            createdAt: raw.lock_created_at!.getTime(),
            expiresAt: raw.lock_expires_at!.getTime(),
          },
    delayed: { count: Number(raw.delayed_count), nextDueAt: raw.next_due_at ? raw.next_due_at.getTime() : null, nextSeq: Number(raw.delayed_seq) },
    shared: { live: raw.live_locks, items: Number(raw.locked_items), nextExpiry: raw.next_lock_expiry ? raw.next_lock_expiry.getTime() : null },
  };
}

/** A queue row with its {@link FRONT_COLUMNS} (null: the front was not read, or the queue's segments hold no items). */
function toLoadedQueue(row: RawQueueRow & RawFront): LoadedQueue {
  const queue = toStoredQueue(row);
  if (row.front_priority === null || row.front_positions === null) return { queue };
  const entries = row.front_positions.map((position, i) => toEntry(position, row.front_items![i], row.front_deliveries![i]));
  return { queue, front: { priority: row.front_priority, segment: Number(row.front_segment), entries } };
}

/**
 * The SQL of queues, their segments and their locks. A turn's statements run on the session its
 * runner gives: the pool (each statement its own transaction), or the transaction that holds
 * the queue's row lock. The turn's statements are prepared (named), so each connection parses
 * and plans them once.
 */
@Injectable()
export class SegmentRepository {
  /**
   * Short-form turn writes on the pool, grouped while as many are in flight as half the pool's
   * connections: those that would have queued for a connection go together in one statement.
   */
  private readonly basicWrites: StatementGroups<{ queueId: string; values: unknown[] }, boolean>;

  constructor(
    private readonly uow: UnitOfWork,
    config: AppConfig,
  ) {
    this.basicWrites = new StatementGroups((group) => this.sendBasicWrites(group), Math.max(1, Math.floor(config.env.DB_POOL_SIZE / 2)), MAX_WRITE_GROUP);
  }

  /** Statements that carried the short-form writes of several turns, and all such statements sent. */
  get writeGroups(): { grouped: number; sent: number } {
    return { grouped: this.basicWrites.grouped, sent: this.basicWrites.groups };
  }

  /**
   * The queue row and its lock, or undefined. With `forUpdate` (inside a transaction) the row
   * stays locked until the transaction ends: a turn of another process on the same queue waits.
   */
  async loadQueue(queueId: string, session: DbSession = this.uow.autocommit, forUpdate = false): Promise<StoredQueue | undefined> {
    // Locked, the row is locked first and read by a statement of its own. `SELECT … JOIN … FOR
    // UPDATE OF q` would not do: after waiting for another turn's commit it re-reads the queue
    // row alone and joins the lock row as it was before the wait (read committed re-checks only
    // the rows it locks), pairing the new version with the old lock.
    //
    // The dead-letter queue's row is locked with it, both in `queue_id` order, as the turn
    // statement locks them when it dead-letters: a turn holding its own row and then waiting for
    // its dead-letter queue's would deadlock with one of that queue going the other way
    // (two queues that are each other's dead-letter queue). A turn that changes the dead-letter
    // queue and dead-letters into the new one at once still locks the new one late.
    if (forUpdate) {
      await session.query(
        `SELECT 1 FROM queues WHERE queue_id = $1 OR queue_id = (SELECT dead_letter_queue FROM queues WHERE queue_id = $1) ORDER BY queue_id FOR UPDATE`,
        [queueId],
        'pushpop_lock_queue',
      );
    }
    const rows = await session.query<RawQueueRow>(LOAD_QUEUE, [queueId], 'pushpop_load_queue');
    return rows[0] ? toStoredQueue(rows[0]) : undefined;
  }

  /**
   * Queue rows for activations, in one statement and one snapshot (see {@link LOAD_QUEUES}):
   * ids with no row are absent from the answer.
   */
  async loadQueues(requests: readonly { queueId: string; front: boolean }[]): Promise<Map<string, LoadedQueue>> {
    if (requests.length === 1 && !requests[0].front) {
      // The plain statement: PostgreSQL runs it in about two thirds of the time of the batched one.
      const queue = await this.loadQueue(requests[0].queueId);
      return new Map(queue ? [[requests[0].queueId, { queue }]] : []);
    }
    const rows = await this.uow.autocommit.query<RawQueueRow & RawFront & { queue_id: string }>(
      LOAD_QUEUES,
      [requests.map((r) => r.queueId), requests.map((r) => r.front)],
      'pushpop_load_queues',
    );
    return new Map(rows.map((row) => [row.queue_id, toLoadedQueue(row)]));
  }

  /**
   * The queue's row as committed now (undefined: none), read to check that a turn which wrote
   * nothing computed its answers from the current row. Only when its version is no longer
   * `version` does the statement read the queue's front segment too: the turn runs again on the
   * row it got, and a pop then takes the front with no read of its own.
   */
  async recheckQueue(queueId: string, version: number | null): Promise<LoadedQueue | undefined> {
    const rows = await this.uow.autocommit.query<RawQueueRow & RawFront>(RECHECK_QUEUE, [queueId, version], 'pushpop_recheck_queue');
    return rows[0] ? toLoadedQueue(rows[0]) : undefined;
  }

  /**
   * Short-form writes of several turns (each of its own queue: a queue has one turn at a time
   * here) in one statement, their row locks taken in queue-id order, as every statement taking
   * several queues' locks does. A statement that fails for one of them fails for all: then each
   * is written again on its own, so that only the one at fault fails. A single write is the
   * plain statement.
   */
  private async sendBasicWrites(group: { queueId: string; values: unknown[] }[]): Promise<PromiseSettledResult<boolean>[]> {
    const single = ({ values }: { values: unknown[] }): Promise<boolean> => this.writeBasic(values, this.uow.autocommit);
    if (group.length === 1) return Promise.allSettled([single(group[0])]);
    const order = group.map((_, i) => i).sort((a, b) => (group[a].queueId < group[b].queueId ? -1 : group[a].queueId > group[b].queueId ? 1 : 0));
    let row: Record<string, boolean>;
    try {
      const rows = await this.uow.autocommit.query<Record<string, boolean>>(WRITE_TURNS_BASIC[group.length], order.flatMap((i) => group[i].values), `pushpop_write_turns_basic_${group.length}`);
      row = rows[0];
    } catch (error) {
      // A lost connection (the session made it StoreUnavailableError) fails them all alike.
      if (error instanceof StoreUnavailableError) throw error;
      return Promise.allSettled(group.map(single));
    }
    const applied = new Array<boolean>(group.length);
    order.forEach((i, w) => (applied[i] = row[`a${w}`] === true));
    return applied.map((value) => ({ status: 'fulfilled', value }));
  }

  /** One turn's write of the short form: whether it applied (the queue's version matched). */
  private async writeBasic(values: unknown[], session: DbSession): Promise<boolean> {
    const rows = await session.query<{ applied: boolean }>(WRITE_TURN_BASIC, values, 'pushpop_write_turn_basic');
    return rows[0]?.applied === true;
  }

  /** Rows of several segments, keyed `priority:segment`, positions ascending (missing segments: no key). */
  async loadSegments(queueId: string, segments: readonly { priority: number; segment: number }[], session: DbSession = this.uow.autocommit): Promise<Map<string, StoredEntry[]>> {
    const rows = await session.query<{ priority: number; segment: string; position: number; item: string; deliveries: number }>(
      `SELECT s.priority, s.segment, s.position, s.item, s.deliveries
         FROM segment_items s JOIN unnest($2::int[], $3::bigint[]) AS r(priority, segment) ON s.priority = r.priority AND s.segment = r.segment
        WHERE s.queue_id = $1
        ORDER BY s.priority, s.segment, s.position`,
      [queueId, segments.map((s) => s.priority), segments.map((s) => s.segment)],
      'pushpop_load_segments',
    );
    const out = new Map<string, StoredEntry[]>();
    for (const row of rows) {
      const key = `${row.priority}:${row.segment}`;
      let list = out.get(key);
      if (!list) out.set(key, (list = []));
      list.push(toEntry(row.position, row.item, row.deliveries));
    }
    return out;
  }

  /**
   * A queue's delayed items due at `now`, in `(due_at, seq)` order, at most `limit`, and the due
   * time of the first delayed item after them (due or not; null when there is none).
   */
  async loadDueItems(queueId: string, now: number, limit: number, session: DbSession = this.uow.autocommit): Promise<{ items: StoredDelayedItem[]; nextDueAt: number | null }> {
    const rows = await session.query<{ due_at: Date; seq: string; priority: number | null; item: string | null }>(LOAD_DUE, [queueId, now, limit + 1], 'pushpop_load_due');
    const due: StoredDelayedItem[] = [];
    let later: number | null = null;
    for (const row of rows) {
      if (row.item === null) later = row.due_at.getTime();
      else due.push({ dueAt: row.due_at.getTime(), seq: Number(row.seq), priority: row.priority!, json: row.item });
    }
    due.sort((a, b) => a.dueAt - b.dueAt || a.seq - b.seq);
    if (due.length > limit) return { items: due.slice(0, limit), nextDueAt: due[limit].dueAt };
    return { items: due, nextDueAt: later };
  }

  /** The named shared locks of a queue that exist (live or expired), by id. */
  async loadSharedLocks(queueId: string, ids: readonly string[], session: DbSession = this.uow.autocommit): Promise<Map<string, StoredLock>> {
    const rows = await session.query<RawLockRow>(
      `SELECT ${SHARED_LOCK_COLUMNS} FROM shared_locks WHERE queue_id = $1 AND lock_id = ANY($2::varchar[])`,
      [queueId, ids],
      'pushpop_load_shared_locks',
    );
    return new Map(rows.map((row) => [row.lock_id, toStoredLock(row)]));
  }

  /**
   * A queue's live shared locks expired at `now`, earliest first, at most `limit`, and the
   * expiry of the first live lock after them (null: none). Both are ranges of the partial
   * index on `(queue_id, expires_at)`.
   */
  async loadDueSharedLocks(queueId: string, now: number, limit: number, session: DbSession = this.uow.autocommit): Promise<{ locks: StoredLock[]; nextExpiry: number | null }> {
    const rows = await session.query<RawLockRow>(
      `SELECT ${SHARED_LOCK_COLUMNS} FROM shared_locks
        WHERE queue_id = $1 AND state = 'active' AND expires_at <= to_timestamp($2 / 1000.0) ORDER BY expires_at LIMIT $3`,
      [queueId, now, limit],
      'pushpop_load_due_shared_locks',
    );
    const next = rows.length < limit ? await this.nextSharedLockExpiry(queueId, session, now) : null;
    return { locks: rows.map(toStoredLock), nextExpiry: next };
  }

  /** Expiry of a queue's earliest live shared lock (after `after`, if given; not one of `exclude`); null when there is none. */
  async nextSharedLockExpiry(queueId: string, session: DbSession = this.uow.autocommit, after = -Infinity, exclude: readonly string[] = []): Promise<number | null> {
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
  async loadReturned(queueId: string, priority: number, limit: number, session: DbSession = this.uow.autocommit): Promise<StoredReturnedEntry[]> {
    const rows = await session.query<{ segment: string; position: number; item: string; deliveries: number }>(
      `SELECT segment, position, item, deliveries FROM returned_items WHERE queue_id = $1 AND priority = $2 ORDER BY segment, position LIMIT $3`,
      [queueId, priority, limit],
      'pushpop_load_returned',
    );
    return rows.map((r) => ({ segment: Number(r.segment), position: r.position, json: r.item, deliveries: r.deliveries }));
  }

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
   * Applies a turn's write in one statement (`pushpop_write_turn`: queue row, segment rows,
   * locks, the `offloaded_segments` rows of the in-database offload store, delayed items, dedup
   * ids, given-back items, dead letters), if the queue row still has `expectedVersion` (or, to
   * create it, has no row). Returns false, having written nothing, otherwise. The short form
   * serves unless the write gives one of the full form's own parameters (see
   * {@link writeTurnValues}).
   */
  async writeTurn(queueId: string, write: StoredTurnWrite, session: DbSession = this.uow.autocommit): Promise<boolean> {
    const values = writeTurnValues(queueId, write);
    if (values.length === SHORT_FORM_LENGTH) {
      return session === this.uow.autocommit ? this.basicWrites.request({ queueId, values }) : this.writeBasic(values, session);
    }
    const rows = await session.query<{ applied: boolean }>(WRITE_TURN, values, 'pushpop_write_turn');
    return rows[0]?.applied === true;
  }

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
    const rows = await this.uow.autocommit.query<{ queue_id: string; item_count: string; lock_expires_at: Date | null; live_locks: number }>(
      `SELECT q.queue_id, q.item_count, l.expires_at AS lock_expires_at, q.live_locks
         FROM (SELECT queue_id, item_count, live_locks FROM queues ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY queue_id LIMIT $${params.length}) q
         LEFT JOIN queue_locks l ON l.queue_id = q.queue_id AND l.state = 'active'
        ORDER BY q.queue_id`,
      params,
    );
    return rows.map((r) => ({ queueId: r.queue_id, count: Number(r.item_count), lockExpiresAt: r.lock_expires_at ? r.lock_expires_at.getTime() : null, liveLocks: r.live_locks }));
  }

  /** Live locks over all queues, exclusive and shared (through the partial indexes on their expiries). */
  async countLiveLocks(): Promise<number> {
    const rows = await this.uow.autocommit.query<{ n: string | null }>(
      `SELECT (SELECT count(*) FROM queue_locks WHERE state = 'active') + (SELECT coalesce(sum(live_locks), 0) FROM queues WHERE next_lock_expiry IS NOT NULL) AS n`,
    );
    return Number(rows[0]?.n ?? 0);
  }

  /** Delayed items over all queues (the queues that have any, through the partial index on `next_due_at`). */
  async countDelayed(): Promise<number> {
    const rows = await this.uow.autocommit.query<{ n: string | null }>(`SELECT sum(delayed_count) AS n FROM queues WHERE next_due_at IS NOT NULL`);
    return Number(rows[0]?.n ?? 0);
  }

  /**
   * Those of `queueIds` that hold items (not counting items under a lock), with their counts:
   * one statement, one primary-key probe per id, whatever the number of ids.
   */
  async queuesWithItems(queueIds: readonly string[]): Promise<{ queueId: string; count: number }[]> {
    const rows = await this.uow.autocommit.query<{ queue_id: string; item_count: string }>(
      `SELECT queue_id, item_count FROM queues WHERE queue_id = ANY($1::varchar[]) AND item_count > 0`,
      [queueIds],
      'pushpop_queues_with_items',
    );
    return rows.map((r) => ({ queueId: r.queue_id, count: Number(r.item_count) }));
  }

  /**
   * Those of `queueIds` a pop would find something on at `now`: items, a lock (active: the pop
   * is refused; expired: its items come back), or delayed items that are due. One statement,
   * one primary-key probe per id; a queue that does not exist is not among them.
   */
  async queuesToPopFrom(queueIds: readonly string[], now: number): Promise<string[]> {
    const rows = await this.uow.autocommit.query<{ queue_id: string }>(
      `SELECT q.queue_id FROM queues q
        WHERE q.queue_id = ANY($1::varchar[])
          AND (q.item_count <> 0 OR q.next_due_at <= to_timestamp($2 / 1000.0) OR q.next_lock_expiry <= to_timestamp($2 / 1000.0)
               OR EXISTS (SELECT 1 FROM queue_locks l WHERE l.queue_id = q.queue_id))`,
      [queueIds, now],
      'pushpop_queues_to_pop_from',
    );
    return rows.map((r) => r.queue_id);
  }

  async ping(): Promise<void> {
    await this.uow.autocommit.query('SELECT 1');
  }
}
