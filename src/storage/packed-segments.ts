import type { StoredTurnWrite } from '../database/stored-queue.js';
import type { PackedSegment, SegmentEntry } from '../queue/core/types.js';

/**
 * How a packed segment (`TurnWrite.packs`: a segment brought back from the offload store, in the
 * actor's state) is stored: one row of `offloaded_segments` under the seed's state key of the
 * segment, `queue_<p>_seg_<n>`, whatever the offload store is. It never collides with an
 * offloaded segment's key (`offloaded_queue_…`), the offload store's reads and counts never see
 * it, and it goes with the queue's other rows of that table when the queue is deleted.
 */
export const packedSegmentKey = (priority: number, segment: number): string => `queue_${priority}_seg_${segment}`;

/**
 * A delete through this position takes the whole segment: the largest position the integer
 * column holds, which the core's whole-segment deletes give (`WHOLE_SEGMENT`).
 */
const LAST_POSITION = 2_147_483_647;

/** The SQL text of {@link packedSegmentKey} for a priority and segment given as SQL expressions. */
export const packedSegmentKeySql = (priority: string, segment: string): string => `'queue_' || ${priority} || '_seg_' || ${segment}`;

/**
 * A segment's entries as read: its item rows over its packed row's items, both ascending by
 * position. Where a row has a position the row is the item there (an item given back into a
 * packed head is written as a row); elsewhere the packed item is.
 */
export function rowsOverPacked(rows: readonly SegmentEntry[], packed: readonly SegmentEntry[]): SegmentEntry[] {
  if (packed.length === 0) return rows as SegmentEntry[];
  const entries: SegmentEntry[] = [];
  let r = 0;
  for (const item of packed) {
    while (r < rows.length && rows[r].position < item.position) entries.push(rows[r++]);
    if (r < rows.length && rows[r].position === item.position) entries.push(rows[r++]);
    else entries.push(item);
  }
  while (r < rows.length) entries.push(rows[r++]);
  return entries;
}

/**
 * A packed segment's items as rows at positions 0..n-1 (what a write sends when packing is off),
 * but for those the write deletes: a pack is kept whole when the turn pops part of it, and rows
 * are inserted after the deletes.
 */
function asRows(write: StoredTurnWrite, pack: PackedSegment): StoredTurnWrite['inserts'] {
  const through = Math.max(-1, write.deletes.find((d) => d.priority === pack.priority && d.segment === pack.segment)?.through ?? -1);
  return pack.items.slice(through + 1).map((json, i) => {
    const position = through + 1 + i;
    const from = pack.from?.[position];
    const headers = pack.headers?.[position];
    return {
      priority: pack.priority,
      segment: pack.segment,
      position,
      json,
      ...(from !== null && from !== undefined ? { from } : {}),
      ...(headers !== null && headers !== undefined ? { headers } : {}),
    };
  });
}

/**
 * A turn's write with its packed segments as the turn statement takes them: each pack saved as
 * a row of `offloaded_segments` (with the segments the in-database offload store saves), and,
 * for every segment the write deletes whole, its packed row deleted (the statement saves before
 * it deletes, so a segment packed after its whole delete in the same turn is not deleted).
 *
 * With `packing` off (during a rolling upgrade from a release that reads only segment rows,
 * see docs/operations.md) the packs are written as rows instead, as that release did; packed
 * rows written before are still read and deleted.
 */
export function withPackedSegments(write: StoredTurnWrite, packing: boolean): StoredTurnWrite {
  const packs = write.packs ?? [];
  let whole: string[] | undefined;
  for (const d of write.deletes) if (d.through >= LAST_POSITION) (whole ??= []).push(packedSegmentKey(d.priority, d.segment));
  if (packs.length === 0 && !whole) return write;
  if (!packing) {
    return {
      ...write,
      packs: [],
      inserts: packs.length > 0 ? [...write.inserts, ...packs.flatMap((p) => asRows(write, p))] : write.inserts,
      storeDeletes: whole ? [...write.storeDeletes, ...whole] : write.storeDeletes,
    };
  }
  const saved = new Set(packs.map((p) => packedSegmentKey(p.priority, p.segment)));
  return {
    ...write,
    storeSaves: [
      ...write.storeSaves,
      ...packs.map((p) => ({
        key: packedSegmentKey(p.priority, p.segment),
        items: p.items,
        ...(p.from ? { from: p.from } : {}),
        ...(p.headers ? { headers: p.headers } : {}),
      })),
    ],
    storeDeletes: whole ? [...write.storeDeletes, ...whole.filter((k) => !saved.has(k))] : write.storeDeletes,
  };
}
