import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { QueueCore, type PopOutcome } from './queue-core.js';
import { MissingSegments, type HeldItem, type LockState, type SegmentFetch, type SegmentRef, type TurnWrite } from './types.js';
import { FIRST_POSITION, WHOLE_SEGMENT } from './write-set.js';

/**
 * The core against a fake database: a table of segment rows and an offload store, driven the
 * way the turn runner drives it (fetch what is missing, plan offloads, write, commit), and
 * checked after every turn against a model of the queue (per priority a FIFO list).
 */
class FakeDb {
  readonly rows = new Map<string, Map<number, string>>();
  readonly store = new Map<string, string[]>();
  record: { version: number; priorities: Record<string, ReturnType<QueueCore['meta']> & object>; lock: LockState | null } | undefined;
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

  apply(write: TurnWrite): void {
    if (write.deleteQueue) {
      this.rows.clear();
      this.record = undefined;
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
    this.record = { version: write.newVersion, priorities: structuredClone(write.priorities), lock };
  }

  /** Activates the queue afresh from what is stored (a deactivated actor, another process). */
  load(settings = SETTINGS): QueueCore {
    if (!this.record) return QueueCore.absent(settings);
    return QueueCore.fromRecord({ version: this.record.version, settings, priorities: this.record.priorities, lock: this.record.lock });
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

/** Runs a core operation, fetching what it asks for, as the runner does. */
function withFetch<T>(db: FakeDb, core: QueueCore, fn: () => T): T {
  for (let round = 0; ; round++) {
    try {
      return fn();
    } catch (error) {
      if (!(error instanceof MissingSegments) || round > 20) throw error;
      for (const ref of error.refs) core.provide(ref, db.fetch(ref));
    }
  }
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
              expect(outcome.items, label).toEqual(expected);
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
});
