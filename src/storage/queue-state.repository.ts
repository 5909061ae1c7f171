import { Injectable } from '@nestjs/common';
import { StoreUnavailableError } from '../common/errors.js';
import { StatementGroups } from '../common/statement-groups.js';
import { AppConfig } from '../config/app-config.js';
import { WRITE_TURN_FULL } from '../database/functions/write-turn.function.js';
import { SHORT_FORM_LENGTH } from '../database/functions/write-turn.parameters.js';
import { writeTurnValues } from '../database/functions/write-turn.values.js';
import { UnitOfWork, type DbSession } from '../database/unit-of-work.js';
import type { LoadedQueue, StoredQueue, StoredTurnWrite } from '../database/stored-queue.js';
import type { PriorityMetadata, SegmentEntry } from '../queue/core/types.js';
import { packedSegmentKeySql, rowsOverPacked, withPackedSegments } from './packed-segments.js';
import { PackingGate } from './packing-gate.js';
import { heldItems, toEntry } from './stored-rows.js';

interface RawQueueRow {
  version: string;
  segment_size: number;
  buffer_segments: number;
  priorities: Record<string, PriorityMetadata>;
  lock_id: string | null;
  lock_state: 'active' | 'expired' | null;
  lock_priorities: number[] | null;
  lock_items: string[] | null;
  lock_segments: string[] | null;
  lock_positions: number[] | null;
  lock_deliveries: number[] | null;
  lock_from: (string | null)[] | null;
  lock_headers: (string | null)[] | null;
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
  paused: boolean;
  retry_delay_seconds: number;
  retry_backoff: 'fixed' | 'exponential';
  retry_delay_max_seconds: number;
  max_in_flight: number | null;
  max_pops_per_second: number | null;
  pop_tokens: number | null;
  pop_tokens_at: number | null;
}

/** The front segment's columns of {@link LOAD_QUEUES}. */
interface RawFront {
  front_priority: number | null;
  front_segment: string | null;
  front_positions: number[] | null;
  front_items: string[] | null;
  front_deliveries: number[] | null;
  front_from: (string | null)[] | null;
  front_headers: (string | null)[] | null;
  /** The front segment's packed row (see `packed-segments.ts`), if it has one. */
  front_packed_items: string[] | null;
  front_packed_from: (string | null)[] | null;
  front_packed_headers: (string | null)[] | null;
}

/** The columns of a queue row and its exclusive lock (`queues q LEFT JOIN queue_locks l`), as {@link RawQueueRow}. */
const QUEUE_COLUMNS = `
         q.version, q.segment_size, q.buffer_segments, q.priorities, q.delayed_count, q.next_due_at, q.delayed_seq,
         q.lock_mode, q.max_deliveries, q.dead_letter_queue, q.live_locks, q.locked_items, q.next_lock_expiry,
         q.paused, q.retry_delay_seconds, q.retry_backoff, q.retry_delay_max_seconds, q.max_in_flight, q.max_pops_per_second,
         q.pop_tokens, q.pop_tokens_at,
         l.lock_id, l.state AS lock_state, l.priorities AS lock_priorities, l.items AS lock_items,
         l.segments AS lock_segments, l.positions AS lock_positions, l.deliveries AS lock_deliveries, l.dead_lettered_from AS lock_from, l.headers AS lock_headers,
         l.created_at AS lock_created_at, l.expires_at AS lock_expires_at`;

const LOAD_QUEUE = `
  SELECT ${QUEUE_COLUMNS}
    FROM queues q LEFT JOIN queue_locks l ON l.queue_id = q.queue_id
   WHERE q.queue_id = $1`;

/** The front segment's columns ({@link RawFront}), from {@link frontJoins}. */
const FRONT_COLUMNS = `
         f.priority AS front_priority, f.segment AS front_segment,
         h.positions AS front_positions, h.items AS front_items, h.deliveries AS front_deliveries, h.dead_lettered_from AS front_from,
         h.headers AS front_headers,
         k.items AS front_packed_items, k.dead_lettered_from AS front_packed_from, k.headers AS front_packed_headers`;

