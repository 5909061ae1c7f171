import {
  segmentItems,
  withTags,
  type DelayedItem,
  type HeldItem,
  type ItemOrigin,
  type ItemTags,
  type LockState,
  type PackedSegment,
  type PopBudget,
  type RedrivenItem,
  type ReturnedEntry,
  type SegmentEntry,
} from './types.js';

/** Deleting a whole segment: every position lies between these. */
export const FIRST_POSITION = -2_147_483_648;
export const WHOLE_SEGMENT = 2_147_483_647;

const key = (priority: number, segment: number): string => `${priority}:${segment}`;
const NO_SHARED_LOCKS: ReadonlyMap<string, LockState | null> = new Map();
const NO_CREATED_LOCKS: ReadonlySet<string> = new Set();

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
 * A packed segment ({@link pack}) is netted as its inserts would be, and written after them.
 */
export class WriteSet {
  private readonly inserts = new Map<string, { priority: number; segment: number; rows: Map<number, SegmentEntry> }>();
  private readonly deletes = new Map<string, { priority: number; segment: number; from: number; through: number }>();
  private packsOf?: Map<string, { priority: number; segment: number; entries: readonly SegmentEntry[] }>;
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
  /** The queue row's shared-lock columns change. */
  sharedChanged = false;
  /** The queue's settings change. */
  settingsChanged = false;
  /** The queue's pop budget after the turn, when the turn drew from it or refilled it. */
  popBudget: PopBudget | undefined = undefined;
  private sharedLocksOf?: Map<string, LockState | null>;
  /** Shared locks to write (by id: the last write of a lock in the turn wins) or delete (null). Made on first use, as the rarer maps here. */
  get sharedLocks(): Map<string, LockState | null> {
    return (this.sharedLocksOf ??= new Map());
  }
  /** The shared-lock writes, without making the map when there are none. */
  sharedLockWrites(): ReadonlyMap<string, LockState | null> {
    return this.sharedLocksOf ?? NO_SHARED_LOCKS;
  }
  private createdLocksOf?: Set<string>;
  /** Ids of the shared locks this turn created: none has a row yet, so the write inserts them without looking for one. */
  get createdSharedLocks(): Set<string> {
    return (this.createdLocksOf ??= new Set());
  }
  /** {@link createdSharedLocks}, without making the set when there are none. */
  createdSharedLockIds(): ReadonlySet<string> {
    return this.createdLocksOf ?? NO_CREATED_LOCKS;
  }

  /**
   * Given-back items to add (an entry) or remove (null), by priority and origin. An item given
   * back and popped again in the same turn nets to nothing, unless it was stored before the
   * turn (then the removal stays).
   */
  private returnedOf?: Map<string, { priority: number; origin: ItemOrigin; entry: ReturnedEntry | null; stored: boolean }>;
  private get returned(): Map<string, { priority: number; origin: ItemOrigin; entry: ReturnedEntry | null; stored: boolean }> {
    return (this.returnedOf ??= new Map());
  }
  /** Items for the tail of the dead-letter queue, in order. */
  readonly deadLetters: HeldItem[] = [];
  /** Items a redrive sends to other queues, in order. */
  readonly redriven: RedrivenItem[] = [];
  metadataChanged = false;

  insert(priority: number, segment: number, entries: readonly SegmentEntry[]): void {
    if (entries.length === 0) return;
    const k = key(priority, segment);
    let pending = this.inserts.get(k);
    if (!pending) this.inserts.set(k, (pending = { priority, segment, rows: new Map() }));
    for (const entry of entries) pending.rows.set(entry.position, entry);
    this.metadataChanged = true;
  }

  /**
   * A segment brought back from the offload store, to be written as one packed row: its entries
   * must be at positions 0..n-1 with no delivery counts (as the store gives them back), and the
   * turn must not have deleted rows of the segment before; otherwise they are written as rows. Netted as inserts are (see the class doc): a delete
   * through its last position drops it, a delete of part of it leaves it whole (those items
   * are gone by the priority's `head_position`).
   */
  pack(priority: number, segment: number, entries: readonly SegmentEntry[]): void {
    if (entries.length === 0) return;
    if (this.deletes.has(key(priority, segment)) || !entries.every((e, i) => e.position === i && !e.deliveries)) {
      this.insert(priority, segment, entries);
      return;
    }
    (this.packsOf ??= new Map()).set(key(priority, segment), { priority, segment, entries });
    this.metadataChanged = true;
  }

  /** The segments packed this turn, as the write carries them. */
  packRows(): PackedSegment[] {
    return [...(this.packsOf?.values() ?? [])].map(({ priority, segment, entries }) => segmentItems(priority, segment, entries));
  }

