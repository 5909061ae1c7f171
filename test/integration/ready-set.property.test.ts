import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Clock } from '../../src/common/clock.js';
import { UnitOfWork } from '../../src/database/unit-of-work.js';
import { DelaySweeper } from '../../src/delay/delay-sweeper.js';
import { LockSweeper } from '../../src/lock/lock-sweeper.js';
import { TurnRunner } from '../../src/queue/runtime/turn-runner.js';
import { propertyRuns } from '../support/queue-helpers.js';
import { databaseKind, removeDataDir, startService, type TestService, uniqueQueueId } from '../support/service.js';

/**
 * The ready set of fair pops (`queues.ready`, kept by the database on every write of a queue's
 * row) against a small model of a few queues under one prefix: after every push (now or delayed),
 * pop (with or without a lock), acknowledge, release, pause, resume and move of the clock (locks
 * expire, delayed items come due: each queue then gets the empty turn the sweeps give it), the
 * queues the database calls ready are exactly those the model says have items to hand out and
 * are not paused; and a fair pop serves one of the queues it could serve (ready, not locked), the
 * item at its front, or answers empty when there is none.
 *
 * The service's clock is the model's (a year ahead of real time, so that no other process's
 * sweep on a shared PostgreSQL meets these queues' locks, and this service's own sweeps are
 * stopped). Clock moves of 1001 and 7001 ms never land exactly on a lock's expiry (5 s) or a
 * delay's end (3 s), so no boundary is left to interpretation. A failure prints fast-check's seed
 * and path: replay with FC_SEED and FC_PATH.
 */

const replay: Partial<fc.Parameters<unknown>> = process.env.FC_SEED ? { seed: Number(process.env.FC_SEED), path: process.env.FC_PATH, endOnFailure: true } : {};
const LEAD_MS = 365 * 24 * 3600 * 1000;
const TTL_MS = 5_000;
const DELAY_MS = 3_000;
const NAMES = ['a', 'b', 'c'] as const;
type Name = (typeof NAMES)[number];

type Command =
  | { kind: 'push'; q: Name; delayed: boolean }
  | { kind: 'pop'; q: Name; ack: boolean; depth: 1 | 2 }
  | { kind: 'ack' | 'release'; q: Name }
  | { kind: 'pause'; q: Name; paused: boolean }
  | { kind: 'advance'; ms: 1001 | 7001 }
  | { kind: 'fairPop'; ack: boolean };

const nameArb = fc.constantFrom(...NAMES);
const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { arbitrary: fc.record({ kind: fc.constant('push' as const), q: nameArb, delayed: fc.boolean() }), weight: 4 },
  { arbitrary: fc.record({ kind: fc.constant('pop' as const), q: nameArb, ack: fc.boolean(), depth: fc.constantFrom(1 as const, 2 as const) }), weight: 3 },
  { arbitrary: fc.record({ kind: fc.constantFrom('ack' as const, 'release' as const), q: nameArb }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant('pause' as const), q: nameArb, paused: fc.boolean() }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.constantFrom(1001 as const, 7001 as const) }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant('fairPop' as const), ack: fc.boolean() }), weight: 3 },
);

/** One queue as the model sees it: item numbers at the front first. */
interface ModelQueue {
  visible: number[];
  delayed: { seq: number; due: number }[];
  lock?: { id?: string; items: number[]; expiresAt: number };
  paused: boolean;
}

class Run {
  private now = Date.now() + LEAD_MS;
  private seq = 0;
  private readonly queues = new Map<Name, ModelQueue>(NAMES.map((n) => [n, { visible: [], delayed: [], paused: false }]));

  constructor(
    private readonly svc: TestService,
    private readonly prefix: string,
  ) {}

  private id(q: Name): string {
    return this.prefix + q;
  }

  /** What a turn of the queue does first at `now`: an expired lock's items back to the front, due delayed items to the tail. */
  private settle(m: ModelQueue): void {
    if (m.lock && m.lock.expiresAt <= this.now) {
      m.visible.unshift(...m.lock.items);
      m.lock = undefined;
    }
    const due = m.delayed.filter((d) => d.due <= this.now).sort((x, y) => x.due - y.due || x.seq - y.seq);
    m.delayed = m.delayed.filter((d) => d.due > this.now);
    m.visible.push(...due.map((d) => d.seq));
  }

  private take(m: ModelQueue, depth: number, ack: boolean, lockId: string | undefined): void {
    const items = m.visible.splice(0, depth);
    if (ack && items.length > 0) m.lock = { id: lockId, items, expiresAt: this.now + TTL_MS };
  }

  private servable(m: ModelQueue): boolean {
    return m.visible.length > 0 && !m.paused && !m.lock;
  }

