import { Injectable } from '@nestjs/common';
import { UnitOfWork } from '../database/unit-of-work.js';
import { OffloadStore, type StoredSegment } from './offload-store.js';

/**
 * The default offload store: a table of its own in the service's database, keyed by queue id
 * first (like every table, so it can be distributed by queue). Turns write it with their own
 * statement (moves are atomic with the queue's metadata); the methods here read it, and serve
 * callers outside a turn.
 */
@Injectable()
export class DatabaseOffloadStore extends OffloadStore {
  constructor(private readonly uow: UnitOfWork) {
    super();
  }

  override get inDatabase(): boolean {
    return true;
  }

  async save(queueId: string, key: string, items: readonly string[], from?: readonly (string | null)[], headers?: readonly (string | null)[]): Promise<void> {
    await this.uow.autocommit.query(
      `INSERT INTO offloaded_segments (queue_id, key, items, dead_lettered_from, headers) VALUES ($1, $2, $3::text[], $4::varchar[], $5::text[])
       ON CONFLICT (queue_id, key) DO UPDATE SET items = EXCLUDED.items, dead_lettered_from = EXCLUDED.dead_lettered_from, headers = EXCLUDED.headers,
         created_at = now()`,
      [queueId, key, items, from ?? null, headers ?? null],
    );
  }

  /**
   * The items come as one JSON array's text, parsed by `JSON.parse`: `pg` parses a `text[]`
   * character by character in JavaScript, which cost a deep queue's service about 6 µs per
   * push+pop pair (a segment of 100 items of 200 bytes brought back every 100 pops).
   */
  async load(queueId: string, key: string): Promise<StoredSegment | undefined> {
    const rows = await this.uow.autocommit.query<{ items: string; dead_lettered_from: (string | null)[] | null; headers: (string | null)[] | null }>(
      `SELECT array_to_json(items)::text AS items, dead_lettered_from, headers FROM offloaded_segments WHERE queue_id = $1 AND key = $2`,
      [queueId, key],
    );
    const row = rows[0];
    if (!row) return undefined;
    const items = JSON.parse(row.items) as string[];
    return { items, ...(row.dead_lettered_from ? { from: row.dead_lettered_from } : {}), ...(row.headers ? { headers: row.headers } : {}) };
  }

  async delete(queueId: string, keys: readonly string[]): Promise<void> {
    if (keys.length === 0) return;
    await this.uow.autocommit.query(`DELETE FROM offloaded_segments WHERE queue_id = $1 AND key = ANY($2::varchar[])`, [queueId, keys]);
  }

  async countSegments(): Promise<number> {
    // Not the packed segments the table also holds (in the actors' state, see storage/packed-segments.ts).
    const rows = await this.uow.autocommit.query<{ n: string }>(`SELECT count(*) AS n FROM offloaded_segments WHERE key LIKE 'offloaded\\_%'`);
    return Number(rows[0]?.n ?? 0);
  }
}