/**
 * When `condition` holds for the queue row `q`: the rows of the head segment of its lowest
 * priority whose segments hold items (as arrays), and its packed row, which is what a pop takes
 * first. Otherwise
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
             array_agg(s.deliveries ORDER BY s.position) AS deliveries, array_agg(s.dead_lettered_from ORDER BY s.position) AS dead_lettered_from,
             array_agg(s.headers ORDER BY s.position) AS headers
        FROM segment_items s
       WHERE f.priority IS NOT NULL AND s.queue_id = q.queue_id AND s.priority = f.priority AND s.segment = f.segment) h ON true
    LEFT JOIN offloaded_segments k
      ON f.priority IS NOT NULL AND k.queue_id = q.queue_id AND k.key = ${packedSegmentKeySql('f.priority', 'f.segment')}`;

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

/** One queue row, with its front segment only if its version is no longer `$2` (see {@link QueueStateRepository.recheckQueue}). */
const RECHECK_QUEUE = `
  SELECT ${QUEUE_COLUMNS}, ${FRONT_COLUMNS}
    FROM queues q LEFT JOIN queue_locks l ON l.queue_id = q.queue_id${frontJoins('q.version IS DISTINCT FROM $2::bigint')}
   WHERE q.queue_id = $1`;

/**
 * Rows of the segments asked for: one index range per segment, then the items of its packed row
 * (`packed` true; see `packed-segments.ts`) at positions 0..n-1, looked up by its key. The
 * subqueries' ORDER BY keeps PostgreSQL from turning them into a join, whose plan may read every
 * row of the queue (the dead rows of a bulk load included) when it was made while the table
 * looked small. Sorted by position within each segment, as {@link rowsOverPacked} merges them.
 */
const LOAD_SEGMENTS = `
  SELECT r.priority, r.segment, s.position, s.item, s.deliveries, s.dead_lettered_from, s.headers, s.packed
    FROM unnest($2::int[], $3::bigint[]) AS r(priority, segment)
   CROSS JOIN LATERAL (
     (SELECT x.position, x.item, x.deliveries, x.dead_lettered_from, x.headers, false AS packed FROM segment_items x
       WHERE x.queue_id = $1 AND x.priority = r.priority AND x.segment = r.segment
       ORDER BY x.position)
     UNION ALL
     (SELECT (p.ord - 1)::int, p.item, 0, p.from_queue, p.headers, true FROM offloaded_segments o
       CROSS JOIN LATERAL unnest(o.items, coalesce(o.dead_lettered_from, '{}'), coalesce(o.headers, '{}')) WITH ORDINALITY AS p(item, from_queue, headers, ord)
       WHERE o.queue_id = $1 AND o.key = ${packedSegmentKeySql('r.priority', 'r.segment')}
       ORDER BY p.ord)) s
   ORDER BY r.priority, r.segment, s.position`;

/** `$from+1, …, $from+n`. */
const placeholders = (n: number, from = 0): string => Array.from({ length: n }, (_, i) => `$${from + i + 1}`).join(', ');
/** Turn writes one statement carries at most. */
const MAX_WRITE_GROUP = 16;

/**
 * A form of the turn statement as sent: how many values it takes, the statement of one write,
 * and those of several turns' writes in one statement (one round trip, one commit: one call per
 * queue, in the order of the values, each applied only if its queue's version matches), by
 * their number.
 */
interface WriteStatements {
  readonly length: number;
  readonly one: { readonly text: string; readonly name: string };
  readonly several: readonly { readonly text: string; readonly name: string }[];
}

function writeStatements(length: number, name: string, groupName: string): WriteStatements {
  const call = (w: number): string => `pushpop_write_turn(${placeholders(length, w * length)})`;
  return {
    length,
    one: { text: `SELECT ${call(0)} AS applied`, name },
    several: Array.from({ length: MAX_WRITE_GROUP + 1 }, (_, n) => ({
      text: n < 2 ? '' : `SELECT ${Array.from({ length: n }, (_, w) => `${call(w)} AS a${w}`).join(', ')}`,
      name: `${groupName}_${n}`,
    })),
  };
}

/** The short form, for turns that give none of the full form's own parameters: most pushes and pops. */
const SHORT_WRITE = writeStatements(SHORT_FORM_LENGTH, 'pushpop_write_turn_basic', 'pushpop_write_turns_basic');
/** The form with everything: shared locks, an exclusive lock's item origins, settings, given-back items, dead letters. */
const FULL_WRITE = writeStatements(WRITE_TURN_FULL.parameters.length, 'pushpop_write_turn', 'pushpop_write_turns_full');