  /** The entries of a segment packed this turn and not deleted since (positions ascending). */
  pendingPacked(priority: number, segment: number): readonly SegmentEntry[] {
    const pending = this.packsOf?.get(key(priority, segment));
    if (!pending) return [];
    const through = this.deletedThrough(priority, segment);
    return pending.entries.filter((e) => e.position > through);
  }

  /** An item given back goes to the stored given-back items (see {@link PriorityMetadata.returned}). */
  addReturned(priority: number, entry: ReturnedEntry): void {
    const k = `${priority}:${entry.segment}:${entry.position}`;
    const existing = this.returned.get(k);
    this.returned.set(k, { priority, origin: entry, entry, stored: existing?.stored ?? false });
    this.metadataChanged = true;
  }

  /** A given-back item was popped again (from the table, or added earlier in this turn). */
  removeReturned(priority: number, origin: ItemOrigin): void {
    const k = `${priority}:${origin.segment}:${origin.position}`;
    const existing = this.returned.get(k);
    if (existing && !existing.stored) this.returned.delete(k);
    else this.returned.set(k, { priority, origin: { segment: origin.segment, position: origin.position }, entry: null, stored: true });
    this.metadataChanged = true;
  }

  /** Given-back items this turn added (and did not pop again) and those it removed from the table. */
  returnedRows(): { inserts: (ReturnedEntry & { priority: number })[]; deletes: (ItemOrigin & { priority: number })[] } {
    const inserts: (ReturnedEntry & { priority: number })[] = [];
    const deletes: (ItemOrigin & { priority: number })[] = [];
    if (!this.returnedOf) return { inserts, deletes };
    for (const { priority, origin, entry, stored } of this.returnedOf.values()) {
      if (stored) deletes.push({ priority, segment: origin.segment, position: origin.position });
      if (entry) inserts.push({ priority, ...entry });
    }
    return { inserts, deletes };
  }

  /** Pending changes to one priority's given-back items: removed origins and added entries. */
  pendingReturned(priority: number): { removed: Set<string>; added: ReturnedEntry[] } {
    const removed = new Set<string>();
    const added: ReturnedEntry[] = [];
    for (const { priority: p, origin, entry, stored } of this.returnedOf?.values() ?? []) {
      if (p !== priority) continue;
      if (stored) removed.add(`${origin.segment}:${origin.position}`);
      if (entry) added.push(entry);
    }
    return { removed, added };
  }

  deleteRange(priority: number, segment: number, from: number, through: number): void {
    const k = key(priority, segment);
    const pending = this.inserts.get(k);
    if (pending) {
      for (const position of pending.rows.keys()) if (position <= through) pending.rows.delete(position);
      if (pending.rows.size === 0) this.inserts.delete(k);
    }
    const packed = this.packsOf?.get(k);
    if (packed && through >= packed.entries.length - 1) this.packsOf!.delete(k);
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
      (this.packsOf?.size ?? 0) === 0 &&
      this.delayedInserts.length === 0 &&
      this.delayedDeleteThrough === null &&
      this.dedupInserts.length === 0 &&
      !this.sharedChanged &&
      !this.settingsChanged &&
      (this.sharedLocksOf?.size ?? 0) === 0 &&
      (this.returnedOf?.size ?? 0) === 0 &&
      this.deadLetters.length === 0 &&
      this.redriven.length === 0
    );
  }

  deleteRows(): { priority: number; segment: number; from: number; through: number }[] {
    return [...this.deletes.values()];
  }

  insertRows(): ({ priority: number; segment: number; position: number; json: string; deliveries?: number } & ItemTags)[] {
    const rows: ({ priority: number; segment: number; position: number; json: string; deliveries?: number } & ItemTags)[] = [];
    for (const { priority, segment, rows: byPosition } of this.inserts.values()) {
      for (const position of [...byPosition.keys()].sort((a, b) => a - b)) {
        const entry = byPosition.get(position)!;
        const { json, deliveries } = entry;
        const row = deliveries ? { priority, segment, position, json, deliveries } : { priority, segment, position, json };
        rows.push(withTags(row, entry));
      }
    }
    return rows;
  }

  /** Pending inserts of one segment (positions ascending): what a fetch from the table would miss. */
  pendingInserts(priority: number, segment: number): SegmentEntry[] {
    const pending = this.inserts.get(key(priority, segment));
    if (!pending) return [];
    return [...pending.rows.values()].sort((a, b) => a.position - b.position);
  }
}
