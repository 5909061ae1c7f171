import { describe, expect, it } from 'vitest';
import { drive, type SyncRowReader } from './core-driver.js';
import { QueueCore } from './queue-core.js';
import { withTags, type DelayedItem, type OrNeed, type HeldItem, type NewItem, type TurnWrite } from './types.js';
import { FakeDb, SETTINGS } from '../../../test/support/shared-locks-fake-db.js';

/**
 * Item headers in the core: an item's `headers` (its headers' JSON text) stay with it wherever
 * it rests, as `from` does: segments, the exclusive lock and shared locks, given-back items,
 * retry delays, delayed items, dead letters, redrive and offload moves. Absent when it has none.
 */
class TaggedDb extends FakeDb {
  delayed: DelayedItem[] = [];
  readonly writes: TurnWrite[] = [];

  override readonly reader: SyncRowReader = {
    segments: (refs) => refs.map((ref) => this.fetch(ref)),
    dueItems: (now, limit) => {
      const due = this.delayed.filter((d) => d.dueAt <= now).slice(0, limit);
      const rest = this.delayed.filter((d) => !due.includes(d));
      return { items: due, nextDueAt: rest[0]?.dueAt ?? null };
    },
    liveDedupIds: () => new Set(),
    lockRows: (need) => this.fetchLockRows(need),
  };

  override apply(write: TurnWrite): void {
    super.apply(write);
    this.writes.push(write);
    const through = write.delayedDeleteThrough;
    if (through) this.delayed = this.delayed.filter((d) => d.dueAt > through.dueAt || (d.dueAt === through.dueAt && d.seq > through.seq));
    this.delayed.push(...write.delayedInserts);
    this.delayed.sort((a, b) => a.dueAt - b.dueAt || a.seq - b.seq);
  }
}

const run = <T>(db: TaggedDb, core: QueueCore, fn: () => OrNeed<T>): T => drive(core, fn, db.reader, 1);

/** One turn as the runner runs it (no offloading: the queues here stay within the buffer). */
function turn<T>(db: TaggedDb, core: QueueCore, now: number, fn: () => OrNeed<T> = () => undefined as T): T {
  run(db, core, () => core.moveDueItems(now));
  run(db, core, () => core.expireLock(now));
  run(db, core, () => core.expireSharedLocks(now));
  const result = run(db, core, fn);
  const write = core.pendingWrite(() => 1000);
  if (write) db.apply(write);
  core.committed(write);
  return result;
}

const H = (n: number): string => JSON.stringify({ n: String(n) });
/** Item `n` of priority 0; with headers when `tagged`. */
const entry = (n: number, tagged: boolean, extra: Partial<NewItem> = {}): NewItem => ({
  priority: 0,
  json: JSON.stringify({ n }),
  ...(tagged ? { headers: H(n) } : {}),
  ...extra,
});
const tags = (items: readonly HeldItem[]): (string | undefined)[] => items.map((i) => i.headers);
const popped = (outcome: ReturnType<QueueCore['pop']>): HeldItem[] => ('items' in outcome ? outcome.items : []);

function queue(settings: Parameters<QueueCore['updateSettings']>[0] = {}): { db: TaggedDb; core: QueueCore } {
  const db = new TaggedDb();
  const core = QueueCore.absent(SETTINGS);
  turn(db, core, 0, () => core.updateSettings(settings));
  return { db, core };
}

