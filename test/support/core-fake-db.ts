import { expect } from 'vitest';
import { drive, type SyncRowReader } from '../../src/queue/core/core-driver.js';
import { QueueCore, type PopOutcome } from '../../src/queue/core/queue-core.js';
import { WHOLE_SEGMENT } from '../../src/queue/core/write-set.js';
import {
  NO_DELAYED,
  type DelayedItem,
  type DelayedSummary,
  type DueFetch,
  type HeldItem,
  type LockState,
  Needed,
  type OrNeed,
  type SegmentFetch,
  type SegmentRef,
  type TurnWrite,
} from '../../src/queue/core/types.js';

/**
 * The core against a fake database: a table of segment rows and an offload store, driven the
 * way the turn runner drives it (fetch what is missing, plan offloads, write, commit), and
 * checked after every turn against a model of the queue (per priority a FIFO list).
 */
export class FakeDb {
  readonly rows = new Map<string, Map<number, string>>();
  readonly store = new Map<string, string[]>();
  /** Packed in-state segments (`TurnWrite.packs`): their items at positions 0..n-1, popped ones kept. */
  readonly packed = new Map<string, string[]>();
  record: { version: number; priorities: Record<string, ReturnType<QueueCore['meta']> & object>; lock: LockState | null; delayed: DelayedSummary } | undefined;
  /** `delayed_items`, in no particular order. */
  delayedRows: DelayedItem[] = [];
  /** `dedup_ids`: id → expiry (ms). */
  readonly dedup = new Map<string, number>();
  /** Store calls fail while this returns true. */
  storeFails: (op: 'load' | 'save') => boolean = () => false;
  fetches = 0;

  fetch(ref: SegmentRef): SegmentFetch {
    this.fetches += 1;
    const k = `${ref.priority}:${ref.segment}`;
    if (ref.from === 'state') {
      // As the repository reads them: the rows, and the packed items where no row has their position.
      const rows = new Map<number, string>((this.packed.get(k) ?? []).map((json, position) => [position, json]));
      for (const [position, json] of this.rows.get(k) ?? []) rows.set(position, json);
      return { entries: [...rows.entries()].sort((a, b) => a[0] - b[0]).map(([position, json]) => ({ position, json })) };
    }
    if (this.storeFails('load')) return { failed: true };
    const items = this.store.get(k);
    return { entries: items?.map((json, position) => ({ position, json })) };
  }

  /** What the runner's due-items read returns: due at `now`, `(dueAt, seq)` order, at most `limit`, and the next due time. */
  fetchDue(now: number, limit: number): DueFetch {
    const sorted = [...this.delayedRows].sort((a, b) => a.dueAt - b.dueAt || a.seq - b.seq);
    const due = sorted.filter((d) => d.dueAt <= now);
    const items = due.slice(0, limit);
    return { items, nextDueAt: sorted[items.length]?.dueAt ?? null };
  }

  liveDedup(ids: readonly string[], now: number): Set<string> {
    return new Set(ids.filter((id) => (this.dedup.get(id) ?? -Infinity) > now));
  }

  /** What the runner reads for the core, from this database (`now` for dedup ids). */
  reader(now: number): SyncRowReader {
    return {
      segments: (refs) => refs.map((ref) => this.fetch(ref)),
      dueItems: (at, limit) => this.fetchDue(at, limit),
      liveDedupIds: (ids) => this.liveDedup(ids, now),
      lockRows: (need) => {
        throw new Error(`this database keeps no shared locks (asked for ${need.kind})`);
      },
    };
  }

