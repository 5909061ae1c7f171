import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { PriorityMetadata, QueueListRow, QueueRow, SegmentEntry, SegmentInsert } from './queue-metadata.js';

interface RawQueueRow {
  version: string;
  segment_size: number;
  buffer_segments: number;
  item_count: string;
  priorities: Record<string, PriorityMetadata>;
  created_at: Date;
}

const QUEUE_COLUMNS = 'version, segment_size, buffer_segments, item_count, priorities, created_at';

function toQueueRow(raw: RawQueueRow): QueueRow {
  return {
    version: String(raw.version),
    segmentSize: raw.segment_size,
    bufferSegments: raw.buffer_segments,
    itemCount: Number(raw.item_count),
    priorities: raw.priorities,
    createdAt: raw.created_at,
  };
}

/**
 * The SQL of queue metadata and segments. Every method takes the EntityManager to run on: the
 * turn's transaction inside a turn (a turn holds one pool connection and uses no other).
 */
@Injectable()
export class SegmentRepository {
  /**
   * Locks the queue row for the rest of the transaction and reads it. This lock is what makes
   * a queue an actor across processes: a second process's turn on the same queue waits here
   * until the first commits, then reads the committed version.
   */
  async lockQueue(tx: EntityManager, queueId: string): Promise<QueueRow | undefined> {
    const rows: RawQueueRow[] = await tx.query(`SELECT ${QUEUE_COLUMNS} FROM queues WHERE queue_id = $1 FOR UPDATE`, [queueId]);
    return rows[0] ? toQueueRow(rows[0]) : undefined;
  }

  /** Like {@link lockQueue}, creating the queue with the given settings when it does not exist. */
  async lockOrCreateQueue(tx: EntityManager, queueId: string, segmentSize: number, bufferSegments: number): Promise<QueueRow> {
    const existing = await this.lockQueue(tx, queueId);
    if (existing) return existing;
    await tx.query(
      `INSERT INTO queues (queue_id, segment_size, buffer_segments) VALUES ($1, $2, $3) ON CONFLICT (queue_id) DO NOTHING`,
      [queueId, segmentSize, bufferSegments],
    );
    const created = await this.lockQueue(tx, queueId);
    if (!created) throw new Error(`queue ${queueId} vanished while being created`);
    return created;
  }

  /** Writes the metadata and gives the queue a new version, returned. */
  async saveQueue(tx: EntityManager, queueId: string, itemCount: number, priorities: Record<string, PriorityMetadata>): Promise<string> {
    // For UPDATE, TypeORM's query() answers [rows, affectedCount].
    const [rows]: [{ version: string }[], number] = await tx.query(
      `UPDATE queues SET version = nextval('queue_versions'), item_count = $2, priorities = $3::jsonb, updated_at = now()
        WHERE queue_id = $1 RETURNING version`,
      [queueId, itemCount, JSON.stringify(priorities)],
    );
    if (!rows[0]) throw new Error(`queue ${queueId} vanished during its turn`);
    return String(rows[0].version);
  }

  async loadSegment(tx: EntityManager, queueId: string, priority: number, segment: number): Promise<SegmentEntry[]> {
    const rows: { position: number; item: string }[] = await tx.query(
      `SELECT position, item FROM segment_items WHERE queue_id = $1 AND priority = $2 AND segment = $3 ORDER BY position`,
      [queueId, priority, segment],
    );
    return rows.map((r) => ({ position: r.position, json: r.item }));
  }

  /** Inserts items of any number of segments in one statement. */
  async insertItems(tx: EntityManager, queueId: string, inserts: SegmentInsert[]): Promise<void> {
    const priorities: number[] = [];
    const segments: number[] = [];
    const positions: number[] = [];
    const items: string[] = [];
    for (const insert of inserts) {
      for (const entry of insert.entries) {
        priorities.push(insert.priority);
        segments.push(insert.segment);
        positions.push(entry.position);
        items.push(entry.json);
      }
    }
    if (items.length === 0) return;
    await tx.query(
      `INSERT INTO segment_items (queue_id, priority, segment, position, item)
       SELECT $1, p, s, pos, i FROM unnest($2::int[], $3::bigint[], $4::int[], $5::text[]) AS t(p, s, pos, i)`,
      [queueId, priorities, segments, positions, items],
    );
  }

  /** Deletes the items of one segment up to and including `lastPosition` (popped from the front). */
  async deleteThrough(tx: EntityManager, queueId: string, priority: number, segment: number, lastPosition: number): Promise<void> {
    await tx.query(`DELETE FROM segment_items WHERE queue_id = $1 AND priority = $2 AND segment = $3 AND position <= $4`, [
      queueId,
      priority,
      segment,
      lastPosition,
    ]);
  }

  async deleteSegment(tx: EntityManager, queueId: string, priority: number, segment: number): Promise<void> {
    await tx.query(`DELETE FROM segment_items WHERE queue_id = $1 AND priority = $2 AND segment = $3`, [queueId, priority, segment]);
  }

  /** Deletes the queue row and every item; returns how many items were waiting. */
  async deleteQueue(tx: EntityManager, queueId: string): Promise<void> {
    await tx.query(`DELETE FROM segment_items WHERE queue_id = $1`, [queueId]);
    await tx.query(`DELETE FROM queues WHERE queue_id = $1`, [queueId]);
  }

  /** Queues in id order after `cursor`, whose id starts with `prefix`. Uses the primary key index. */
  async listQueues(tx: EntityManager, prefix: string, after: string | undefined, limit: number): Promise<QueueListRow[]> {
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
    const rows: { queue_id: string; item_count: string; lock_expires_at: Date | null }[] = await tx.query(
      `SELECT q.queue_id, q.item_count, l.expires_at AS lock_expires_at
         FROM (SELECT queue_id, item_count FROM queues ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY queue_id LIMIT $${params.length}) q
         LEFT JOIN queue_locks l ON l.queue_id = q.queue_id AND l.state = 'active'
        ORDER BY q.queue_id`,
      params,
    );
    return rows.map((r) => ({ queueId: r.queue_id, count: Number(r.item_count), lockExpiresAt: r.lock_expires_at ? r.lock_expires_at.getTime() : null }));
  }

  /**
   * Runs `fn` under a savepoint: if it fails, only its own statements are undone and the
   * transaction stays usable (PostgreSQL aborts a whole transaction on any error otherwise).
   */
  async withSavepoint<T>(tx: EntityManager, fn: () => Promise<T>): Promise<T> {
    await tx.query('SAVEPOINT pushpop_step');
    try {
      const value = await fn();
      await tx.query('RELEASE SAVEPOINT pushpop_step');
      return value;
    } catch (error) {
      await tx.query('ROLLBACK TO SAVEPOINT pushpop_step');
      throw error;
    }
  }

  async ping(tx: EntityManager): Promise<void> {
    await tx.query('SELECT 1');
  }
}