  async run(commands: Command[]): Promise<void> {
    const clock = vi.spyOn(this.svc.app.get(Clock), 'now').mockImplementation(() => this.now);
    try {
      for (const [i, command] of commands.entries()) {
        await this.apply(command);
        const ready = NAMES.filter((n) => {
          const m = this.queues.get(n)!;
          return m.visible.length > 0 && !m.paused;
        }).map((n) => this.id(n));
        expect(await this.readySet(), `after command ${i}: ${JSON.stringify(command)}`).toEqual(ready);
      }
    } finally {
      clock.mockRestore();
    }
  }

  private async readySet(): Promise<string[]> {
    const rows = await this.svc.app
      .get(UnitOfWork)
      .autocommit.query<{ queue_id: string }>(`SELECT queue_id FROM queues WHERE ready AND queue_id LIKE $1 ORDER BY queue_id`, [`${this.prefix}%`]);
    return rows.map((r) => r.queue_id);
  }

  private async apply(c: Command): Promise<void> {
    const http = this.svc.http;
    switch (c.kind) {
      case 'push': {
        const seq = ++this.seq;
        const res = await http.post(`/queue/${this.id(c.q)}/push`).send({ item: { seq }, ...(c.delayed ? { delay_seconds: DELAY_MS / 1000 } : {}) });
        expect(res.status).toBe(200);
        const m = this.queues.get(c.q)!;
        this.settle(m);
        if (c.delayed) m.delayed.push({ seq, due: this.now + DELAY_MS });
        else m.visible.push(seq);
        return;
      }
      case 'pop': {
        const res = await http.post(`/queue/${this.id(c.q)}/pop`).query({ require_ack: c.ack, depth: c.depth, ttl_seconds: TTL_MS / 1000 });
        const m = this.queues.get(c.q)!;
        this.settle(m);
        // A paused queue answers so before any 423.
        if (m.lock && !m.paused) {
          expect(res.status).toBe(423);
          return;
        }
        expect(res.status).toBe(200);
        const expected = m.paused ? [] : m.visible.slice(0, c.depth);
        expect((res.body.items as { seq: number }[]).map((i) => i.seq)).toEqual(expected);
        if (!m.paused) this.take(m, c.depth, c.ack, res.body.lock_id as string | undefined);
        return;
      }
      case 'ack':
      case 'release': {
        const m = this.queues.get(c.q)!;
        this.settle(m);
        if (!m.lock) return;
        const res = await http.post(`/queue/${this.id(c.q)}/${c.kind === 'ack' ? 'acknowledge' : 'release'}`).send({ lock_id: m.lock.id });
        expect(res.status).toBe(200);
        if (c.kind === 'release') m.visible.unshift(...m.lock.items);
        m.lock = undefined;
        return;
      }
      case 'pause': {
        const res = await http.put(`/queue/${this.id(c.q)}/settings`).send({ paused: c.paused });
        expect(res.status).toBe(200);
        const m = this.queues.get(c.q)!;
        this.settle(m);
        m.paused = c.paused;
        return;
      }
      case 'advance': {
        this.now += c.ms;
        // What the lock and delay sweeps do for a queue with a due lock or due items: an empty turn.
        for (const n of NAMES) {
          await this.svc.app.get(TurnRunner).run(this.id(n), { kind: 'none' });
          this.settle(this.queues.get(n)!);
        }
        return;
      }
      case 'fairPop': {
        const res = await http.post('/queues/pop').query({ prefix: this.prefix, require_ack: c.ack, ttl_seconds: TTL_MS / 1000 });
        expect(res.status).toBe(200);
        const servable = NAMES.filter((n) => this.servable(this.queues.get(n)!));
        if (servable.length === 0) {
          expect(res.body.count).toBe(0);
          return;
        }
        const served = NAMES.find((n) => this.id(n) === res.body.queue_id);
        expect(served && servable.includes(served), `served ${res.body.queue_id} of ${servable.join(', ')}`).toBe(true);
        const m = this.queues.get(served!)!;
        expect((res.body.items as { seq: number }[]).map((i) => i.seq)).toEqual(m.visible.slice(0, 1));
        this.take(m, 1, c.ack, res.body.lock_id as string | undefined);
        return;
      }
    }
  }
}

describe(`the ready set against a model (${databaseKind})`, () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startService({ env: { LOCK_SWEEP_INTERVAL_MS: '60000' } });
    await svc.app.get(LockSweeper).onModuleDestroy();
    await svc.app.get(DelaySweeper).onModuleDestroy();
  });
  afterAll(async () => {
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  it(
    'holds exactly the queues with items to hand out, through pushes, pops, locks, expiry, pauses and delays; fair pops serve from it',
    { timeout: 300_000 },
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(commandArb, { minLength: 1, maxLength: 40, size: 'max' }), async (commands) => {
          await new Run(svc, `${uniqueQueueId('ready')}-`).run(commands);
        }),
        { ...replay, numRuns: propertyRuns(40), interruptAfterTimeLimit: 240_000, markInterruptAsFailure: true },
      );
    },
  );
});