  apply(write: TurnWrite): void {
    if (write.deleteQueue) {
      this.rows.clear();
      this.packed.clear();
      this.record = undefined;
      this.delayedRows = [];
      this.dedup.clear();
      return;
    }
    expect(write.expectedVersion).toBe(this.record?.version ?? null);
    for (const d of write.deletes) {
      if (d.through === WHOLE_SEGMENT) this.packed.delete(`${d.priority}:${d.segment}`);
      const rows = this.rows.get(`${d.priority}:${d.segment}`);
      if (!rows) continue;
      for (const position of [...rows.keys()]) {
        expect(position >= d.from || position > d.through, `a row at ${position} below the delete's first position ${d.from}`).toBe(true);
        if (position >= d.from && position <= d.through) rows.delete(position);
      }
    }
    for (const i of write.inserts) {
      const k = `${i.priority}:${i.segment}`;
      if (!this.rows.has(k)) this.rows.set(k, new Map());
      const rows = this.rows.get(k)!;
      expect(rows.has(i.position), `duplicate key ${k}:${i.position}`).toBe(false);
      rows.set(i.position, i.json);
    }
    for (const p of write.packs ?? []) this.packed.set(`${p.priority}:${p.segment}`, [...p.items]);
    const lock = write.lock ? (write.lock.op === 'upsert' ? write.lock.lock : null) : (this.record?.lock ?? null);
    const through = write.delayedDeleteThrough;
    if (through) this.delayedRows = this.delayedRows.filter((d) => d.dueAt > through.dueAt || (d.dueAt === through.dueAt && d.seq > through.seq));
    for (const d of write.delayedInserts) {
      expect(
        this.delayedRows.some((r) => r.dueAt === d.dueAt && r.seq === d.seq),
        `duplicate delayed key ${d.dueAt}:${d.seq}`,
      ).toBe(false);
      this.delayedRows.push(d);
    }
    for (const d of write.dedupInserts) this.dedup.set(d.dedupId, d.expiresAt);
    // Null: the turn left the row's delayed columns as they were.
    const delayed = write.delayed ?? this.record?.delayed ?? NO_DELAYED;
    this.record = { version: write.newVersion, priorities: structuredClone(write.priorities), lock, delayed };
    // The row's summary agrees with the rows.
    expect(delayed.count, 'delayed_count').toBe(this.delayedRows.length);
    expect(delayed.nextDueAt, 'next_due_at').toBe(this.delayedRows.length === 0 ? null : Math.min(...this.delayedRows.map((d) => d.dueAt)));
  }

  /** Activates the queue afresh from what is stored (a deactivated actor, another process). */
  load(settings = SETTINGS): QueueCore {
    if (!this.record) return QueueCore.absent(settings);
    return QueueCore.fromRecord({
      version: this.record.version,
      settings,
      priorities: this.record.priorities,
      lock: this.record.lock,
      delayed: this.record.delayed,
    });
  }

  /** Every stored item of a priority in queue order, reading rows and the store as the metadata says. */
  stored(priority: number): string[] {
    const meta = this.record?.priorities[String(priority)];
    if (!meta) return [];
    const out: string[] = [];
    for (let s = meta.head_segment; s <= meta.tail_segment; s++) {
      const offloaded = meta.head_offloaded_segment !== null && s >= meta.head_offloaded_segment && s <= meta.tail_offloaded_segment!;
      // Packed items below the head's position were popped.
      const first = s === meta.head_segment ? meta.head_position : -Infinity;
      const byPosition = new Map<number, string>();
      (this.packed.get(`${priority}:${s}`) ?? []).forEach((json, position) => position >= first && byPosition.set(position, json));
      for (const [position, json] of this.rows.get(`${priority}:${s}`) ?? []) byPosition.set(position, json);
      const rows = [...byPosition.entries()].sort((a, b) => a[0] - b[0]).map(([, json]) => json);
      if (offloaded) {
        out.push(...rows, ...(this.store.get(`${priority}:${s}`) ?? ['<missing offloaded segment>']));
      } else {
        out.push(...rows);
      }
    }
    return out;
  }
}

export const SETTINGS = { segmentSize: 3, bufferSegments: 1 };

/** A reader for a queue that has nothing stored: every read finds nothing. */
export const NOTHING_STORED: SyncRowReader = {
  segments: (refs) => refs.map(() => ({ entries: [] })),
  dueItems: () => ({ items: [], nextDueAt: null }),
  liveDedupIds: () => new Set(),
  lockRows: (need) => {
    throw new Error(`no shared locks stored (asked for ${need.kind})`);
  },
};

/**
 * Runs a core operation, fetching what it asks for, as the runner does (`now` for dedup ids).
 * One round of reads at most: a call names all it needs at once, and nothing changes this
 * database under it.
 */
export function withFetch<T>(db: FakeDb, core: QueueCore, fn: () => OrNeed<T>, now = 0): T {
  return drive(core, fn, db.reader(now), 1);
}

