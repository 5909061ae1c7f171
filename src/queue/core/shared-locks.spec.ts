import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_EXPIRED_LOCKS_PER_TURN, QueueCore } from './queue-core.js';
import {
  NO_DELAYED,
  NO_SHARED_LOCKS,
  type HeldItem,
  type LockRowsFetch,
  type LockRowsNeed,
  type LockState,
  type PriorityMetadata,
  type QueueSettings,
  type ReturnedEntry,
  type SegmentFetch,
  type SegmentRef,
  type SharedLockSummary,
  type TurnWrite,
} from './types.js';
import { drive, type SyncRowReader } from './core-driver.js';

/**
 * Shared lock mode, delivery counts and dead letters in the pure core, against a fake database
 * that keeps what the turn statement keeps: segment rows (with deliveries), the offload store,
 * `shared_locks`, `returned_items`, and the dead-letter queue's incoming items. Driven the way
 * the turn runner drives the core: the expiry hooks first, then the operations, fetching what
 * they ask for, then load back, offload, write and commit.
 */
class FakeDb {
  readonly rows = new Map<string, Map<number, { json: string; deliveries: number }>>();
  readonly store = new Map<string, string[]>();
  readonly locks = new Map<string, LockState>();
  /** `returned_items` per priority. */
  readonly returned = new Map<number, ReturnedEntry[]>();
  /** Items written to the dead-letter queue, in order. */
  readonly deadLetters: { queueId: string; item: HeldItem }[] = [];
  record: { version: number; settings: QueueSettings; priorities: Record<string, PriorityMetadata>; lock: LockState | null; shared: SharedLockSummary } | undefined;
  reads = { locks: 0, due: 0, next: 0, returned: 0 };

  fetch(ref: SegmentRef): SegmentFetch {
    const k = `${ref.priority}:${ref.segment}`;
    if (ref.from === 'state') {
      const rows = this.rows.get(k) ?? new Map();
      return { entries: [...rows.entries()].sort((a, b) => a[0] - b[0]).map(([position, r]) => (r.deliveries ? { position, json: r.json, deliveries: r.deliveries } : { position, json: r.json })) };
    }
    return { entries: this.store.get(k)?.map((json, position) => ({ position, json })) };
  }

  fetchLockRows(need: LockRowsNeed): LockRowsFetch {
    this.reads[need.kind] += 1;
    const live = [...this.locks.values()].filter((l) => l.state === 'active').sort((a, b) => a.expiresAt - b.expiresAt);
    switch (need.kind) {
      case 'locks':
        return { kind: 'locks', locks: new Map(need.ids.map((id) => [id, this.locks.get(id) ?? null])) };
      case 'due': {
        const due = live.filter((l) => l.expiresAt <= need.now).slice(0, need.limit);
        return { kind: 'due', locks: due, nextExpiry: live.find((l) => l.expiresAt > need.now)?.expiresAt ?? null };
      }
      case 'next':
        return { kind: 'next', nextExpiry: live.find((l) => !need.exclude.includes(l.lockId))?.expiresAt ?? null };
      case 'returned':
        return { kind: 'returned', priority: need.priority, entries: (this.returned.get(need.priority) ?? []).slice(0, need.limit) };
    }
  }

  /** What the runner reads for the core, from this database. */
  readonly reader: SyncRowReader = {
    segments: (refs) => refs.map((ref) => this.fetch(ref)),
    dueItems: () => ({ items: [], nextDueAt: null }),
    liveDedupIds: () => new Set(),
    lockRows: (need) => this.fetchLockRows(need),
  };

