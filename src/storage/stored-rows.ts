import type { HeldItem, LockState, SegmentEntry } from '../queue/core/types.js';

/** A `queue_locks` / `shared_locks` row as read. */
export interface RawLockRow {
  lock_id: string;
  state: 'active' | 'expired';
  priorities: number[];
  items: string[];
  segments: string[] | null;
  positions: number[] | null;
  deliveries: number[] | null;
  dead_lettered_from: (string | null)[] | null;
  headers: (string | null)[] | null;
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
  from: (string | null)[] | null = null,
  headers: (string | null)[] | null = null,
): HeldItem[] {
  return items.map((json, i) => {
    const item: { priority: number; json: string; origin?: { segment: number; position: number }; deliveries?: number; from?: string; headers?: string } = {
      priority: priorities[i],
      json,
    };
    if (segments && positions) item.origin = { segment: Number(segments[i]), position: positions[i] };
    if (deliveries) item.deliveries = deliveries[i];
    if (from && from[i] !== null && from[i] !== undefined) item.from = from[i]!;
    if (headers && headers[i] !== null && headers[i] !== undefined) item.headers = headers[i]!;
    return item;
  });
}

export function toLockState(row: RawLockRow): LockState {
  return {
    lockId: row.lock_id,
    state: row.state,
    items: heldItems(row.priorities, row.items, row.segments, row.positions, row.deliveries, row.dead_lettered_from, row.headers),
    createdAt: row.created_at.getTime(),
    expiresAt: row.expires_at.getTime(),
  };
}

/**
 * A segment row as the core takes it (no `deliveries` for an item never delivered, no `from`
 * for one never dead-lettered, no `headers` for one without).
 */
export function toEntry(position: number, json: string, deliveries: number, from: string | null = null, headers: string | null = null): SegmentEntry {
  const entry: { position: number; json: string; deliveries?: number; from?: string; headers?: string } =
    deliveries > 0 ? { position, json, deliveries } : { position, json };
  if (from !== null) entry.from = from;
  if (headers !== null) entry.headers = headers;
  return entry;
}