/** The answer of a core call made without a driver: a spec that makes one expects it to need no read. */
export function answered<T>(value: OrNeed<T>): T {
  if (value instanceof Needed) throw new Error(`a read was needed: ${JSON.stringify(value.need)}`);
  return value;
}

/** Ends a turn as the runner does: load back, offload, write, commit. */
export function endTurn(db: FakeDb, core: QueueCore): TurnWrite | undefined {
  withFetch(db, core, () => core.offload.loadBack());
  const moves = withFetch(db, core, () => core.offload.plan());
  const failed = new Set<number>();
  for (const move of moves) {
    if (failed.has(move.priority)) continue;
    if (db.storeFails('save')) {
      failed.add(move.priority);
      continue;
    }
    db.store.set(`${move.priority}:${move.segment}`, [...move.items]);
    core.offload.offloaded(move.priority, move.segment);
  }
  const write = core.pendingWrite(() => 1000);
  if (write) db.apply(write);
  for (const d of core.storeDeletes()) db.store.delete(`${d.priority}:${d.segment}`);
  core.committed(write);
  return write;
}

export const item = (priority: number, n: number): HeldItem => ({ priority, json: JSON.stringify({ p: priority, n }) });
export const items = (outcome: OrNeed<PopOutcome>): string[] => {
  const answer = answered(outcome);
  return 'items' in answer ? answer.items.map((i) => i.json) : [];
};

/** A model: per priority a FIFO list of JSON texts, and the lock's items. */
export class Model {
  readonly lists = new Map<number, string[]>();
  lock: { id: string; items: HeldItem[]; expiresAt: number } | undefined;
  push(i: HeldItem): void {
    if (!this.lists.has(i.priority)) this.lists.set(i.priority, []);
    this.lists.get(i.priority)!.push(i.json);
  }
  pop(depth: number): HeldItem[] {
    const out: HeldItem[] = [];
    for (const p of [...this.lists.keys()].sort((a, b) => a - b)) {
      const list = this.lists.get(p)!;
      while (out.length < depth && list.length > 0) out.push({ priority: p, json: list.shift()! });
      if (list.length === 0) this.lists.delete(p);
    }
    return out;
  }
  giveBack(held: HeldItem[]): void {
    const byP = new Map<number, string[]>();
    for (const h of held) byP.set(h.priority, [...(byP.get(h.priority) ?? []), h.json]);
    for (const [p, jsons] of byP) this.lists.set(p, [...jsons, ...(this.lists.get(p) ?? [])]);
  }
  count(): number {
    let n = 0;
    for (const l of this.lists.values()) n += l.length;
    return n;
  }
}

/** The stored queue and the core's view agree with the model; memory holds only the window. */
export function expectConsistent(db: FakeDb, core: QueueCore, model: Model, label: string, loadsMayHaveFailed = false): void {
  const priorities = new Set([...model.lists.keys(), ...Object.keys(db.record?.priorities ?? {}).map(Number)]);
  for (const p of priorities) expect(db.stored(p), `${label}: stored items of priority ${p}`).toEqual(model.lists.get(p) ?? []);
  expect(core.count, `${label}: count`).toBe(model.count());
  for (const p of core.priorityList()) {
    const meta = core.meta(p)!;
    for (const s of core.cachedSegments(p)) {
      expect(
        s === meta.tail_segment || (s >= meta.head_segment && s <= meta.head_segment + SETTINGS.bufferSegments),
        `${label}: segment ${s} of priority ${p} in memory outside the window ${JSON.stringify(meta)}`,
      ).toBe(true);
    }
    if (meta.head_offloaded_segment !== null) {
      // At rest nothing in the buffer is offloaded; after failed loads the range may start at the head, never before.
      const lowest = loadsMayHaveFailed ? meta.head_segment : meta.head_segment + SETTINGS.bufferSegments + 1;
      expect(meta.head_offloaded_segment, `${label}: offloaded range starts too low`).toBeGreaterThanOrEqual(lowest);
      expect(meta.tail_offloaded_segment!, `${label}: offloaded range reaches the tail`).toBeLessThan(meta.tail_segment);
    }
  }
}
