import { expect } from 'vitest';
import { drive, type SyncRowReader } from '../../src/queue/core/core-driver.js';
import { QueueCore } from '../../src/queue/core/queue-core.js';
import { WHOLE_SEGMENT } from '../../src/queue/core/write-set.js';
import {
  NO_DELAYED,
  Needed,
  type OrNeed,
  NO_SHARED_LOCKS,
  withTags,
  type HeldItem,
  type ItemTags,
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
} from '../../src/queue/core/types.js';

/**
 * Shared lock mode, delivery counts and dead letters in the pure core, against a fake database
 * that keeps what the turn statement keeps: segment rows (with deliveries), the offload store,
 * `shared_locks`, `returned_items`, and the dead-letter queue's incoming items. Driven the way
 * the turn runner drives the core: the expiry hooks first, then the operations, fetching what
 * they ask for, then load back, offload, write and commit.
 */
export class FakeDb {
  readonly rows = new Map<string, Map<number, { json: string; deliveries: number } & ItemTags>>();
  readonly store = new Map<string, string[]>();
  /** Packed in-state segments (`TurnWrite.packs`): their items at positions 0..n-1 (popped ones kept), with their tags. */
  readonly packed = new Map<string, { json: string; from?: string; headers?: string }[]>();
  readonly locks = new Map<string, LockState>();
  /** `returned_items` per priority. */
  readonly returned = new Map<number, ReturnedEntry[]>();
  /** Items written to the dead-letter queue, in order. */
  readonly deadLetters: { queueId: string; item: HeldItem }[] = [];
  record:
    { version: number; settings: QueueSettings; priorities: Record<string, PriorityMetadata>; lock: LockState | null; shared: SharedLockSummary } | undefined;
  reads = { locks: 0, due: 0, next: 0, returned: 0 };

  fetch(ref: SegmentRef): SegmentFetch {
    const k = `${ref.priority}:${ref.segment}`;
    if (ref.from === 'state') {
      // As the repository reads them: the rows, and the packed items where no row has their position.
      const rows = new Map<number, { json: string; deliveries: number } & ItemTags>(
        (this.packed.get(k) ?? []).map((p, position) => [position, withTags({ json: p.json, deliveries: 0 }, p)]),
      );
      for (const [position, row] of this.rows.get(k) ?? []) rows.set(position, row);
      return {
        entries: [...rows.entries()]
          .sort((a, b) => a[0] - b[0])
          .map(([position, r]) => withTags(r.deliveries ? { position, json: r.json, deliveries: r.deliveries } : { position, json: r.json }, r)),
      };
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
      if (d.through === WHOLE_SEGMENT) this.packed.delete(`${d.priority}:${d.segment}`);
      const rows = this.rows.get(`${d.priority}:${d.segment}`);
      for (const position of [...(rows?.keys() ?? [])]) if (position >= d.from && position <= d.through) rows!.delete(position);
    }
    for (const i of write.inserts) {
      const k = `${i.priority}:${i.segment}`;
      if (!this.rows.has(k)) this.rows.set(k, new Map());
      expect(this.rows.get(k)!.has(i.position), `duplicate key ${k}:${i.position}`).toBe(false);
      this.rows.get(k)!.set(i.position, withTags({ json: i.json, deliveries: i.deliveries ?? 0 }, i));
    }
    for (const p of write.packs ?? []) {
      this.packed.set(
        `${p.priority}:${p.segment}`,
        p.items.map((json, i) => ({ json, ...(p.from?.[i] ? { from: p.from[i] } : {}), ...(p.headers?.[i] ? { headers: p.headers[i] } : {}) })),
      );
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
      expect(
        list.some((e) => e.segment === r.segment && e.position === r.position),
        `duplicate given-back key ${JSON.stringify(r)}`,
      ).toBe(false);
      list.push(withTags({ segment: r.segment, position: r.position, json: r.json, deliveries: r.deliveries }, r));
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
      // Every live lock's items count, the active exclusive lock's as the shared ones'.
      const holders = lock?.state === 'active' ? [...live, lock] : live;
      const held = holders.flatMap((l) => l.items).filter((i) => i.priority === Number(p)).length;
      expect(meta.held ?? 0, `held count of priority ${p}`).toBe(held);
    }
  }

  load(): QueueCore {
    if (!this.record) return QueueCore.absent(SETTINGS);
    const { version, settings, priorities, lock, shared } = this.record;
    return QueueCore.fromRecord({ version, settings, priorities, lock, delayed: NO_DELAYED, shared });
  }
}

export const SETTINGS: QueueSettings = { segmentSize: 3, bufferSegments: 1 };

/** Runs a core operation with its reads, one round at most (see the other fake database's `withFetch`). */
export function withFetch<T>(db: FakeDb, core: QueueCore, fn: () => OrNeed<T>): T {
  return drive(core, fn, db.reader, 1);
}

/** The start of a turn: the expiry hooks. */
export function startTurn(db: FakeDb, core: QueueCore, now: number): void {
  withFetch(db, core, () => core.expireLock(now));
  withFetch(db, core, () => core.expireSharedLocks(now));
}

export function endTurn(db: FakeDb, core: QueueCore): TurnWrite | undefined {
  withFetch(db, core, () => core.offload.loadBack());
  const moves = withFetch(db, core, () => core.offload.plan());
  for (const move of moves) {
    db.store.set(`${move.priority}:${move.segment}`, [...move.items]);
    core.offload.offloaded(move.priority, move.segment);
  }
  const write = core.pendingWrite(() => 1000);
  if (write) db.apply(write);
  for (const d of core.storeDeletes()) db.store.delete(`${d.priority}:${d.segment}`);
  core.committed(write);
  return write;
}

/** One turn of one operation (hooks first, as the runner does). */
export function turn<T>(db: FakeDb, core: QueueCore, now: number, fn: () => OrNeed<T>): T {
  startTurn(db, core, now);
  const result = withFetch(db, core, fn);
  endTurn(db, core);
  return result;
}

export const item = (priority: number, n: number): HeldItem => ({ priority, json: JSON.stringify({ p: priority, n }) });
export const names = (items: readonly HeldItem[]): string[] =>
  items.map((i) => {
    const { p, n } = JSON.parse(i.json) as { p: number; n: number };
    return `${p}.${n}`;
  });

export function sharedQueue(): { db: FakeDb; core: QueueCore } {
  const db = new FakeDb();
  const core = QueueCore.absent(SETTINGS);
  expect(core.updateSettings({ lockMode: 'shared' })).toMatchObject({ lockMode: 'shared' });
  endTurn(db, core);
  return { db, core };
}

export function popAck(db: FakeDb, core: QueueCore, now: number, depth: number, lockId: string, ttlMs = 1000, maxLocks?: number) {
  return turn(db, core, now, () => core.pop(depth, now, { lockId, ttlMs, maxLocks }));
}

export function heldOf(outcome: ReturnType<QueueCore['pop']>): HeldItem[] {
  if (outcome instanceof Needed || !('items' in outcome)) throw new Error(`no items: ${JSON.stringify(outcome)}`);
  return outcome.items;
}
