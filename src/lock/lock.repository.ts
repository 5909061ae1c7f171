import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { LockState } from './lock-state.js';

/** The SQL of acknowledgement locks. Turn methods take the turn's transaction. */
@Injectable()
export class LockRepository {
  async load(tx: EntityManager, queueId: string): Promise<LockState | null> {
    const rows: { lock_id: string; state: 'active' | 'expired'; priorities: number[]; items: string[]; created_at: Date; expires_at: Date }[] = await tx.query(
      `SELECT lock_id, state, priorities, items, created_at, expires_at FROM queue_locks WHERE queue_id = $1`,
      [queueId],
    );
    const row = rows[0];
    if (!row) return null;
    return {
      lockId: row.lock_id,
      state: row.state,
      items: row.items.map((json, i) => ({ json, priority: row.priorities[i] })),
      createdAt: row.created_at.getTime(),
      expiresAt: row.expires_at.getTime(),
    };
  }

  /** Writes the lock, replacing any earlier one of the queue. */
  async save(tx: EntityManager, queueId: string, lock: LockState): Promise<void> {
    await tx.query(
      `INSERT INTO queue_locks (queue_id, lock_id, state, priorities, items, created_at, expires_at)
       VALUES ($1, $2, $3, $4::int[], $5::text[], to_timestamp($6 / 1000.0), to_timestamp($7 / 1000.0))
       ON CONFLICT (queue_id) DO UPDATE SET lock_id = EXCLUDED.lock_id, state = EXCLUDED.state, priorities = EXCLUDED.priorities,
         items = EXCLUDED.items, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at`,
      [queueId, lock.lockId, lock.state, lock.items.map((i) => i.priority), lock.items.map((i) => i.json), lock.createdAt, lock.expiresAt],
    );
  }

  async delete(tx: EntityManager, queueId: string): Promise<void> {
    await tx.query(`DELETE FROM queue_locks WHERE queue_id = $1`, [queueId]);
  }

  /**
   * Queues whose active lock expired by `now`, oldest first. Served by the partial index on
   * `expires_at`: the cost is proportional to the number of due locks, not of queues.
   */
  async findDue(tx: EntityManager, now: number, limit: number): Promise<string[]> {
    const rows: { queue_id: string }[] = await tx.query(
      `SELECT queue_id FROM queue_locks WHERE state = 'active' AND expires_at <= to_timestamp($1 / 1000.0) ORDER BY expires_at LIMIT $2`,
      [now, limit],
    );
    return rows.map((r) => r.queue_id);
  }
}
