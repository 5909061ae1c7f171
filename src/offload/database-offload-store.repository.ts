import { Injectable } from '@nestjs/common';
import { OffloadContext, OffloadStore } from './offload-store.js';

/**
 * The default offload store: a table of its own in the service's database, written in the
 * turn's transaction, so moving a segment out or back is atomic with the queue's metadata.
 */
@Injectable()
export class DatabaseOffloadStore extends OffloadStore {
  readonly transactional = true;

  async save(key: string, queueId: string, items: string[], { tx }: OffloadContext): Promise<void> {
    await tx.query(
      `INSERT INTO offloaded_segments (key, queue_id, items) VALUES ($1, $2, $3::text[])
       ON CONFLICT (key) DO UPDATE SET items = EXCLUDED.items, queue_id = EXCLUDED.queue_id, created_at = now()`,
      [key, queueId, items],
    );
  }

  async load(key: string, { tx }: OffloadContext): Promise<string[] | undefined> {
    const rows: { items: string[] }[] = await tx.query(`SELECT items FROM offloaded_segments WHERE key = $1`, [key]);
    return rows[0]?.items;
  }

  async delete(keys: string[], { tx }: OffloadContext): Promise<void> {
    if (keys.length === 0) return;
    await tx.query(`DELETE FROM offloaded_segments WHERE key = ANY($1::varchar[])`, [keys]);
  }

  async countSegments({ tx }: OffloadContext): Promise<number> {
    const rows: { n: string }[] = await tx.query(`SELECT count(*) AS n FROM offloaded_segments`);
    return Number(rows[0]?.n ?? 0);
  }
}