  apply(write: TurnWrite): void {
    expect(write.deleteQueue).toBe(false);
    expect(write.expectedVersion).toBe(this.record?.version ?? null);
    for (const d of write.deletes) {
      const rows = this.rows.get(`${d.priority}:${d.segment}`);
      for (const position of [...(rows?.keys() ?? [])]) if (position >= d.from && position <= d.through) rows!.delete(position);
    }
    for (const i of write.inserts) {
      const k = `${i.priority}:${i.segment}`;
      if (!this.rows.has(k)) this.rows.set(k, new Map());
      expect(this.rows.get(k)!.has(i.position), `duplicate key ${k}:${i.position}`).toBe(false);
      this.rows.get(k)!.set(i.position, { json: i.json, deliveries: i.deliveries ?? 0 });
    }
    for (const id of write.sharedLockDeletes) {
      expect(this.locks.has(id), `deleting lock ${id} that is not stored`).toBe(true);
      this.locks.delete(id);
    }
    for (const lock of write.sharedLockUpserts) this.locks.set(lock.lockId, lock);
    for (const d of write.returnedDeletes) {
      const list = this.returned.get(d.priority) ?? [];
      const at = list.findIndex((e) => e.segment === d.segment && e.position === d.position);
      expect(at, `deleting a given-back item that is not stored: ${JSON.stringify(d)}`).toBeGreaterThanOrEqual(0);
      list.splice(at, 1);
    }
    for (const r of write.returnedInserts) {
      const list = this.returned.get(r.priority) ?? [];
      expect(list.some((e) => e.segment === r.segment && e.position === r.position), `duplicate given-back key ${JSON.stringify(r)}`).toBe(false);
      list.push({ segment: r.segment, position: r.position, json: r.json, deliveries: r.deliveries });
      list.sort((a, b) => a.segment - b.segment || a.position - b.position);
      this.returned.set(r.priority, list);
    }
    if (write.deadLetters) for (const item of write.deadLetters.items) this.deadLetters.push({ queueId: write.deadLetters.queueId, item });
    const lock = write.lock ? (write.lock.op === 'upsert' ? write.lock.lock : null) : (this.record?.lock ?? null);
    const shared = write.shared ?? this.record?.shared ?? NO_SHARED_LOCKS;
    this.record = { version: write.newVersion, settings: write.settings, priorities: structuredClone(write.priorities), lock, shared };
    // The row's summaries agree with the rows.
    const live = [...this.locks.values()].filter((l) => l.state === 'active');
    expect(shared.live, 'live_locks').toBe(live.length);
    expect(shared.items, 'locked_items').toBe(live.reduce((n, l) => n + l.items.length, 0));
    if (live.length > 0) expect(shared.nextExpiry!, 'next_lock_expiry is a lower bound').toBeLessThanOrEqual(Math.min(...live.map((l) => l.expiresAt)));
    else expect(shared.nextExpiry, 'next_lock_expiry without live locks').toBeNull();
    for (const [p, meta] of Object.entries(write.priorities)) {
      expect(meta.returned ?? 0, `returned count of priority ${p}`).toBe(this.returned.get(Number(p))?.length ?? 0);
      const held = live.flatMap((l) => l.items).filter((i) => i.priority === Number(p)).length;
      expect(meta.held ?? 0, `held count of priority ${p}`).toBe(held);
    }
  }

  load(): QueueCore {
    if (!this.record) return QueueCore.absent(SETTINGS);
    const { version, settings, priorities, lock, shared } = this.record;
    return QueueCore.fromRecord({ version, settings, priorities, lock, delayed: NO_DELAYED, shared });
  }
}

const SETTINGS: QueueSettings = { segmentSize: 3, bufferSegments: 1 };

function withFetch<T>(db: FakeDb, core: QueueCore, fn: () => T): T {
  return drive(core, fn, db.reader);
}

/** The start of a turn: the expiry hooks. */
function startTurn(db: FakeDb, core: QueueCore, now: number): void {
  withFetch(db, core, () => core.expireLock(now));
  withFetch(db, core, () => core.expireSharedLocks(now));
}

