import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_DUE_PER_TURN, QueueCore, type PopOutcome } from './queue-core.js';
import {
  MissingDedupIds,
  MissingDueItems,
  MissingSegments,
  NO_DELAYED,
  type DelayedItem,
  type DelayedSummary,
  type DueFetch,
  type HeldItem,
  type LockState,
  type SegmentFetch,
  type SegmentRef,
  type TurnWrite,
} from './types.js';
import { FIRST_POSITION, WHOLE_SEGMENT } from './write-set.js';
import { drive, type SyncRowReader } from './core-driver.js';

/**
 * The core against a fake database: a table of segment rows and an offload store, driven the
 * way the turn runner drives it (fetch what is missing, plan offloads, write, commit), and
 * checked after every turn against a model of the queue (per priority a FIFO list).
 */
class FakeDb {
  readonly rows = new Map<string, Map<number, string>>();
  readonly store = new Map<string, string[]>();
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
      const rows = this.rows.get(k) ?? new Map<number, string>();
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
      this.record = undefined;
      this.delayedRows = [];
      this.dedup.clear();
      return;
    }
    expect(write.expectedVersion).toBe(this.record?.version ?? null);
    for (const d of write.deletes) {
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
    const lock = write.lock ? (write.lock.op === 'upsert' ? write.lock.lock : null) : (this.record?.lock ?? null);
    const through = write.delayedDeleteThrough;
    if (through) this.delayedRows = this.delayedRows.filter((d) => d.dueAt > through.dueAt || (d.dueAt === through.dueAt && d.seq > through.seq));
    for (const d of write.delayedInserts) {
      expect(this.delayedRows.some((r) => r.dueAt === d.dueAt && r.seq === d.seq), `duplicate delayed key ${d.dueAt}:${d.seq}`).toBe(false);
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
    return QueueCore.fromRecord({ version: this.record.version, settings, priorities: this.record.priorities, lock: this.record.lock, delayed: this.record.delayed });
  }

  /** Every stored item of a priority in queue order, reading rows and the store as the metadata says. */
  stored(priority: number): string[] {
    const meta = this.record?.priorities[String(priority)];
    if (!meta) return [];
    const out: string[] = [];
    for (let s = meta.head_segment; s <= meta.tail_segment; s++) {
      const offloaded = meta.head_offloaded_segment !== null && s >= meta.head_offloaded_segment && s <= meta.tail_offloaded_segment!;
      const rows = [...(this.rows.get(`${priority}:${s}`) ?? new Map<number, string>()).entries()].sort((a, b) => a[0] - b[0]).map(([, json]) => json);
      if (offloaded) {
        out.push(...rows, ...(this.store.get(`${priority}:${s}`) ?? ['<missing offloaded segment>']));
      } else {
        out.push(...rows);
      }
    }
    return out;
  }
}

const SETTINGS = { segmentSize: 3, bufferSegments: 1 };

/** A reader for a queue that has nothing stored: every read finds nothing. */
const NOTHING_STORED: SyncRowReader = {
  segments: (refs) => refs.map(() => ({ entries: [] })),
  dueItems: () => ({ items: [], nextDueAt: null }),
  liveDedupIds: () => new Set(),
  lockRows: (need) => {
    throw new Error(`no shared locks stored (asked for ${need.kind})`);
  },
};

/** Runs a core operation, fetching what it asks for, as the runner does (`now` for dedup ids). */
function withFetch<T>(db: FakeDb, core: QueueCore, fn: () => T, now = 0): T {
  return drive(core, fn, db.reader(now));
}

/** Ends a turn as the runner does: load back, offload, write, commit. */
function endTurn(db: FakeDb, core: QueueCore): TurnWrite | undefined {
  withFetch(db, core, () => core.loadBack());
  const moves = withFetch(db, core, () => core.planOffload());
  const failed = new Set<number>();
  for (const move of moves) {
    if (failed.has(move.priority)) continue;
    if (db.storeFails('save')) {
      failed.add(move.priority);
      continue;
    }
    db.store.set(`${move.priority}:${move.segment}`, [...move.items]);
    core.offloaded(move.priority, move.segment);
  }
  const write = core.pendingWrite(() => 1000);
  if (write) db.apply(write);
  for (const d of core.storeDeletes()) db.store.delete(`${d.priority}:${d.segment}`);
  core.committed(write);
  return write;
}

const item = (priority: number, n: number): HeldItem => ({ priority, json: JSON.stringify({ p: priority, n }) });
const items = (outcome: PopOutcome): string[] => ('items' in outcome ? outcome.items.map((i) => i.json) : []);

/** A model: per priority a FIFO list of JSON texts, and the lock's items. */
class Model {
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
function expectConsistent(db: FakeDb, core: QueueCore, model: Model, label: string, loadsMayHaveFailed = false): void {
  const priorities = new Set([...model.lists.keys(), ...Object.keys(db.record?.priorities ?? {}).map(Number)]);
  for (const p of priorities) expect(db.stored(p), `${label}: stored items of priority ${p}`).toEqual(model.lists.get(p) ?? []);
  expect(core.count, `${label}: count`).toBe(model.count());
  for (const p of core.priorityList()) {
    const meta = core.meta(p)!;
    for (const s of core.cachedSegments(p)) {
      expect(s === meta.tail_segment || (s >= meta.head_segment && s <= meta.head_segment + SETTINGS.bufferSegments), `${label}: segment ${s} of priority ${p} in memory outside the window ${JSON.stringify(meta)}`).toBe(true);
    }
    if (meta.head_offloaded_segment !== null) {
      // At rest nothing in the buffer is offloaded; after failed loads the range may start at the head, never before.
      const lowest = loadsMayHaveFailed ? meta.head_segment : meta.head_segment + SETTINGS.bufferSegments + 1;
      expect(meta.head_offloaded_segment, `${label}: offloaded range starts too low`).toBeGreaterThanOrEqual(lowest);
      expect(meta.tail_offloaded_segment!, `${label}: offloaded range reaches the tail`).toBeLessThan(meta.tail_segment);
    }
  }
}

describe('QueueCore', () => {
  it('a new queue: pops find nothing and write nothing; the first push creates it at the version given', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    expect(core.pop(5)).toEqual({ items: [] });
    expect(core.view()).toBeUndefined();
    expect(endTurn(db, core)).toBeUndefined();
    core.push([item(0, 1)]);
    const write = endTurn(db, core)!;
    expect(write).toMatchObject({ expectedVersion: null, newVersion: 1000, itemCount: 1, deleteQueue: false });
    expect(write.inserts).toEqual([{ priority: 0, segment: 0, position: 0, json: item(0, 1).json }]);
    expect(core.version).toBe(1000);
    core.push([item(0, 2)]);
    expect(endTurn(db, core)).toMatchObject({ expectedVersion: 1000, newVersion: 1001 });
  });

  it('pops lowest priority first, FIFO within a priority, spilling over segments and priorities', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    core.push([item(2, 0), item(1, 0), item(1, 1), item(1, 2), item(1, 3), item(2, 1)]);
    endTurn(db, core);
    expect(core.meta(1)).toMatchObject({ head_segment: 0, tail_segment: 1, count: 4, next_position: 1 });
    expect(items(core.pop(5))).toEqual([item(1, 0), item(1, 1), item(1, 2), item(1, 3), item(2, 0)].map((i) => i.json));
    expect(core.meta(1)).toBeUndefined();
    expect(core.meta(2)).toMatchObject({ count: 1, head_position: 1 });
    const write = endTurn(db, core)!;
    expect(write.deletes).toEqual(
      expect.arrayContaining([
        { priority: 1, segment: 0, from: FIRST_POSITION, through: WHOLE_SEGMENT },
        { priority: 1, segment: 1, from: FIRST_POSITION, through: WHOLE_SEGMENT },
        { priority: 2, segment: 0, from: 0, through: 0 },
      ]),
    );
    expect(db.stored(2)).toEqual([item(2, 1).json]);
  });

