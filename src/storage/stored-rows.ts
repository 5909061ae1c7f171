import type { StoredEntry, StoredHeldItem, StoredLock } from '../database/stored-queue.js';

/** A `queue_locks` / `shared_locks` row as read. */
export interface RawLockRow {
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

/** A lock's items from its parallel arrays (origins and deliveries absent in rows written before they were kept). */
export function heldItems(
  priorities: number[],
  items: string[],
  segments: string[] | null,
  positions: number[] | null,
  deliveries: number[] | null,
): StoredHeldItem[] {
  return items.map((json, i) => {
    const item: { priority: number; json: string; origin?: { segment: number; position: number }; deliveries?: number } = { priority: priorities[i], json };
    if (segments && positions) item.origin = { segment: Number(segments[i]), position: positions[i] };
    if (deliveries) item.deliveries = deliveries[i];
    return item;
  });
}

export function toStoredLock(row: RawLockRow): StoredLock {
  return {
    lockId: row.lock_id,
    state: row.state,
    items: heldItems(row.priorities, row.items, row.segments, row.positions, row.deliveries),
    createdAt: row.created_at.getTime(),
    expiresAt: row.expires_at.getTime(),
  };
}

/** A segment row as the core takes it (no `deliveries` for an item never delivered). */
export function toEntry(position: number, json: string, deliveries: number): StoredEntry {
  return deliveries > 0 ? { position, json, deliveries } : { position, json };
}