/** A turn's write waiting for its statement on the pool. */
interface PendingWrite {
  readonly queueId: string;
  readonly values: unknown[];
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
      paused: raw.paused,
      retryDelaySeconds: raw.retry_delay_seconds,
      retryBackoff: raw.retry_backoff,
      retryDelayMaxSeconds: raw.retry_delay_max_seconds,
      maxInFlight: raw.max_in_flight,
      maxPopsPerSecond: raw.max_pops_per_second,
    },
    priorities: raw.priorities,
    lock:
      raw.lock_id === null
        ? null
        : {
            lockId: raw.lock_id,
            state: raw.lock_state!,
            items: heldItems(
              raw.lock_priorities!,
              raw.lock_items!,
              raw.lock_segments,
              raw.lock_positions,
              raw.lock_deliveries,
              raw.lock_from,
              raw.lock_headers,
            ),
            createdAt: raw.lock_created_at!.getTime(),
            expiresAt: raw.lock_expires_at!.getTime(),
          },
    delayed: { count: Number(raw.delayed_count), nextDueAt: raw.next_due_at ? raw.next_due_at.getTime() : null, nextSeq: Number(raw.delayed_seq) },
    shared: { live: raw.live_locks, items: Number(raw.locked_items), nextExpiry: raw.next_lock_expiry ? raw.next_lock_expiry.getTime() : null },
    ...(raw.pop_tokens_at !== null && raw.pop_tokens !== null ? { popBudget: { tokens: raw.pop_tokens, at: raw.pop_tokens_at } } : {}),
  };
}

/** A queue row with its {@link FRONT_COLUMNS} (null: the front was not read, or the queue's segments hold no items). */
function toLoadedQueue(row: RawQueueRow & RawFront): LoadedQueue {
  const queue = toStoredQueue(row);
  if (row.front_priority === null || (row.front_positions === null && row.front_packed_items === null)) return { queue };
  const rows = (row.front_positions ?? []).map((position, i) =>
    toEntry(position, row.front_items![i], row.front_deliveries![i], row.front_from?.[i] ?? null, row.front_headers?.[i] ?? null),
  );
  const packed = (row.front_packed_items ?? []).map((json, position) =>
    toEntry(position, json, 0, row.front_packed_from?.[position] ?? null, row.front_packed_headers?.[position] ?? null),
  );
  const entries = rowsOverPacked(rows, packed);
  return { queue, front: { priority: row.front_priority, segment: Number(row.front_segment), entries } };
}

/**
 * The SQL of a queue's state: its row (with its exclusive lock, read in the same statement),
 * its segments, and the turn statement that writes everything a turn changed. A turn's
 * statements run on the session its runner gives: the pool (each statement its own transaction), or the transaction that holds
 * the queue's row lock. The turn's statements are prepared (named), so each connection parses
 * and plans them once.
 */
@Injectable()
export class QueueStateRepository {
  /**
   * Turn writes on the pool, grouped while as many are in flight as a fifth of the
   * pool's connections (two of the default ten): those that would have waited go together in one
   * statement. Fewer statements in flight make larger groups, so fewer commits and less CPU per
   * turn in the service and in PostgreSQL; on two cores, two in flight pushed and popped more per
   * second than five (docs/performance.md, "Settings chosen by measurement").
   */
  private readonly writes: StatementGroups<PendingWrite, boolean>;

  constructor(
    private readonly uow: UnitOfWork,
    config: AppConfig,
    /** Whether segments brought back from the offload store are written packed now. */
    private readonly packingGate: PackingGate,
  ) {
    this.writes = new StatementGroups((group) => this.sendWrites(group), Math.max(1, Math.floor(config.env.DB_POOL_SIZE / 5)), MAX_WRITE_GROUP);
  }

