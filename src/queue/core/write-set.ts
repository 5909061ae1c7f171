import type { DelayedItem, LockState, SegmentEntry } from './types.js';

/** Deleting a whole segment: every position lies between these. */
export const FIRST_POSITION = -2_147_483_648;
export const WHOLE_SEGMENT = 2_147_483_647;

const key = (priority: number, segment: number): string => `${priority}:${segment}`;

/**
 * The row changes of one turn, accumulated operation by operation and netted so that one
 * statement can apply them: deletes first, then inserts.
 *
 * A delete covers positions `from..through` of a segment; no row of the segment lies below
 * `from` (its head's first item, everything before it is gone), so the statement's index scan
 * starts there instead of walking the entries of rows popped earlier.
 *
 * Netting rule: a delete through position P of a segment drops the turn's own pending inserts
 * at positions <= P there (an item pushed and popped in the same turn never reaches the
 * table); an insert recorded after a delete is kept, and applying deletes before inserts makes
 * it survive (a priority emptied and refilled in one turn reuses segment and position numbers).
 */
export class WriteSet {
  private readonly inserts = new Map<string, { priority: number; segment: number; rows: Map<number, string> }>();
  private readonly deletes = new Map<string, { priority: number; segment: number; from: number; through: number }>();
  lock: { op: 'upsert'; lock: LockState } | { op: 'delete' } | undefined;
  /** Offloaded segments to delete from the offload store once the turn has committed. */
  readonly storeDeletes: { priority: number; segment: number }[] = [];
  /** Delayed items pushed this turn (never due in the turn that pushed them: a delay is at least a second). */
  readonly delayedInserts: DelayedItem[] = [];
  /** Stored delayed items through this `(dueAt, seq)` moved to their priorities this turn. */
  delayedDeleteThrough: { dueAt: number; seq: number } | null = null;
  /** Deduplication ids accepted this turn. */
  readonly dedupInserts: { dedupId: string; expiresAt: number }[] = [];
  /** The queue row's delayed-item columns change (items put aside or moved, or the earliest due time). */
  delayedChanged = false;
  metadataChanged = false;

  insert(priority: number, segment: number, entries: readonly SegmentEntry[]): void {
    if (entries.length === 0) return;
    const k = key(priority, segment);
    let pending = this.inserts.get(k);
    if (!pending) this.inserts.set(k, (pending = { priority, segment, rows: new Map() }));
    for (const entry of entries) pending.rows.set(entry.position, entry.json);
    this.metadataChanged = true;
  }

  deleteRange(priority: number, segment: number, from: number, through: number): void {
    const k = key(priority, segment);
    const pending = this.inserts.get(k);
    if (pending) {
      for (const position of pending.rows.keys()) if (position <= through) pending.rows.delete(position);
      if (pending.rows.size === 0) this.inserts.delete(k);
    }
    const existing = this.deletes.get(k);
    this.deletes.set(k, { priority, segment, from: Math.min(from, existing?.from ?? from), through: Math.max(through, existing?.through ?? through) });
    this.metadataChanged = true;
  }

  deleteSegment(priority: number, segment: number): void {
    this.deleteRange(priority, segment, FIRST_POSITION, WHOLE_SEGMENT);
  }

  /** Through which position the turn deletes a segment's rows (-Infinity: none). */
  deletedThrough(priority: number, segment: number): number {
    return this.deletes.get(key(priority, segment))?.through ?? -Infinity;
  }

  /** Whether the turn changed anything that must be written. */
  get isEmpty(): boolean {
    return (
      !this.metadataChanged &&
      this.lock === undefined &&
      this.inserts.size === 0 &&
      this.deletes.size === 0 &&
      this.delayedInserts.length === 0 &&
      this.delayedDeleteThrough === null &&
      this.dedupInserts.length === 0
    );
  }

  deleteRows(): { priority: number; segment: number; from: number; through: number }[] {
    return [...this.deletes.values()];
  }

  insertRows(): { priority: number; segment: number; position: number; json: string }[] {
    const rows: { priority: number; segment: number; position: number; json: string }[] = [];
    for (const { priority, segment, rows: byPosition } of this.inserts.values()) {
      for (const position of [...byPosition.keys()].sort((a, b) => a - b)) rows.push({ priority, segment, position, json: byPosition.get(position)! });
    }
    return rows;
  }

  /** Pending inserts of one segment (positions ascending): what a fetch from the table would miss. */
  pendingInserts(priority: number, segment: number): SegmentEntry[] {
    const pending = this.inserts.get(key(priority, segment));
    if (!pending) return [];
    return [...pending.rows.entries()].sort((a, b) => a[0] - b[0]).map(([position, json]) => ({ position, json }));
  }
}