describe('item headers in the core', () => {
  it('withTags adds only the tags present, and returns its target when there are none', () => {
    const target = { json: '{}' };
    expect(withTags(target, {})).toBe(target);
    expect(withTags(target, { headers: 'h' })).toEqual({ json: '{}', headers: 'h' });
    expect(withTags(target, { from: 'q' })).toEqual({ json: '{}', from: 'q' });
    expect(withTags(target, { from: 'q', headers: 'h' })).toEqual({ json: '{}', from: 'q', headers: 'h' });
  });

  it('a push writes headers with the rows of the items that have them only; a pop hands them out; from the table too', () => {
    const { db, core } = queue();
    turn(db, core, 0, () => core.push([entry(1, true), entry(2, false)], 0, 0));
    const inserts = db.writes.at(-1)!.inserts;
    expect(inserts.map((i) => i.headers)).toEqual([H(1), undefined]);
    expect('headers' in inserts[1]).toBe(false);
    // A fresh core reads the rows back.
    const fresh = db.load();
    expect(tags(popped(turn(db, fresh, 0, () => fresh.pop(10, 0))))).toEqual([H(1), undefined]);
  });

  it('exclusive lock: held with their headers, given back by release and by expiry with them', () => {
    const { db, core } = queue();
    turn(db, core, 0, () => core.push([entry(1, true), entry(2, false)], 0, 0));
    expect(tags(popped(turn(db, core, 0, () => core.pop(10, 0, { lockId: 'L', ttlMs: 1000 }))))).toEqual([H(1), undefined]);
    const saved = db.writes.at(-1)!.lock;
    expect(saved?.op === 'upsert' ? tags(saved.lock.items) : []).toEqual([H(1), undefined]);
    turn(db, core, 0, () => core.releaseLock('L', 0));
    expect(tags(popped(turn(db, core, 0, () => core.pop(10, 0, { lockId: 'M', ttlMs: 1000 }))))).toEqual([H(1), undefined]);
    // Expired (at the next turn after its expiry).
    expect(tags(popped(turn(db, core, 2000, () => core.pop(10, 0))))).toEqual([H(1), undefined]);
  });

  it('shared locks: held with their headers in the lock rows, given back (among given-back items) with them', () => {
    const { db, core } = queue({ lockMode: 'shared' });
    turn(db, core, 0, () => core.push([entry(1, true), entry(2, false), entry(3, true)], 0, 0));
    expect(tags(popped(turn(db, core, 0, () => core.pop(1, 0, { lockId: 'A', ttlMs: 1000 }))))).toEqual([H(1)]);
    expect(tags(popped(turn(db, core, 0, () => core.pop(1, 0, { lockId: 'B', ttlMs: 5000 }))))).toEqual([undefined]);
    expect(tags(db.locks.get('A')!.items)).toEqual([H(1)]);
    // A expires: its item waits among the given-back items (a returned_items row), ahead of 3.
    const fresh = db.load();
    expect(tags(popped(turn(db, fresh, 2000, () => fresh.pop(10, 0))))).toEqual([H(1), H(3)]);
  });

  it('retry delays: a released item waits among the delayed items with its headers, and comes back with them', () => {
    const { db, core } = queue({ retryDelaySeconds: 5, retryBackoff: 'fixed' });
    turn(db, core, 0, () => core.push([entry(1, true), entry(2, false)], 0, 0));
    turn(db, core, 0, () => core.pop(10, 0, { lockId: 'L', ttlMs: 1000 }));
    turn(db, core, 0, () => core.releaseLock('L', 0));
    expect(db.delayed.map((d) => d.headers)).toEqual([H(1), undefined]);
    expect(tags(popped(turn(db, core, 6000, () => core.pop(10, 0))))).toEqual([H(1), undefined]);
  });

  it('delayed pushes keep their headers until due', () => {
    const { db, core } = queue();
    turn(db, core, 0, () => core.push([entry(1, true, { delayMs: 1000 }), entry(2, false, { delayMs: 1000 })], 0, 0));
    expect(db.delayed.map((d) => d.headers)).toEqual([H(1), undefined]);
    expect(tags(popped(turn(db, core, 1000, () => core.pop(10, 0))))).toEqual([H(1), undefined]);
  });

  it('dead letters and redriven items carry their headers', () => {
    const { db, core } = queue({ maxDeliveries: 1, deadLetterQueue: 'dlq' });
    turn(db, core, 0, () => core.push([entry(1, true), entry(2, false)], 0, 0));
    turn(db, core, 0, () => core.pop(10, 0, { lockId: 'L', ttlMs: 1000 }));
    turn(db, core, 0, () => core.releaseLock('L', 0));
    expect(db.deadLetters.map((d) => d.item.headers)).toEqual([H(1), undefined]);

    const dlq = QueueCore.fromRecord({ version: 1, settings: SETTINGS, priorities: {}, lock: null, delayed: { count: 2, nextDueAt: 0, nextSeq: 2 } });
    const due: DelayedItem[] = db.deadLetters.map((d, seq) => withTags({ dueAt: 0, seq, priority: 0, json: d.item.json }, { ...d.item, from: 'q' }));
    const reader: SyncRowReader = { ...db.reader, dueItems: () => ({ items: due, nextDueAt: null }) };
    drive(dlq, () => dlq.moveDueItems(0), reader);
    drive(dlq, () => dlq.redrive({ queueId: 'dlq', skip: 0, limit: 10 }), reader);
    expect(dlq.pendingWrite(() => 1)!.redriven.map((r) => r.headers)).toEqual([H(1), undefined]);
  });

  it('offload moves carry the headers of their items, parallel to them; none when no item has any', () => {
    const db = new TaggedDb();
    const core = QueueCore.absent({ segmentSize: 2, bufferSegments: 0 });
    run(db, core, () =>
      core.push(
        [1, 2, 3, 4, 5, 6, 7].map((n) => entry(n, n === 4)),
        0,
        0,
      ),
    );
    const moves = run(db, core, () => core.offload.plan());
    // Segment 0 (1, 2) is the head; 1 (3, 4) and 2 (5, 6) move; 3 (7) is the tail.
    expect(moves.map((m) => m.headers)).toEqual([[null, H(4)], undefined]);
  });
});