function endTurn(db: FakeDb, core: QueueCore): TurnWrite | undefined {
  withFetch(db, core, () => core.loadBack());
  const moves = withFetch(db, core, () => core.planOffload());
  for (const move of moves) {
    db.store.set(`${move.priority}:${move.segment}`, [...move.items]);
    core.offloaded(move.priority, move.segment);
  }
  const write = core.pendingWrite(() => 1000);
  if (write) db.apply(write);
  for (const d of core.storeDeletes()) db.store.delete(`${d.priority}:${d.segment}`);
  core.committed(write);
  return write;
}

/** One turn of one operation (hooks first, as the runner does). */
function turn<T>(db: FakeDb, core: QueueCore, now: number, fn: () => T): T {
  startTurn(db, core, now);
  const result = withFetch(db, core, fn);
  endTurn(db, core);
  return result;
}

const item = (priority: number, n: number): HeldItem => ({ priority, json: JSON.stringify({ p: priority, n }) });
const names = (items: readonly HeldItem[]): string[] => items.map((i) => {
  const { p, n } = JSON.parse(i.json) as { p: number; n: number };
  return `${p}.${n}`;
});

function sharedQueue(): { db: FakeDb; core: QueueCore } {
  const db = new FakeDb();
  const core = QueueCore.absent(SETTINGS);
  expect(core.updateSettings({ lockMode: 'shared' })).toMatchObject({ lockMode: 'shared' });
  endTurn(db, core);
  return { db, core };
}

function popAck(db: FakeDb, core: QueueCore, now: number, depth: number, lockId: string, ttlMs = 1000, maxLocks?: number) {
  return turn(db, core, now, () => core.pop(depth, { lockId, now, ttlMs, maxLocks }));
}

function heldOf(outcome: ReturnType<QueueCore['pop']>): HeldItem[] {
  if (!('items' in outcome)) throw new Error(`no items: ${JSON.stringify(outcome)}`);
  return outcome.items;
}

