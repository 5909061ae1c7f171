import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { QueueCore } from './queue-core.js';
import type { HeldItem } from './types.js';
import { endTurn, FakeDb, heldOf, item, SETTINGS, startTurn, withFetch } from '../../../test/support/shared-locks-fake-db.js';

describe('QueueCore in shared lock mode', () => {
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
            core.push(pushed, 0, 0);
            pushed.forEach((i) => model.push(i.priority, seqOf(i)));
          } else if (o.kind === 'pop') {
            const lockId = `L${lockNo++}`;
            const outcome = withFetch(db, core, () => core.pop(o.depth, now, o.ack ? { lockId, ttlMs: o.ttl } : undefined));
            const got = heldOf(outcome);
            const want = model.pop(o.depth);
            expect(got.map(seqOf), label).toEqual(want.map((i) => i.seq));
            if (o.ack && want.length > 0) {
              want.forEach((i) => (i.deliveries += 1));
              expect(
                got.map((i) => i.deliveries),
                label,
              ).toEqual(want.map((i) => i.deliveries));
              model.locks.set(lockId, { items: want, expiresAt: now + o.ttl, expired: false });
            }
          } else if (o.kind === 'ack' || o.kind === 'release' || o.kind === 'extend') {
            const ids = [...model.locks.keys()];
            const id = ids.length === 0 ? 'none' : ids[o.pick % ids.length];
            const lock = model.locks.get(id);
            const expected = !lock ? 'LOCK_NOT_FOUND' : lock.expired ? 'LOCK_EXPIRED' : undefined;
            const result = withFetch(db, core, () =>
              o.kind === 'ack' ? core.acknowledge(id, now) : o.kind === 'release' ? core.release(id, now) : core.extendLock(id, now, 20),
            );
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
          expect(
            db.deadLetters.map((d) => seqOf(d.item)),
            `${label}: dead letters`,
          ).toEqual(model.dead);
        }
        // Everything still waiting comes out in the model's order.
        now += 1000;
        model.expire(now);
        startTurn(db, core, now);
        const rest = heldOf(withFetch(db, core, () => core.pop(1000, 0)));
        endTurn(db, core);
        expect(rest.map(seqOf)).toEqual(model.pop(1000).map((i) => i.seq));
        expect(db.record!.priorities).toEqual({});
        expect([...db.returned.values()].flat()).toEqual([]);
      }),
      { numRuns: Number(process.env.PROPERTY_RUNS ?? 300) },
    );
  }, 120_000);
});