  /** Groups of turn writes on the pool that held several, and all groups sent (a group of both forms is two statements). */
  get writeGroups(): { grouped: number; sent: number } {
    return { grouped: this.writes.grouped, sent: this.writes.groups };
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
   * A group of turn writes: those of each form in one statement (the two forms side by side, on
   * two connections), each outcome its own.
   */
  private async sendWrites(group: PendingWrite[]): Promise<PromiseSettledResult<boolean>[]> {
    if (group.length === 1) return Promise.allSettled([this.writeOne(group[0].values, this.uow.autocommit)]);
    const results = new Array<PromiseSettledResult<boolean>>(group.length);
    await Promise.all(
      [SHORT_WRITE, FULL_WRITE].map(async (form) => {
        const at: number[] = [];
        group.forEach((w, i) => w.values.length === form.length && at.push(i));
        if (at.length === 0) return;
        const settled = await this.sendForm(
          form,
          at.map((i) => group[i]),
        ).catch((error: unknown) => at.map((): PromiseSettledResult<boolean> => ({ status: 'rejected', reason: error })));
        at.forEach((i, k) => (results[i] = settled[k]));
      }),
    );
    return results;
  }

  /**
   * Writes of one form of several turns (each of its own queue: a queue has one turn at a time
   * here) in one statement, their row locks taken in queue-id order, as every statement taking
   * several queues' locks does. A statement that fails for one of them fails for all: then each
   * is written again on its own, so that only the one at fault fails. A single write is the
   * plain statement.
   */
  private async sendForm(form: WriteStatements, group: PendingWrite[]): Promise<PromiseSettledResult<boolean>[]> {
    const single = ({ values }: PendingWrite): Promise<boolean> => this.writeOne(values, this.uow.autocommit);
    if (group.length === 1) return Promise.allSettled([single(group[0])]);
    const order = group.map((_, i) => i).sort((a, b) => (group[a].queueId < group[b].queueId ? -1 : group[a].queueId > group[b].queueId ? 1 : 0));
    let row: Record<string, boolean>;
    try {
      // One array of the final length, filled in place: `flatMap` over hundreds of values took
      // a measurable share of a grouped statement's CPU.
      const values = new Array<unknown>(group.length * form.length);
      let at = 0;
      for (const i of order) for (const value of group[i].values) values[at++] = value;
      const statement = form.several[group.length];
      const rows = await this.uow.autocommit.query<Record<string, boolean>>(statement.text, values, statement.name);
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

  /** One turn's write, of the form its values are: whether it applied (the queue's version matched). */
  private async writeOne(values: unknown[], session: DbSession): Promise<boolean> {
    const { one } = values.length === SHORT_FORM_LENGTH ? SHORT_WRITE : FULL_WRITE;
    const rows = await session.query<{ applied: boolean }>(one.text, values, one.name);
    return rows[0]?.applied === true;
  }

  /**
   * Rows of several segments, keyed `priority:segment`, positions ascending (missing segments: no
   * key), with the items of their packed rows where no row has their position: a packed head's
   * popped items too, which the core leaves out by the priority's `head_position`.
   */
  async loadSegments(
    queueId: string,
    segments: readonly { priority: number; segment: number }[],
    session: DbSession = this.uow.autocommit,
  ): Promise<Map<string, SegmentEntry[]>> {
    const rows = await session.query<{
      priority: number;
      segment: string;
      position: number;
      item: string;
      deliveries: number;
      dead_lettered_from: string | null;
      headers: string | null;
      packed: boolean;
    }>(LOAD_SEGMENTS, [queueId, segments.map((s) => s.priority), segments.map((s) => s.segment)], 'pushpop_load_segments');
    const read = new Map<string, { rows: SegmentEntry[]; packed: SegmentEntry[] }>();
    for (const row of rows) {
      const key = `${row.priority}:${row.segment}`;
      let segment = read.get(key);
      if (!segment) read.set(key, (segment = { rows: [], packed: [] }));
      (row.packed ? segment.packed : segment.rows).push(toEntry(row.position, row.item, row.deliveries, row.dead_lettered_from, row.headers));
    }
    const out = new Map<string, SegmentEntry[]>();
    for (const [key, segment] of read) out.set(key, rowsOverPacked(segment.rows, segment.packed));
    return out;
  }

  /**
   * Applies a turn's write in one statement (`pushpop_write_turn`: queue row, segment rows,
   * packed segments, locks, the `offloaded_segments` rows of the in-database offload store, delayed items, dedup
   * ids, given-back items, dead letters), if the queue row still has `expectedVersion` (or, to
   * create it, has no row). Returns false, having written nothing, otherwise. The short form
   * serves unless the write gives one of the full form's own parameters (see
   * {@link writeTurnValues}).
   */
  async writeTurn(queueId: string, write: StoredTurnWrite, session: DbSession = this.uow.autocommit): Promise<boolean> {
    const values = writeTurnValues(queueId, withPackedSegments(write, this.packingGate.packing));
    // A write that locks other queues' rows too (dead letters, redriven items) goes alone: in a
    // group their locks would not be taken in one queue-id order with the others'.
    const otherQueues = write.deadLetters !== null || write.redriven.length > 0;
    return session === this.uow.autocommit && !otherQueues ? this.writes.request({ queueId, values }) : this.writeOne(values, session);
  }
}