describe('QueueCore in shared lock mode', () => {
  it('settings: the layout changes only while empty, the lock mode only while no lock lives', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    expect(core.isPresent).toBe(false);
    expect(core.updateSettings({ segmentSize: 5, maxDeliveries: 2, deadLetterQueue: 'dead' })).toEqual({
      segmentSize: 5,
      bufferSegments: 1,
      lockMode: 'exclusive',
      maxDeliveries: 2,
      deadLetterQueue: 'dead',
    });
    expect(core.isPresent, 'settings create the queue').toBe(true);
    expect(endTurn(db, core)).toMatchObject({ expectedVersion: null, settings: { segmentSize: 5, maxDeliveries: 2 } });
    turn(db, core, 0, () => core.push([item(0, 1)]));
    expect(core.updateSettings({ segmentSize: 6 })).toBe('QUEUE_NOT_EMPTY');
    expect(core.updateSettings({ segmentSize: 5 }), 'the same value is no change').toMatchObject({ segmentSize: 5 });
    turn(db, core, 0, () => core.pop(1, { lockId: 'L', now: 0, ttlMs: 100 }));
    expect(core.count).toBe(0);
    expect(core.updateSettings({ bufferSegments: 2 }), 'a lock holds an item').toBe('QUEUE_NOT_EMPTY');
    expect(core.updateSettings({ lockMode: 'shared' })).toBe('QUEUE_LOCKED');
    expect(core.updateSettings({ maxDeliveries: null, deadLetterQueue: null }), 'the rest may change while locked').toMatchObject({ maxDeliveries: null, deadLetterQueue: null });
    endTurn(db, core);
    expect(turn(db, core, 0, () => core.acknowledge('L', 0))).toBe(1);
    expect(turn(db, core, 0, () => core.updateSettings({ lockMode: 'shared', segmentSize: 4 }))).toMatchObject({ lockMode: 'shared', segmentSize: 4 });
    expect(db.load().settings).toMatchObject({ lockMode: 'shared', segmentSize: 4 });
  });

  it('each pop with ack takes the next items under a lock of its own; no pop is refused; plain pops go on', () => {
    const { db, core } = sharedQueue();
    turn(db, core, 0, () => core.push(Array.from({ length: 7 }, (_, n) => item(0, n))));
    const a = heldOf(popAck(db, core, 0, 2, 'A'));
    const b = heldOf(popAck(db, core, 0, 2, 'B'));
    expect(names(a)).toEqual(['0.0', '0.1']);
    expect(names(b)).toEqual(['0.2', '0.3']);
    expect(a.map((i) => i.deliveries)).toEqual([1, 1]);
    expect(names(heldOf(turn(db, core, 0, () => core.pop(1))))).toEqual(['0.4']);
    expect(core.sharedLocks).toEqual({ live: 2, items: 4, nextExpiry: 1000 });
    expect(core.count).toBe(2);
    expect(db.locks.size).toBe(2);
  });

  it('given-back items return to their push-order place, whatever order the locks end in, ahead of undelivered items', () => {
    const { db, core } = sharedQueue();
    turn(db, core, 0, () => core.push([0, 1, 2, 3, 4, 5, 6, 7].map((n) => item(n % 2, n))));
    // Priority 0: 0 2 4 6; priority 1: 1 3 5 7.
    const locks = ['A', 'B', 'C', 'D'].map((id, i) => heldOf(popAck(db, core, 0, 2, id, 1000 + i)));
    expect(locks.map(names)).toEqual([['0.0', '0.2'], ['0.4', '0.6'], ['1.1', '1.3'], ['1.5', '1.7']]);
    turn(db, core, 0, () => core.push([item(0, 8), item(1, 9)]));
    expect(turn(db, core, 0, () => core.release('D', 0))).toBe(2);
    expect(turn(db, core, 0, () => core.release('B', 0))).toBe(2);
    // A and C expire by time: the turn's hook gives them back.
    turn(db, core, 1002, () => undefined);
    expect(core.sharedLocks).toEqual({ live: 0, items: 0, nextExpiry: null });
    const fresh = db.load();
    const all = heldOf(turn(db, fresh, 1002, () => fresh.pop(20)));
    expect(names(all)).toEqual(['0.0', '0.2', '0.4', '0.6', '0.8', '1.1', '1.3', '1.5', '1.7', '1.9']);
    expect(all.map((i) => i.deliveries)).toEqual([1, 1, 1, 1, 0, 1, 1, 1, 1, 0]);
    expect(db.returned.get(0) ?? []).toEqual([]);
    expect(db.record!.priorities).toEqual({});
  });

  it('a priority emptied while its items are held keeps its entry, so returned items go before later pushes', () => {
    const { db, core } = sharedQueue();
    turn(db, core, 0, () => core.push([item(0, 0), item(0, 1)]));
    heldOf(popAck(db, core, 0, 2, 'A'));
    expect(withFetch(db, core, () => core.view())!.priorities.size, 'no waiting item: not shown').toBe(0);
    expect(db.record!.priorities['0']).toMatchObject({ count: 0, held: 2 });
    turn(db, core, 0, () => core.push([item(0, 2)]));
    expect(turn(db, core, 0, () => core.release('A', 0))).toBe(2);
    expect(names(heldOf(turn(db, core, 0, () => core.pop(3))))).toEqual(['0.0', '0.1', '0.2']);
    expect(db.record!.priorities).toEqual({});
  });

  it('acknowledge, extend and release find locks by id: 404 unknown, 410 expired, never INVALID_LOCK_ID', () => {
    const { db, core } = sharedQueue();
    turn(db, core, 0, () => core.push([item(0, 0), item(0, 1), item(0, 2)]));
    popAck(db, core, 0, 1, 'A', 100);
    popAck(db, core, 0, 1, 'B', 100);
    const fresh = db.load();
    expect(turn(db, fresh, 0, () => fresh.acknowledge('nope', 0))).toBe('LOCK_NOT_FOUND');
    expect(turn(db, fresh, 50, () => fresh.extendLock('A', 50, 1000))).toMatchObject({ lockId: 'A', expiresAt: 1050 });
    expect(turn(db, fresh, 60, () => fresh.extendLock('B', 60, 20)), 'a shorter ttl moves the expiry earlier').toMatchObject({ lockId: 'B', expiresAt: 80 });
    expect(fresh.sharedLocks.nextExpiry, 'and the bound with it').toBe(80);
    expect(turn(db, fresh, 100, () => fresh.acknowledge('B', 100)), 'B expired at the start of the turn').toBe('LOCK_EXPIRED');
    expect(turn(db, fresh, 100, () => fresh.release('B', 100))).toBe('LOCK_EXPIRED');
    expect(turn(db, fresh, 100, () => fresh.acknowledge('A', 100))).toBe(1);
    expect(turn(db, fresh, 100, () => fresh.acknowledge('A', 100)), 'acknowledged: gone').toBe('LOCK_NOT_FOUND');
    expect(names(heldOf(turn(db, fresh, 100, () => fresh.pop(5))))).toEqual(['0.1', '0.2']);
  });

  it('the last exclusive lock, expired before the switch to shared mode, answers 410 by its id; other unknown ids 404', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    turn(db, core, 0, () => core.push([item(0, 0), item(0, 1)]));
    turn(db, core, 0, () => core.pop(1, { lockId: 'X', now: 0, ttlMs: 100 }));
    expect(turn(db, core, 100, () => core.updateSettings({ lockMode: 'shared' }))).toMatchObject({ lockMode: 'shared' });
    const fresh = db.load();
    expect(turn(db, fresh, 100, () => fresh.acknowledge('X', 100))).toBe('LOCK_EXPIRED');
    popAck(db, fresh, 100, 1, 'S', 1000);
    for (const call of [() => fresh.release('X', 100), () => fresh.extendLock('X', 100, 10)]) expect(turn(db, fresh, 100, call), 'after a shared lock too').toBe('LOCK_EXPIRED');
    expect(turn(db, fresh, 100, () => fresh.acknowledge('Y', 100))).toBe('LOCK_NOT_FOUND');
    expect(turn(db, fresh, 100, () => fresh.acknowledge('S', 100))).toBe(1);
  });

  it('the expiry hook reads nothing until the earliest expiry; extending keeps a lower bound that one read refreshes', () => {
    const { db, core } = sharedQueue();
    turn(db, core, 0, () => core.push([item(0, 0), item(0, 1)]));
    popAck(db, core, 0, 1, 'A', 100);
    db.reads.due = 0;
    turn(db, core, 99, () => undefined);
    expect(db.reads.due, 'nothing due: no read').toBe(0);
    turn(db, core, 50, () => core.extendLock('A', 50, 1000));
    expect(core.sharedLocks.nextExpiry, 'still the old bound').toBe(100);
    const write = turn(db, core, 100, () => undefined);
    expect(write).toBeUndefined();
    expect(db.reads.due).toBe(1);
    expect(core.sharedLocks.nextExpiry, 'refreshed').toBe(1050);
    expect(db.record!.shared.nextExpiry, 'and written, so the sweep stops finding the queue').toBe(1050);
    turn(db, core, 200, () => undefined);
    expect(db.reads.due, 'no read before the new bound').toBe(1);
  });

  it('view: the locks with the exact earliest expiry', () => {
    const { db, core } = sharedQueue();
    turn(db, core, 0, () => core.push([item(0, 0), item(0, 1)]));
    popAck(db, core, 0, 1, 'A', 100);
    popAck(db, core, 0, 1, 'B', 300);
    turn(db, core, 10, () => core.extendLock('A', 10, 1000));
    const fresh = db.load();
    expect(turn(db, fresh, 10, () => fresh.view())!.locks).toEqual({ count: 2, itemCount: 2, nextExpiresAt: 300 });
    // In one turn: the view, then the earliest lock acknowledged, then the view again.
    startTurn(db, fresh, 20);
    expect(withFetch(db, fresh, () => fresh.view())!.locks).toMatchObject({ nextExpiresAt: 300 });
    expect(withFetch(db, fresh, () => fresh.acknowledge('B', 20))).toBe(1);
    expect(withFetch(db, fresh, () => fresh.view())!.locks).toEqual({ count: 1, itemCount: 1, nextExpiresAt: 1010 });
    endTurn(db, fresh);
  });

  it('more due locks than one turn gives back: the rest in the next turns, or when their id is used', () => {
    const { db, core } = sharedQueue();
    const n = 2 * MAX_EXPIRED_LOCKS_PER_TURN + 20;
    turn(db, core, 0, () => core.push(Array.from({ length: n }, (_, i) => item(0, i))));
    for (let i = 0; i < n; i++) popAck(db, core, 0, 1, `L${i}`, 10 + i);
    turn(db, core, 5000, () => undefined);
    expect(core.sharedLocks.live).toBe(n - MAX_EXPIRED_LOCKS_PER_TURN);
    // The next turn's hook gives back the next hundred (earliest first); the last lock is due but not among them.
    expect(turn(db, core, 5000, () => core.acknowledge(`L${n - 1}`, 5000)), 'due, not yet given back').toBe('LOCK_EXPIRED');
    expect(core.sharedLocks.live).toBe(19);
    turn(db, core, 5000, () => undefined);
    expect(core.sharedLocks).toEqual({ live: 0, items: 0, nextExpiry: null });
    expect(names(heldOf(turn(db, core, 5000, () => core.pop(100)))).slice(0, 3)).toEqual(['0.0', '0.1', '0.2']);
  });

  it('MAX_LOCKS_PER_QUEUE: a pop with ack past it is refused; a plain pop is not', () => {
    const { db, core } = sharedQueue();
    turn(db, core, 0, () => core.push([item(0, 0), item(0, 1), item(0, 2)]));
    popAck(db, core, 0, 1, 'A', 100, 2);
    popAck(db, core, 0, 1, 'B', 100, 2);
    expect(popAck(db, core, 0, 1, 'C', 100, 2)).toEqual({ busy: true });
    expect(names(heldOf(turn(db, core, 0, () => core.pop(1))))).toEqual(['0.2']);
  });

  it('dead letters: an item given back at max_deliveries goes to the dead-letter queue, the rest back; in both modes', () => {
    for (const lockMode of ['exclusive', 'shared'] as const) {
      const db = new FakeDb();
      const core = QueueCore.absent(SETTINGS);
      core.updateSettings({ lockMode, maxDeliveries: 2, deadLetterQueue: 'dead' });
      core.push([item(4, 0), item(4, 1)]);
      endTurn(db, core);
      const first = heldOf(popAck(db, core, 0, 1, 'A'));
      expect(first.map((i) => i.deliveries)).toEqual([1]);
      turn(db, core, 0, () => core.release('A', 0));
      expect(db.deadLetters).toEqual([]);
      const second = heldOf(popAck(db, core, 0, 2, 'B', 100));
      expect([names(second), second.map((i) => i.deliveries)], lockMode).toEqual([['4.0', '4.1'], [2, 1]]);
      turn(db, core, 100, () => undefined);
      expect(db.deadLetters.map((d) => [d.queueId, names([d.item])[0]]), lockMode).toEqual([['dead', '4.0']]);
      const rest = heldOf(turn(db, core, 100, () => core.pop(5, { lockId: 'C', now: 100, ttlMs: 100 })));
      expect([names(rest), rest.map((i) => i.deliveries)], lockMode).toEqual([['4.1'], [2]]);
      expect(withFetch(db, core, () => core.releaseLock('C', 100))).toMatchObject({ returned: 1, outcome: { returned: 0, deadLettered: 1 } });
      endTurn(db, core);
      expect(db.deadLetters.length, lockMode).toBe(2);
      expect(core.count).toBe(0);
    }
  });

  it('without a dead-letter queue, max_deliveries gives items back as ever', () => {
    const { db, core } = sharedQueue();
    turn(db, core, 0, () => core.updateSettings({ maxDeliveries: 1 }));
    turn(db, core, 0, () => core.push([item(0, 0)]));
    popAck(db, core, 0, 1, 'A');
    turn(db, core, 0, () => core.release('A', 0));
    expect(db.deadLetters).toEqual([]);
    expect(core.count).toBe(1);
  });

  it('exclusive mode keeps delivery counts of items given back to the front', () => {
    const db = new FakeDb();
    const core = QueueCore.absent(SETTINGS);
    turn(db, core, 0, () => core.push([item(0, 0), item(0, 1)]));
    popAck(db, core, 0, 2, 'A', 10);
    turn(db, core, 10, () => undefined);
    const fresh = db.load();
    const again = heldOf(popAck(db, fresh, 10, 2, 'B', 10));
    expect(again.map((i) => i.deliveries)).toEqual([2, 2]);
  });

  it('deleteQueue counts the items shared locks hold and those given back', () => {
    const { db, core } = sharedQueue();
    turn(db, core, 0, () => core.push([item(0, 0), item(0, 1), item(0, 2)]));
    popAck(db, core, 0, 1, 'A');
    popAck(db, core, 0, 1, 'B');
    turn(db, core, 0, () => core.release('B', 0));
    expect(core.deleteQueue()).toBe(3);
  });

  /** The queue as a model: per priority the available items in push order; locks; the dead-letter queue. */
  class Model {
    readonly available = new Map<number, { seq: number; priority: number; deliveries: number }[]>();
    readonly locks = new Map<string, { items: { seq: number; priority: number; deliveries: number }[]; expiresAt: number; expired: boolean }>();
    readonly dead: number[] = [];
    constructor(readonly maxDeliveries: number | null) {}

    push(priority: number, seq: number): void {
      const list = this.available.get(priority) ?? [];
      list.push({ seq, priority, deliveries: 0 });
      this.available.set(priority, list);
    }

    pop(depth: number): { seq: number; priority: number; deliveries: number }[] {
      const out: { seq: number; priority: number; deliveries: number }[] = [];
      for (const p of [...this.available.keys()].sort((a, b) => a - b)) {
        const list = this.available.get(p)!;
        while (out.length < depth && list.length > 0) out.push(list.shift()!);
      }
      return out;
    }

    giveBack(items: { seq: number; priority: number; deliveries: number }[]): void {
      for (const i of items) {
        if (this.maxDeliveries !== null && i.deliveries >= this.maxDeliveries) {
          this.dead.push(i.seq);
          continue;
        }
        const list = this.available.get(i.priority) ?? [];
        list.push(i);
        list.sort((a, b) => a.seq - b.seq);
        this.available.set(i.priority, list);
      }
    }

    expire(now: number): void {
      for (const lock of [...this.locks.values()].sort((a, b) => a.expiresAt - b.expiresAt)) {
        if (lock.expired || lock.expiresAt > now) continue;
        lock.expired = true;
        this.giveBack(lock.items);
      }
    }

    count(): number {
      let n = 0;
      for (const list of this.available.values()) n += list.length;
      return n;
    }
  }

  it('agrees with the model under random operations, reactivations and clock advances (property)', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('push' as const), priorities: fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 1, maxLength: 8 }) }),
      fc.record({ kind: fc.constant('pop' as const), depth: fc.integer({ min: 1, max: 5 }), ack: fc.boolean(), ttl: fc.integer({ min: 1, max: 40 }) }),
      fc.record({ kind: fc.constantFrom('ack' as const, 'release' as const, 'extend' as const), pick: fc.nat() }),
      fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 1, max: 30 }) }),
      fc.record({ kind: fc.constant('reload' as const) }),
    );
    fc.assert(
      fc.property(fc.array(op, { minLength: 1, maxLength: 80 }), fc.option(fc.integer({ min: 1, max: 3 }), { nil: null }), (ops, maxDeliveries) => {
        const db = new FakeDb();
        let core = QueueCore.absent(SETTINGS);
        core.updateSettings({ lockMode: 'shared', maxDeliveries, deadLetterQueue: maxDeliveries === null ? null : 'dead' });
        endTurn(db, core);
        const model = new Model(maxDeliveries);
        let seq = 0;
        let now = 0;
        let lockNo = 0;
        const seqOf = (i: HeldItem): number => (JSON.parse(i.json) as { n: number }).n;
        for (const [t, o] of ops.entries()) {
          const label = `op ${t} ${JSON.stringify(o)} at ${now}`;
          model.expire(now);
          startTurn(db, core, now);
          if (o.kind === 'push') {
            const pushed = o.priorities.map((p) => item(p, seq++));
            core.push(pushed);
            pushed.forEach((i) => model.push(i.priority, seqOf(i)));
          } else if (o.kind === 'pop') {
            const lockId = `L${lockNo++}`;
            const outcome = withFetch(db, core, () => core.pop(o.depth, o.ack ? { lockId, now, ttlMs: o.ttl } : undefined));
            const got = heldOf(outcome);
            const want = model.pop(o.depth);
            expect(got.map(seqOf), label).toEqual(want.map((i) => i.seq));
            if (o.ack && want.length > 0) {
              want.forEach((i) => (i.deliveries += 1));
              expect(got.map((i) => i.deliveries), label).toEqual(want.map((i) => i.deliveries));
              model.locks.set(lockId, { items: want, expiresAt: now + o.ttl, expired: false });
            }
          } else if (o.kind === 'ack' || o.kind === 'release' || o.kind === 'extend') {
            const ids = [...model.locks.keys()];
            const id = ids.length === 0 ? 'none' : ids[o.pick % ids.length];
            const lock = model.locks.get(id);
            const expected = !lock ? 'LOCK_NOT_FOUND' : lock.expired ? 'LOCK_EXPIRED' : undefined;
            const result = withFetch(db, core, () => (o.kind === 'ack' ? core.acknowledge(id, now) : o.kind === 'release' ? core.release(id, now) : core.extendLock(id, now, 20)));
            if (expected) expect(result, label).toBe(expected);
            else if (o.kind === 'extend') {
              expect(result, label).toMatchObject({ expiresAt: now + 20 });
              lock!.expiresAt = now + 20;
            } else {
              expect(result, label).toBe(lock!.items.length);
              model.locks.delete(id);
              if (o.kind === 'release') model.giveBack(lock!.items);
            }
          } else if (o.kind === 'advance') {
            now += o.ms;
          }
          endTurn(db, core);
          if (o.kind === 'reload') core = db.load();
          expect(core.count, `${label}: count`).toBe(model.count());
          const live = [...model.locks.values()].filter((l) => !l.expired);
          expect(core.sharedLocks.live, `${label}: live locks`).toBe(live.length);
          expect(db.deadLetters.map((d) => seqOf(d.item)), `${label}: dead letters`).toEqual(model.dead);
        }
        // Everything still waiting comes out in the model's order.
        now += 1000;
        model.expire(now);
        startTurn(db, core, now);
        const rest = heldOf(withFetch(db, core, () => core.pop(1000)));
        endTurn(db, core);
        expect(rest.map(seqOf)).toEqual(model.pop(1000).map((i) => i.seq));
        expect(db.record!.priorities).toEqual({});
        expect([...db.returned.values()].flat()).toEqual([]);
      }),
      { numRuns: Number(process.env.PROPERTY_RUNS ?? 300) },
    );
  }, 120_000);
});