  it('an item pushed and popped in the same turn never reaches the table', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    core.push([item(0, 0)]);
    endTurn(db, core);
    core.push([item(0, 1), item(0, 2)]);
    expect(items(core.pop(2))).toEqual([item(0, 0).json, item(0, 1).json]);
    const write = endTurn(db, core)!;
    expect(write.inserts).toEqual([{ priority: 0, segment: 0, position: 2, json: item(0, 2).json }]);
    expect(write.deletes).toEqual([{ priority: 0, segment: 0, from: 0, through: 1 }]);
    expect(db.stored(0)).toEqual([item(0, 2).json]);
  });

  it('a priority emptied and refilled in one turn reuses segment 0 and position 0: deletes apply before inserts', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    core.push([item(0, 0)]);
    endTurn(db, core);
    expect(items(core.pop(1))).toEqual([item(0, 0).json]);
    core.push([item(0, 1)]);
    const write = endTurn(db, core)!;
    expect(write.deletes).toEqual([{ priority: 0, segment: 0, from: FIRST_POSITION, through: WHOLE_SEGMENT }]);
    expect(write.inserts).toEqual([{ priority: 0, segment: 0, position: 0, json: item(0, 1).json }]);
    expect(db.stored(0)).toEqual([item(0, 1).json]);
  });

  it('a freshly activated core asks for the segments a pop needs, once, and pops the same items', () => {
    const db = new FakeDb();
    const first = QueueCore.absent(SETTINGS);
    first.push([0, 1, 2, 3, 4].map((n) => item(0, n)));
    endTurn(db, first);
    const core = db.load();
    expect(() => core.pop(4)).toThrow(MissingSegments);
    try {
      core.pop(4);
    } catch (error) {
      expect((error as MissingSegments).refs).toEqual([
        { priority: 0, segment: 0, from: 'state', purpose: 'use' },
        { priority: 0, segment: 1, from: 'state', purpose: 'use' },
      ]);
    }
    expect(core.count, 'nothing changed by the refused attempt').toBe(5);
    expect(items(withFetch(db, core, () => core.pop(4)))).toEqual([0, 1, 2, 3].map((n) => item(0, n).json));
  });

  it('pushing to a tail it does not hold, then reading that segment in the same turn, sees the pushed items', () => {
    const db = new FakeDb();
    const first = QueueCore.absent(SETTINGS);
    first.push([item(0, 0)]);
    endTurn(db, first);
    const core = db.load();
    core.push([item(0, 1)]);
    expect(items(withFetch(db, core, () => core.pop(2)))).toEqual([item(0, 0).json, item(0, 1).json]);
    endTurn(db, core);
    expect(db.stored(0)).toEqual([]);
  });

  describe('locks', () => {
    const locked = (): { db: FakeDb; core: QueueCore; lock: LockState } => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push([item(0, 0), item(1, 0), item(0, 1), item(1, 1)]);
      endTurn(db, core);
      const outcome = core.pop(3, { lockId: 'L1', now: 1000, ttlMs: 30_000 });
      expect(outcome).toMatchObject({ lock: { lockId: 'L1', state: 'active', createdAt: 1000, expiresAt: 31_000 } });
      endTurn(db, core);
      return { db, core, lock: (outcome as { lock: LockState }).lock };
    };

    it('while a lock lives every pop is refused and nothing changes', () => {
      const { db, core, lock } = locked();
      expect(core.pop(1)).toEqual({ locked: lock });
      expect(core.pop(1, { lockId: 'L2', now: 2000, ttlMs: 1000 })).toEqual({ locked: lock });
      expect(endTurn(db, core)).toBeUndefined();
      expect(db.record!.lock).toEqual(lock);
    });

    it('checks in the contract order: no lock, expired, wrong id', () => {
      const core = QueueCore.absent(SETTINGS);
      expect(core.acknowledge('x')).toBe('LOCK_NOT_FOUND');
      const { db, core: c } = locked();
      expect(c.acknowledge('wrong')).toBe('INVALID_LOCK_ID');
      expect(c.extendLock('wrong', 0, 1)).toBe('INVALID_LOCK_ID');
      expect(c.release('wrong')).toBe('INVALID_LOCK_ID');
      expect(endTurn(db, c)).toBeUndefined();
      expect(c.expireLock(30_999)).toBeUndefined();
      expect(c.expireLock(31_000)).toBe(3);
      endTurn(db, c);
      expect(c.acknowledge('L1')).toBe('LOCK_EXPIRED');
      expect(c.acknowledge('other')).toBe('LOCK_EXPIRED');
    });

    it('acknowledge removes the items for good', () => {
      const { db, core } = locked();
      expect(core.acknowledge('L1')).toBe(3);
      expect(endTurn(db, core)!.lock).toEqual({ op: 'delete' });
      expect(db.record!.lock).toBeNull();
      expect(items(core.pop(10))).toEqual([item(1, 1).json]);
    });

    it('expiry and release give the items back to the front of their original priorities, in order, ahead of later pushes', () => {
      for (const end of ['expire', 'release'] as const) {
        const { db, core } = locked();
        core.push([item(0, 9), item(1, 9)]);
        endTurn(db, core);
        if (end === 'expire') expect(core.expireLock(31_000)).toBe(3);
        else expect(core.release('L1')).toBe(3);
        endTurn(db, core);
        expect(db.stored(0), end).toEqual([item(0, 0), item(0, 1), item(0, 9)].map((i) => i.json));
        expect(db.stored(1), end).toEqual([item(1, 0), item(1, 1), item(1, 9)].map((i) => i.json));
        expect(items(core.pop(10)), end).toEqual([item(0, 0), item(0, 1), item(0, 9), item(1, 0), item(1, 1), item(1, 9)].map((i) => i.json));
      }
    });

    it('extend sets the expiry from now', () => {
      const { db, core } = locked();
      expect(core.extendLock('L1', 20_000, 60_000)).toMatchObject({ expiresAt: 80_000 });
      endTurn(db, core);
      expect(core.expireLock(79_999)).toBeUndefined();
      expect(db.load().lock).toMatchObject({ expiresAt: 80_000, items: expect.any(Array) });
    });

    it('items returned into a priority that emptied meanwhile start it again at segment 0', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push([item(4, 0)]);
      endTurn(db, core);
      core.pop(1, { lockId: 'L', now: 0, ttlMs: 10 });
      endTurn(db, core);
      expect(core.meta(4)).toBeUndefined();
      core.expireLock(10);
      endTurn(db, core);
      expect(core.meta(4)).toMatchObject({ head_segment: 0, tail_segment: 0, count: 1, next_position: 1, head_position: 0 });
      expect(db.stored(4)).toEqual([item(4, 0).json]);
    });
  });

  describe('offloading', () => {
    it('after pushes the full middle segments past the buffer move out; pops load them back as the head approaches', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push(Array.from({ length: 14 }, (_, n) => item(0, n)));
      endTurn(db, core);
      // segments 0..4 of 3 items (the tail 4 holds 2): 0 head, 1 buffer, 2..3 offloaded.
      expect(core.meta(0)).toMatchObject({ head_segment: 0, tail_segment: 4, head_offloaded_segment: 2, tail_offloaded_segment: 3 });
      expect([...db.store.keys()].sort()).toEqual(['0:2', '0:3']);
      expect(db.rows.get('0:2')?.size ?? 0).toBe(0);
      expect(core.cachedSegments(0)).toEqual([0, 1, 4]);

      expect(items(withFetch(db, core, () => core.pop(3)))).toHaveLength(3);
      endTurn(db, core);
      // The head moved to 1: segment 2 came into the buffer and is back in the table.
      expect(core.meta(0)).toMatchObject({ head_segment: 1, head_offloaded_segment: 3, tail_offloaded_segment: 3 });
      expect([...db.store.keys()]).toEqual(['0:3']);
      expect(db.stored(0)).toEqual(Array.from({ length: 11 }, (_, n) => item(0, n + 3).json));
    });

    it('a store that cannot be read: a pop takes what it can reach and then answers unavailable; nothing is lost', () => {
      const db = new FakeDb();
      const core = QueueCore.absent({ segmentSize: 2, bufferSegments: 1 });
      core.push(Array.from({ length: 10 }, (_, n) => item(0, n)));
      endTurn(db, core);
      expect(core.meta(0)).toMatchObject({ head_offloaded_segment: 2, tail_offloaded_segment: 3 });
      db.storeFails = (op) => op === 'load';
      const first = withFetch(db, core, () => core.pop(10));
      expect(items(first)).toEqual([0, 1, 2, 3].map((n) => item(0, n).json));
      endTurn(db, core);
      expect(core.meta(0)).toMatchObject({ head_segment: 2, head_offloaded_segment: 2 });
      expect(withFetch(db, core, () => core.pop(1))).toEqual({ unavailable: { priority: 0, segment: 2 } });
      endTurn(db, core);
      db.storeFails = () => false;
      expect(items(withFetch(db, core, () => core.pop(10)))).toEqual([4, 5, 6, 7, 8, 9].map((n) => item(0, n).json));
    });

    it('a lock released while the head could not be loaded back: its items come first once the store works', () => {
      const db = new FakeDb();
      const core = QueueCore.absent({ segmentSize: 2, bufferSegments: 1 });
      core.push(Array.from({ length: 10 }, (_, n) => item(0, n)));
      endTurn(db, core);
      db.storeFails = (op) => op === 'load';
      const popped = withFetch(db, core, () => core.pop(4, { lockId: 'L', now: 0, ttlMs: 1000 }));
      expect(items(popped)).toHaveLength(4);
      endTurn(db, core);
      expect(core.meta(0)).toMatchObject({ head_segment: 2, head_offloaded_segment: 2 });
      withFetch(db, core, () => core.release('L'));
      endTurn(db, core);
      db.storeFails = () => false;
      const fresh = db.load({ segmentSize: 2, bufferSegments: 1 });
      expect(items(withFetch(db, fresh, () => fresh.pop(10)))).toEqual(Array.from({ length: 10 }, (_, n) => item(0, n).json));
    });

    it('saves that fail leave the segments in the table; the range stays contiguous', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      db.storeFails = (op) => op === 'save';
      core.push(Array.from({ length: 14 }, (_, n) => item(0, n)));
      endTurn(db, core);
      expect(core.meta(0)).toMatchObject({ head_offloaded_segment: null });
      db.storeFails = () => false;
      core.push([item(0, 14)]);
      endTurn(db, core);
      expect(core.meta(0)).toMatchObject({ head_offloaded_segment: 2, tail_offloaded_segment: 3 });
      expect(db.stored(0)).toEqual(Array.from({ length: 15 }, (_, n) => item(0, n).json));
    });
  });

  it('lookupState: the metadata document, segments in state, offloaded segments, 404s', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    core.push(Array.from({ length: 14 }, (_, n) => item(0, n)));
    endTurn(db, core);
    expect(core.lookupState('q', 'metadata')).toEqual({
      value: { config: { segment_size: 3, buffer_segments: 1 }, queues: { queue_0: { metadata: { count: 14, head_segment: 0, tail_segment: 4, head_offloaded_segment: 2, tail_offloaded_segment: 3 } } } },
    });
    expect(core.lookupState('q', 'queue_0_seg_0')).toEqual({ value: [0, 1, 2].map((n) => ({ p: 0, n })) });
    expect(core.lookupState('q', 'queue_0_seg_2')).toBe('not-found');
    expect(core.lookupState('q', 'queue_0_seg_9')).toBe('not-found');
    expect(core.lookupState('q', 'offloaded_queue_0_seg_2_other'), 'another queue\'s key').toBe('not-found');
    expect(withFetch(db, core, () => core.lookupState('q', 'offloaded_queue_0_seg_2_q'))).toEqual({ value: [6, 7, 8].map((n) => ({ p: 0, n })) });
    expect(withFetch(db, core, () => core.lookupState('q', 'offloaded_queue_0_seg_4_q'))).toBe('not-found');
    const fresh = db.load();
    expect(withFetch(db, fresh, () => fresh.lookupState('q', 'queue_0_seg_1'))).toEqual({ value: [3, 4, 5].map((n) => ({ p: 0, n })) });
    expect(endTurn(db, fresh), 'peeking writes nothing').toBeUndefined();
    expect(fresh.cachedSegments(0), 'and keeps nothing').toEqual([]);
  });

  it('deleteQueue counts waiting and locked items, and lists the offloaded segments for the store', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    core.push(Array.from({ length: 14 }, (_, n) => item(0, n)));
    endTurn(db, core);
    core.pop(2, { lockId: 'L', now: 0, ttlMs: 1000 });
    endTurn(db, core);
    expect(core.deleteQueue()).toBe(14);
    expect(core.storeDeletes()).toEqual([
      { priority: 0, segment: 2 },
      { priority: 0, segment: 3 },
    ]);
    expect(core.pendingWrite(() => 1)).toMatchObject({ deleteQueue: true });
    endTurn(db, core);
    expect(db.store.size).toBe(0);
    expect(core.isPresent).toBe(false);
    expect(QueueCore.absent(SETTINGS).deleteQueue()).toBeUndefined();
  });

  it('view: counts of the head and tail segments follow from the pointers', () => {
    const core = QueueCore.absent(SETTINGS);
    core.push(Array.from({ length: 8 }, (_, n) => item(0, n)));
    core.pop(1);
    const view = core.view()!;
    expect(view.count).toBe(7);
    expect(view.priorities.get(0)).toMatchObject({ head_segment: 0, tail_segment: 2, head_segment_count: 2, tail_segment_count: 2 });
  });

  /**
   * Random operations over a few priorities with tiny segments, random reactivation (a fresh
   * core from the stored record) and random store failures: after every turn the stored queue
   * equals the model and memory holds only the window.
   */
  it('agrees with the model under random operations, reactivations and store failures (property)', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('push' as const), priorities: fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 1, maxLength: 12 }) }),
      fc.record({ kind: fc.constant('pop' as const), depth: fc.integer({ min: 1, max: 9 }), ack: fc.boolean() }),
      fc.record({ kind: fc.constantFrom('ack' as const, 'release' as const, 'expire' as const, 'reload' as const, 'flaky' as const, 'steady' as const) }),
    );
    fc.assert(
      fc.property(fc.array(fc.array(op, { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 40 }), (turns) => {
        const db = new FakeDb();
        const model = new Model();
        let core = QueueCore.absent(SETTINGS);
        let n = 0;
        let now = 0;
        let flaky = false;
        let everFlaky = false;
        let calls = 0;
        db.storeFails = () => flaky && ++calls % 2 === 0;
        for (const [t, ops] of turns.entries()) {
          for (const o of ops) {
            const label = `turn ${t} ${JSON.stringify(o)}`;
            if (o.kind === 'push') {
              const pushed = o.priorities.map((p) => item(p, n++));
              core.push(pushed);
              pushed.forEach((i) => model.push(i));
            } else if (o.kind === 'pop') {
              const outcome = withFetch(db, core, () => core.pop(o.depth, o.ack ? { lockId: `L${n++}`, now, ttlMs: 5 } : undefined));
              if ('locked' in outcome) {
                expect(model.lock, label).toBeDefined();
                continue;
              }
              expect(model.lock, label).toBeUndefined();
              if ('unavailable' in outcome) continue;
              const expected = model.pop(outcome.items.length);
              // Items carry where they were pushed and their deliveries besides; the model knows priority and JSON.
              expect(outcome.items.map(({ priority, json }) => ({ priority, json })), label).toEqual(expected);
              // Short only when a segment could not be loaded.
              if (outcome.items.length < o.depth && model.count() > 0) expect(flaky, `${label}: short pop without a failure`).toBe(true);
              if (outcome.lock) model.lock = { id: outcome.lock.lockId, items: expected, expiresAt: outcome.lock.expiresAt };
            } else if (o.kind === 'ack' || o.kind === 'release') {
              const id = model.lock?.id ?? 'none';
              const result = withFetch(db, core, () => (o.kind === 'ack' ? core.acknowledge(id) : core.release(id)));
              if (!model.lock) expect(typeof result, label).toBe('string');
              else {
                expect(result, label).toBe(model.lock.items.length);
                if (o.kind === 'release') model.giveBack(model.lock.items);
                model.lock = undefined;
              }
            } else if (o.kind === 'expire') {
              now += 5;
              const returned = withFetch(db, core, () => core.expireLock(now));
              expect(returned, label).toBe(model.lock ? model.lock.items.length : undefined);
              if (model.lock) model.giveBack(model.lock.items);
              model.lock = undefined;
            } else if (o.kind === 'reload') {
              endTurn(db, core);
              core = db.load();
            } else {
              flaky = o.kind === 'flaky';
            }
          }
          endTurn(db, core);
          everFlaky ||= flaky;
          expectConsistent(db, core, model, `after turn ${t}`, everFlaky);
        }
      }),
      { numRuns: 300 },
    );
  });
  describe('delayed items', () => {
    const delayed = (priority: number, n: number, delayMs: number): { priority: number; json: string; delayMs: number } => ({ ...item(priority, n), delayMs });
    /** A turn as the runner runs it: due items first, then the operations, then the write (clock `now`). */
    const turn = <T>(db: FakeDb, core: QueueCore, now: number, fn: () => T = () => undefined as T): { result: T; moved: number | undefined; write: TurnWrite | undefined } => {
      const moved = withFetch(db, core, () => core.moveDueItems(now), now);
      const result = withFetch(db, core, fn, now);
      return { result, moved, write: endTurn(db, core) };
    };

    it('a delayed push is stored apart: not counted, not popped, not in any segment; the row carries the count and the earliest due time', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      expect(core.push([delayed(0, 1, 5000)], 1000)).toEqual({ enqueued: 1, duplicates: 0 });
      expect(core.isPresent, 'a delayed push creates the queue').toBe(true);
      const write = endTurn(db, core)!;
      expect(write).toMatchObject({ expectedVersion: null, itemCount: 0, inserts: [], delayed: { count: 1, nextDueAt: 6000, nextSeq: 1 } });
      expect(write.delayedInserts).toEqual([{ dueAt: 6000, seq: 0, priority: 0, json: item(0, 1).json }]);
      expect(core.count).toBe(0);
      expect(core.view()).toMatchObject({ count: 0, delayed: 1 });
      expect(core.pop(5)).toEqual({ items: [] });
      expect(db.stored(0)).toEqual([]);
    });

    it('a turn that neither puts items aside nor moves any leaves the row\'s delayed columns alone', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push([item(0, 0)], 0);
      expect(endTurn(db, core)!.delayed, 'a queue created without delayed items').toBeNull();
      core.push([delayed(0, 1, 5000)], 0);
      expect(endTurn(db, core)!.delayed).toEqual({ count: 1, nextDueAt: 5000, nextSeq: 1 });
      core.push([item(0, 2)], 10);
      core.pop(1);
      expect(endTurn(db, core)!.delayed).toBeNull();
      expect(db.record!.delayed).toEqual({ count: 1, nextDueAt: 5000, nextSeq: 1 });
    });

    it('visibility boundary: not at due - 1 ms (and no read), at the due time exactly it joins its priority and the row forgets it', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push([delayed(0, 1, 5000)], 1000);
      endTurn(db, core);
      expect(core.moveDueItems(5999), 'nothing due: no read').toBeUndefined();
      expect(core.pop(1)).toEqual({ items: [] });
      expect(endTurn(db, core)).toBeUndefined();
      expect(() => core.moveDueItems(6000)).toThrow(MissingDueItems);
      const { moved, result, write } = turn(db, core, 6000, () => core.pop(1));
      expect(moved).toBe(1);
      expect(items(result)).toEqual([item(0, 1).json]);
      expect(write).toMatchObject({ delayedDeleteThrough: { dueAt: 6000, seq: 0 }, delayed: { count: 0, nextDueAt: null, nextSeq: 1 }, inserts: [] });
      expect(db.delayedRows).toEqual([]);
      expect(core.view()).toMatchObject({ count: 0, delayed: 0 });
    });

    it('due items join the tail of their priority after what is visible, in due-time order, ties in push order; later pushes come after them', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push([item(0, 0), delayed(0, 1, 3000), delayed(0, 2, 2000), delayed(1, 3, 2000), delayed(0, 4, 3000)], 0);
      endTurn(db, core);
      core.push([delayed(0, 5, 1000), delayed(0, 6, 4000)], 1000);
      endTurn(db, core);
      expect(core.view()).toMatchObject({ count: 1, delayed: 6 });
      // At 3500: due are 2 (2000, seq 1), 3 (2000, seq 2, priority 1), 5 (2000, seq 4), 1 (3000, seq 0), 4 (3000, seq 3).
      const { moved } = turn(db, core, 3500, () => core.push([item(0, 7)], 3500));
      expect(moved).toBe(5);
      expect(db.stored(0)).toEqual([0, 2, 5, 1, 4, 7].map((n) => item(0, n).json));
      expect(db.stored(1)).toEqual([item(1, 3).json]);
      expect(core.view()).toMatchObject({ count: 7, delayed: 1 });
      expect(db.record!.delayed).toEqual({ count: 1, nextDueAt: 5000, nextSeq: 6 });
      turn(db, core, 5000);
      expect(db.stored(0)).toEqual([0, 2, 5, 1, 4, 7, 6].map((n) => item(0, n).json));
      expect(db.record!.delayed).toEqual({ count: 0, nextDueAt: null, nextSeq: 6 });
    });

    it('moved items fill segments like pushes: a full tail gets a successor, and full middle segments are offloaded', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push(Array.from({ length: 14 }, (_, n) => delayed(0, n, 1000)), 0);
      endTurn(db, core);
      turn(db, core, 1000);
      expect(core.meta(0)).toMatchObject({ count: 14, head_segment: 0, tail_segment: 4, head_offloaded_segment: 2, tail_offloaded_segment: 3 });
      expect(db.stored(0)).toEqual(Array.from({ length: 14 }, (_, n) => item(0, n).json));
    });

    it('a backlog of more due items than one turn moves: the rest stay due for the next turn, which moves them first (one read per turn)', () => {
      const db = new FakeDb();
      const core = QueueCore.absent({ segmentSize: 100, bufferSegments: 1 });
      core.push(Array.from({ length: MAX_DUE_PER_TURN + 5 }, (_, n) => delayed(0, n, 1000 + n)), 0);
      endTurn(db, core);
      expect(withFetch(db, core, () => core.moveDueItems(10_000))).toBe(MAX_DUE_PER_TURN);
      expect(core.hasDueItems(10_000), 'the runner gives the rest a turn of its own').toBe(true);
      expect(core.moveDueItems(10_000), 'no second read in the same turn: the table still holds the moved rows').toBeUndefined();
      endTurn(db, core);
      expect(db.record!.delayed).toEqual({ count: 5, nextDueAt: 1000 + MAX_DUE_PER_TURN, nextSeq: MAX_DUE_PER_TURN + 5 });
      expect(withFetch(db, core, () => core.moveDueItems(10_000))).toBe(5);
      expect(core.hasDueItems(10_000)).toBe(false);
      endTurn(db, core);
      expect(db.stored(0)).toEqual(Array.from({ length: MAX_DUE_PER_TURN + 5 }, (_, n) => item(0, n).json));
    });

    it('a reactivated core knows its delayed items from the row; sequence numbers go on; a turn that moves and pushes keeps the earliest due time', () => {
      const db = new FakeDb();
      const first = QueueCore.absent(SETTINGS);
      first.push([delayed(2, 0, 1000), delayed(2, 1, 9000)], 0);
      endTurn(db, first);
      const core = db.load();
      expect(core.view()).toMatchObject({ count: 0, delayed: 2 });
      expect(core.nextDueAt).toBe(1000);
      turn(db, core, 1000, () => core.push([delayed(2, 2, 500)], 1000));
      expect(db.record!.delayed).toEqual({ count: 2, nextDueAt: 1500, nextSeq: 3 });
      const again = db.load();
      turn(db, again, 9000);
      expect(db.stored(2)).toEqual([0, 2, 1].map((n) => item(2, n).json));
    });

    it('deleteQueue counts delayed items and forgets them; a queue pushed to again starts afresh', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push([item(0, 0), delayed(0, 1, 1000), delayed(1, 2, 1000)], 0);
      endTurn(db, core);
      expect(core.deleteQueue()).toBe(3);
      endTurn(db, core);
      expect(db.delayedRows).toEqual([]);
      core.push([delayed(0, 3, 1000)], 10);
      expect(endTurn(db, core)).toMatchObject({ expectedVersion: null, delayed: { count: 1, nextDueAt: 1010, nextSeq: 1 }, delayedInserts: [{ seq: 0 }] });
    });

    it('expired lock items go back to the front while due items join the tail, in the same turn', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push([item(0, 0), item(0, 1), delayed(0, 2, 5000)], 0);
      endTurn(db, core);
      core.pop(1, { lockId: 'L', now: 0, ttlMs: 5000 });
      endTurn(db, core);
      turn(db, core, 5000, () => core.expireLock(5000));
      expect(db.stored(0)).toEqual([0, 1, 2].map((n) => item(0, n).json));
    });
  });

  describe('deduplication', () => {
    const WINDOW = 300_000;
    const withId = (n: number, dedupId: string, priority = 0): { priority: number; json: string; dedupId: string } => ({ ...item(priority, n), dedupId });

    it('a queue with no row reads nothing: the first push of an id is accepted and remembered until now + window', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      expect(core.push([withId(1, 'a')], 1000, WINDOW)).toEqual({ enqueued: 1, duplicates: 0 });
      expect(endTurn(db, core)!.dedupInserts).toEqual([{ dedupId: 'a', expiresAt: 1000 + WINDOW }]);
    });

    it('a repeat within the window is read as live, skipped, and writes nothing; at the window\'s end it is accepted again', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push([withId(1, 'a')], 1000, WINDOW);
      endTurn(db, core);
      expect(() => core.push([withId(2, 'a')], 2000, WINDOW), 'checked in the database').toThrow(MissingDedupIds);
      expect(core.count, 'nothing changed by the refused attempt').toBe(1);
      expect(withFetch(db, core, () => core.push([withId(2, 'a')], 2000, WINDOW), 2000)).toEqual({ enqueued: 0, duplicates: 1 });
      expect(endTurn(db, core)).toBeUndefined();
      const last = 1000 + WINDOW - 1;
      expect(withFetch(db, core, () => core.push([withId(3, 'a')], last, WINDOW), last)).toEqual({ enqueued: 0, duplicates: 1 });
      endTurn(db, core);
      const end = 1000 + WINDOW;
      expect(withFetch(db, core, () => core.push([withId(4, 'a')], end, WINDOW), end)).toEqual({ enqueued: 1, duplicates: 0 });
      expect(endTurn(db, core)!.dedupInserts).toEqual([{ dedupId: 'a', expiresAt: end + WINDOW }]);
      expect(db.stored(0)).toEqual([item(0, 1).json, item(0, 4).json]);
    });

    it('inside one batch and across the operations of one turn: the first is accepted, repeats are skipped, without another read', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push([item(0, 0)], 0);
      endTurn(db, core);
      // The runner checks every id of the turn first, with one read.
      let reads = 0;
      withFetch(db, core, () => {
        try {
          core.checkDedupIds(['a', 'b', 'a', 'c']);
        } catch (error) {
          reads += 1;
          expect((error as MissingDedupIds).ids).toEqual(['a', 'b', 'c']);
          throw error;
        }
      });
      expect(reads).toBe(1);
      expect(core.push([withId(1, 'a'), withId(2, 'b', 1), withId(3, 'a'), item(0, 4)], 0, WINDOW)).toEqual({ enqueued: 3, duplicates: 1 });
      expect(core.push([withId(5, 'b'), withId(6, 'c')], 0, WINDOW)).toEqual({ enqueued: 1, duplicates: 1 });
      const write = endTurn(db, core)!;
      expect(write.dedupInserts.map((d) => d.dedupId)).toEqual(['a', 'b', 'c']);
      expect(db.stored(0)).toEqual([0, 1, 4, 6].map((n) => item(0, n).json));
      expect(db.stored(1)).toEqual([item(1, 2).json]);
    });

    it('a delayed item\'s id counts from its push: a repeat is skipped before the item is visible', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push([{ ...withId(1, 'a'), delayMs: 60_000 }], 0, WINDOW);
      endTurn(db, core);
      expect(withFetch(db, core, () => core.push([withId(2, 'a')], 1000, WINDOW), 1000)).toEqual({ enqueued: 0, duplicates: 1 });
      expect(core.view()).toMatchObject({ count: 0, delayed: 1 });
    });

    it('two processes racing the same id: both accept it, only the first write applies; the second, redone on the stored queue, finds it live', () => {
      const db = new FakeDb();
      const seed = QueueCore.absent(SETTINGS);
      seed.push([item(0, 0)], 0);
      endTurn(db, seed);
      const a = db.load();
      const b = db.load();
      withFetch(db, a, () => a.push([withId(1, 'x')], 10, WINDOW), 10);
      withFetch(db, b, () => b.push([withId(2, 'x')], 10, WINDOW), 10);
      endTurn(db, a);
      const losing = b.pendingWrite(() => 1)!;
      expect(losing.expectedVersion, 'the version check refuses it').not.toBe(db.record!.version);
      const redo = db.load();
      expect(withFetch(db, redo, () => redo.push([withId(2, 'x')], 11, WINDOW), 11)).toEqual({ enqueued: 0, duplicates: 1 });
      expect(endTurn(db, redo)).toBeUndefined();
      expect(db.stored(0)).toEqual([item(0, 0).json, item(0, 1).json]);
    });

    it('deleting the queue forgets its ids', () => {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.push([withId(1, 'a')], 0, WINDOW);
      endTurn(db, core);
      core.deleteQueue();
      endTurn(db, core);
      expect(db.dedup.size).toBe(0);
      expect(core.push([withId(2, 'a')], 1, WINDOW)).toEqual({ enqueued: 1, duplicates: 0 });
    });
  });

  /**
   * Random pushes (some delayed, some with dedup ids), pops and reactivations on a simulated
   * clock: after every turn the stored queue equals a model in which a delayed item joins its
   * priority's tail at the first turn at or after its due time (due order, ties in push order)
   * and an id is skipped while a push with it was accepted less than a window ago.
   */
  it('agrees with a model of delays and dedup ids under random turns on a simulated clock (property)', () => {
    const WINDOW = 10_000;
    const op = fc.oneof(
      fc.record({
        kind: fc.constant('push' as const),
        entries: fc.array(fc.record({ priority: fc.integer({ min: 0, max: 2 }), delay: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 8 }).map((s) => s * 1000)), id: fc.option(fc.constantFrom('a', 'b', 'c', 'd'), { nil: undefined }) }), { minLength: 1, maxLength: 6 }),
      }),
      fc.record({ kind: fc.constant('pop' as const), depth: fc.integer({ min: 1, max: 6 }) }),
      fc.record({ kind: fc.constant('advance' as const), ms: fc.oneof(fc.integer({ min: 0, max: 3000 }), fc.constantFrom(1000, 5000, 10_000)) }),
      fc.record({ kind: fc.constant('reload' as const) }),
    );
    fc.assert(
      fc.property(fc.array(fc.array(op, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 40 }), (turns) => {
        const db = new FakeDb();
        const model = new Model();
        const waiting: { dueAt: number; seq: number; item: HeldItem }[] = [];
        const accepted = new Map<string, number>();
        let core = QueueCore.absent(SETTINGS);
        let now = 0;
        let n = 0;
        let seq = 0;
        for (const [t, ops] of turns.entries()) {
          // The turn starts by moving what is due (the model: everything due, in order).
          withFetch(db, core, () => core.moveDueItems(now), now);
          waiting.sort((x, y) => x.dueAt - y.dueAt || x.seq - y.seq);
          while (waiting.length > 0 && waiting[0].dueAt <= now) model.push(waiting.shift()!.item);
          for (const o of ops) {
            const label = `turn ${t} at ${now} ${JSON.stringify(o)}`;
            if (o.kind === 'push') {
              const entries = o.entries.map((e) => ({ ...item(e.priority, n++), ...(e.delay ? { delayMs: e.delay } : {}), ...(e.id ? { dedupId: e.id } : {}) }));
              let enqueued = 0;
              for (const e of entries) {
                if (e.dedupId !== undefined && (accepted.get(e.dedupId) ?? -Infinity) > now) continue;
                if (e.dedupId !== undefined) accepted.set(e.dedupId, now + WINDOW);
                enqueued += 1;
                if (e.delayMs) waiting.push({ dueAt: now + e.delayMs, seq: seq++, item: e });
                else model.push(e);
              }
              const outcome = withFetch(db, core, () => core.push(entries, now, WINDOW), now);
              expect(outcome, label).toEqual({ enqueued, duplicates: entries.length - enqueued });
            } else if (o.kind === 'pop') {
              const outcome = withFetch(db, core, () => core.pop(o.depth));
              expect(items(outcome), label).toEqual(model.pop(o.depth).map((i) => i.json));
            } else if (o.kind === 'advance') {
              // Time moves between turns only: within one turn every operation has the turn's now.
            } else {
              endTurn(db, core);
              core = db.load();
            }
          }
          endTurn(db, core);
          expectConsistent(db, core, model, `after turn ${t}`);
          expect(core.view()?.delayed ?? 0, `after turn ${t}: delayed`).toBe(waiting.length);
          expect([...db.delayedRows].sort((x, y) => x.dueAt - y.dueAt || x.seq - y.seq).map((d) => d.json), `after turn ${t}: stored delayed items`).toEqual(
            [...waiting].sort((x, y) => x.dueAt - y.dueAt || x.seq - y.seq).map((w) => w.item.json),
          );
          for (const o of ops) if (o.kind === 'advance') now += o.ms;
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('delivery counts of stored items', () => {
  it('an item an exclusive lock gave back keeps its delivery count when its segment is read from the table', () => {
    const meta = { count: 2, head_segment: 0, tail_segment: 0, head_offloaded_segment: null, tail_offloaded_segment: null, next_position: 2, head_position: -1 };
    const core = QueueCore.fromRecord({ version: 1, settings: { segmentSize: 3, bufferSegments: 1 }, priorities: { '0': meta }, lock: null });
    const ack = { lockId: 'lock-1', now: 0, ttlMs: 30_000 };
    const entries = [{ position: -1, json: '{"a":1}', deliveries: 1 }, { position: 0, json: '{"b":1}' }];
    const outcome = drive(core, () => core.pop(2, ack), { ...NOTHING_STORED, segments: (refs) => refs.map(() => ({ entries })) });
    expect(outcome && 'items' in outcome ? outcome.items.map((i) => [i.json, i.deliveries]) : outcome).toEqual([
      ['{"a":1}', 2],
      ['{"b":1}', 1],
    ]);
  });
});

describe('given-back items of shared locks', () => {
  it('a turn that gives items back and pops them again reads the stored given-back items once, and finds its own', () => {
    // Priority 0: item (0,0) given back earlier (in the table), item (0,1) under lock L, item (0,2) in the segment.
    const meta = { count: 1, head_segment: 0, tail_segment: 0, head_offloaded_segment: null, tail_offloaded_segment: null, next_position: 3, head_position: 2, returned: 1, held: 1 };
    const lock: LockState = { lockId: 'L', state: 'active', items: [{ priority: 0, json: '"b"', origin: { segment: 0, position: 1 }, deliveries: 1 }], createdAt: 0, expiresAt: 60_000 };
    const core = QueueCore.fromRecord({
      version: 1,
      settings: { segmentSize: 3, bufferSegments: 1, lockMode: 'shared' },
      priorities: { '0': meta },
      lock: null,
      shared: { live: 1, items: 1, nextExpiry: 60_000 },
    });
    let reads = 0;
    const reader: SyncRowReader = {
      ...NOTHING_STORED,
      segments: (refs) => refs.map(() => ({ entries: [{ position: 2, json: '"c"' }] })),
      lockRows: (need) => {
        if (need.kind === 'locks') return { kind: 'locks', locks: new Map([['L', lock]]) };
        if (need.kind !== 'returned') throw new Error(`unexpected read: ${need.kind}`);
        reads += 1;
        return { kind: 'returned', priority: 0, entries: [{ segment: 0, position: 0, json: '"a"', deliveries: 1 }].slice(0, need.limit) };
      },
    };
    expect(drive(core, () => core.release('L', 1_000), reader)).toBe(1);
    const popped = drive(core, () => core.pop(3), reader);
    expect('items' in popped ? popped.items.map((i) => i.json) : popped).toEqual(['"a"', '"b"', '"c"']);
    expect(reads).toBe(1);
  });
});

describe('snapshot: the committed queue as activating it reads it', () => {
  /** What a load of the stored queue gives: the record, and the rows of the lowest priority's head segment among those with items. */
  function loadedFront(db: FakeDb): { priority: number; segment: number; entries: { position: number; json: string }[] } | undefined {
    const priorities = Object.entries(db.record?.priorities ?? {}).filter(([, meta]) => meta.count > 0).sort(([a], [b]) => Number(a) - Number(b));
    if (priorities.length === 0) return undefined;
    const [p, meta] = priorities[0];
    const ref: SegmentRef = { priority: Number(p), segment: meta.head_segment, from: 'state', purpose: 'use' };
    return { priority: ref.priority, segment: ref.segment, entries: (db.fetch(ref) as { entries: { position: number; json: string }[] }).entries };
  }

  it('after a push into an empty queue: the new version and the pushed rows, from which another core pops without a read', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    core.push([item(1, 0), item(0, 1), item(0, 2)]);
    expect(core.snapshot(), 'not in the middle of a turn').toBeUndefined();
    endTurn(db, core);
    const snapshot = core.snapshot()!;
    expect(snapshot.record).toMatchObject({ version: db.record!.version, priorities: db.record!.priorities, lock: null, delayed: { count: 0, nextDueAt: null } });
    expect(snapshot.front).toEqual({ priority: 0, segment: 0, entries: [{ position: 0, json: item(0, 1).json }, { position: 1, json: item(0, 2).json }] });

    const other = QueueCore.fromRecord(snapshot.record);
    other.provide({ ...snapshot.front, from: 'state', purpose: 'use' }, { entries: snapshot.front.entries });
    // No fetch: pop would throw MissingSegments if it needed one.
    expect(items(other.pop(2))).toEqual([item(0, 1).json, item(0, 2).json]);
    expect(endTurn(db, other)).toMatchObject({ expectedVersion: snapshot.record.version });
    expect(db.stored(0)).toEqual([]);
    expect(db.stored(1)).toEqual([item(1, 0).json]);
  });

  it('is undefined for a queue memory does not hold entirely: locked, delayed items, front not in memory, nothing in the segments', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    expect(core.snapshot(), 'no row').toBeUndefined();
    core.push([item(0, 0), item(0, 1)]);
    endTurn(db, core);
    expect(core.snapshot()).toBeDefined();
    expect(db.load().snapshot(), 'a reactivated core has not read its front segment').toBeUndefined();

    const lock = core.pop(1, { lockId: 'L1', now: 0, ttlMs: 1000 });
    expect('lock' in lock && lock.lock).toBeTruthy();
    endTurn(db, core);
    expect(core.snapshot(), 'an exclusive lock holds items').toBeUndefined();
    expect(core.acknowledge('L1')).toBe(1);
    endTurn(db, core);
    expect(core.snapshot()).toBeDefined();

    core.push([{ ...item(0, 2), delayMs: 10_000 }], 0);
    endTurn(db, core);
    expect(core.snapshot(), 'a delayed item').toBeUndefined();

    const empty = QueueCore.absent(SETTINGS);
    empty.push([item(0, 0)]);
    const db2 = new FakeDb();
    endTurn(db2, empty);
    empty.pop(1);
    endTurn(db2, empty);
    expect(empty.snapshot(), 'nothing in the segments').toBeUndefined();
  });

  /**
   * Random pushes, pops, locks and reactivations with tiny segments: whenever a snapshot is
   * given it is exactly what a load of the stored queue reads (record and front rows), and a
   * core activated from it pops every item in the model's order without a read.
   */
  it('is always exactly what a load would read (property)', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('push' as const), priorities: fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 1, maxLength: 8 }) }),
      fc.record({ kind: fc.constant('pop' as const), depth: fc.integer({ min: 1, max: 7 }), ack: fc.boolean() }),
      fc.record({ kind: fc.constantFrom('ack' as const, 'release' as const, 'reload' as const) }),
    );
    let given = 0;
    fc.assert(
      fc.property(fc.array(op, { minLength: 1, maxLength: 40 }), (ops) => {
        const db = new FakeDb();
        const model = new Model();
        let core = QueueCore.absent(SETTINGS);
        let n = 0;
        for (const o of ops) {
          if (o.kind === 'push') {
            const pushed = o.priorities.map((p) => item(p, n++));
            core.push(pushed);
            pushed.forEach((i) => model.push(i));
          } else if (o.kind === 'pop') {
            const outcome = withFetch(db, core, () => core.pop(o.depth, o.ack ? { lockId: `L${n++}`, now: 0, ttlMs: 1000 } : undefined));
            if ('items' in outcome) {
              const expected = model.pop(outcome.items.length);
              if (outcome.lock) model.lock = { id: outcome.lock.lockId, items: expected, expiresAt: outcome.lock.expiresAt };
            }
          } else if (o.kind === 'reload') {
            core = db.load();
          } else if (model.lock) {
            withFetch(db, core, () => (o.kind === 'ack' ? core.acknowledge(model.lock!.id) : core.release(model.lock!.id)));
            if (o.kind === 'release') model.giveBack(model.lock.items);
            model.lock = undefined;
          }
          endTurn(db, core);
          const snapshot = core.snapshot();
          if (!snapshot) continue;
          given += 1;
          expect(model.lock).toBeUndefined();
          expect(snapshot.record.version).toBe(db.record!.version);
          expect(snapshot.record.priorities).toEqual(db.record!.priorities);
          expect(snapshot.front.entries.map(({ position, json }) => ({ position, json }))).toEqual(loadedFront(db)!.entries);
          expect({ priority: snapshot.front.priority, segment: snapshot.front.segment }).toEqual({ priority: loadedFront(db)!.priority, segment: loadedFront(db)!.segment });
          const other = QueueCore.fromRecord(snapshot.record);
          other.provide({ priority: snapshot.front.priority, segment: snapshot.front.segment, from: 'state', purpose: 'use' }, { entries: [...snapshot.front.entries] });
          const all = withFetch(db, other, () => other.pop(1000));
          expect('items' in all && all.items.map(({ priority, json }) => ({ priority, json }))).toEqual([...model.lists.keys()].sort((a, b) => a - b).flatMap((p) => model.lists.get(p)!.map((json) => ({ priority: p, json }))));
        }
      }),
      { numRuns: 300 },
    );
    expect(given, 'snapshots were given').toBeGreaterThan(100);
  });
});
