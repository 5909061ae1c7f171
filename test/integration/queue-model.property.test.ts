import { DEFAULT_CONTROLS } from '../support/controls.js';
import fc from 'fast-check';
import type { Response } from 'supertest';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Clock } from '../../src/common/clock.js';
import { DelaySweeper } from '../../src/delay/delay-sweeper.js';
import { LockSweeper } from '../../src/lock/lock-sweeper.js';
import { ActorRegistry } from '../../src/queue/runtime/actor-registry.js';
import { expectLockError, expectQueueLocked, listed, LOCK_ID_PATTERN } from '../support/lock-helpers.js';
import {
  applyCommand,
  BOGUS_LOCK_ID,
  Item,
  LockIdChoice,
  ModelOutcome,
  ModelSettings,
  PushEntry,
  QueueCommand,
  QueueModel,
  SettingsChoice,
} from '../support/queue-model.js';
import { databaseKind, removeDataDir, startService, TestService, uniqueQueueId } from '../support/service.js';
import { propertyRuns } from '../support/queue-helpers.js';

/**
 * Random command sequences run against the real service over HTTP and against the in-memory
 * model (test/support/queue-model.ts); after every command the answers and the inspection
 * endpoint must agree with the model, and the segment metadata must keep its invariants.
 * A `deactivate` command drops the queue's actor from memory (as the idle sweep does), so the
 * state must also survive being rebuilt from the database.
 *
 * Acknowledgement locks (the `ack` command set): pop with `require_ack`, acknowledge,
 * extend-lock and release with the newest, an older, a bogus or no lock id, and `advance` /
 * `advanceToExpiry`, which move a simulated clock so that locks expire. The service's `Clock`
 * is mocked to return exactly the model's time (it does not move with real time), so expiries
 * are predicted to the millisecond, boundaries included. That time starts a year ahead of real
 * time ({@link SIMULATED_CLOCK_LEAD_MS}): another process's lock sweep on a shared PostgreSQL
 * (real clock, or a test's clock moved by minutes) can then never find these locks due, and
 * expiry is driven only by this run's operations. This service's own sweep is stopped (it
 * would otherwise sweep the whole database with the simulated clock: a year ahead, it would
 * expire every other test's locks).
 * A failure prints fast-check's seed and path, which replay it: pass them as
 * `{ seed, path, endOnFailure: true }` in the `fc.assert` parameters, or as FC_SEED and
 * FC_PATH in the environment (with `-t` naming the test).
 */

/** The replay of a failure given by FC_SEED / FC_PATH, if any (see above). */
const replay: Partial<fc.Parameters<unknown>> = process.env.FC_SEED ? { seed: Number(process.env.FC_SEED), path: process.env.FC_PATH, endOnFailure: true } : {};

// ---------------------------------------------------------------------------------------------
// Generators. An item is `{ seq, ...payload }`: `seq` is stamped when the command runs, so
// shrinking never produces duplicate or out-of-order sequence numbers.

const keyArb = fc.oneof(fc.string({ maxLength: 6 }), fc.string({ maxLength: 4, unit: 'binary' }));
const stringArb = fc.oneof(
  { arbitrary: fc.string({ maxLength: 8, unit: 'binary' }), weight: 4 },
  { arbitrary: fc.constantFrom('\u0000', 'a\u0000b', '😀', '\u2028\u2029', 'e\u0301', '"\\'), weight: 1 },
);
const valueArb = fc.oneof({ arbitrary: stringArb, weight: 2 }, { arbitrary: fc.jsonValue({ maxDepth: 2, stringUnit: 'binary' }), weight: 1 });

const payloadArb: fc.Arbitrary<Item> = fc.dictionary(
  keyArb.filter((k) => k !== 'seq'),
  valueArb,
  { maxKeys: 3, noNullPrototype: true },
);

/** Mostly a few low priorities (so they interleave), now and then anything up to 255, sometimes omitted (= 0). */
const priorityArb = (low: number): fc.Arbitrary<number | undefined> =>
  fc.option(fc.oneof({ arbitrary: fc.integer({ min: 0, max: low }), weight: 10 }, { arbitrary: fc.integer({ min: 0, max: 255 }), weight: 1 }), {
    nil: undefined,
    freq: 6,
  });

/** Mostly none; a few seconds, so that items come due within a run; now and then the contract's whole range. */
const delayArb = fc.option(
  fc.oneof(
    { arbitrary: fc.integer({ min: 1, max: 10 }), weight: 4 },
    { arbitrary: fc.constantFrom(0, 1, 60, 300, 900), weight: 2 },
    { arbitrary: fc.integer({ min: 0, max: 900 }), weight: 1 },
  ),
  {
    nil: undefined,
    freq: 2,
  },
);

/** A small pool, so that ids repeat within a batch and across commands. */
const dedupIdArb = fc.option(fc.constantFrom('a', 'b', 'c', 'order:1', 'x.y@z'), { nil: undefined, freq: 2 });

const entryArb = (low: number, producers = false): fc.Arbitrary<PushEntry> =>
  fc
    .record({
      item: payloadArb,
      priority: priorityArb(low),
      delay: producers ? delayArb : fc.constant(undefined),
      dedupId: producers ? dedupIdArb : fc.constant(undefined),
    })
    .map(({ item, priority, delay, dedupId }) => ({
      item,
      ...(priority === undefined ? {} : { priority }),
      ...(delay === undefined ? {} : { delay_seconds: delay }),
      ...(dedupId === undefined ? {} : { dedup_id: dedupId }),
    }));

interface CommandShape {
  priorities: number;
  maxBatch: number;
  /** Adds the acknowledgement-lock commands and the simulated clock's `advance`. */
  ack?: boolean;
  /** Adds `delay_seconds` and `dedup_id` to push entries, and the simulated clock's `advance`. */
  producers?: boolean;
  /** With `ack`: the shared lock mode's commands (settings, live lock ids, the dead-letter queue) instead of the exclusive ones. */
  shared?: boolean;
}

const depthArb = fc.oneof(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 100 }));

/** The contract's whole range, 1-300 s, with its ends and the default more often. */
const ttlArb = fc.oneof(fc.constantFrom(1, 30, 60, 300), fc.integer({ min: 1, max: 300 }));

const lockIdArb: fc.Arbitrary<LockIdChoice> = fc.oneof(
  { arbitrary: fc.constant<LockIdChoice>('latest'), weight: 10 },
  { arbitrary: fc.constant<LockIdChoice>('previous'), weight: 3 },
  { arbitrary: fc.constant<LockIdChoice>('bogus'), weight: 1 },
  { arbitrary: fc.constantFrom<LockIdChoice>('omitted', 'empty', 'number', 'null'), weight: 2 },
);

/** 0-400 s of simulated time: often whole seconds (so sums of advances meet whole-second TTLs exactly), sometimes just a little. */
const advanceArb = fc.oneof(
  fc.integer({ min: 0, max: 400_000 }),
  fc.integer({ min: 0, max: 400 }).map((s) => s * 1000),
  fc.constantFrom(1, 30, 60, 300).map((s) => s * 1000),
  fc.integer({ min: 0, max: 2_000 }),
);

/** Retry delays: none, a few seconds fixed, or exponential with a small ceiling (so that items come back within a run). */
const retryArb: fc.Arbitrary<NonNullable<SettingsChoice['retry']>> = fc.oneof(
  fc.constant({ seconds: 0, backoff: 'exponential' as const, max: 900 }),
  fc.record({ seconds: fc.integer({ min: 1, max: 5 }), backoff: fc.constant('fixed' as const), max: fc.constant(900) }),
  fc.integer({ min: 1, max: 3 }).map((seconds) => ({ seconds, backoff: 'exponential' as const, max: seconds * 4 })),
);

const ackCommandArbs: fc.WeightedArbitrary<QueueCommand>[] = [
  {
    arbitrary: fc.record({ depth: depthArb, ttlSeconds: ttlArb }).map(({ depth, ttlSeconds }): QueueCommand => ({ kind: 'popAck', depth, ttlSeconds })),
    weight: 12,
  },
  { arbitrary: lockIdArb.map((lockId): QueueCommand => ({ kind: 'acknowledge', lockId })), weight: 4 },
  {
    arbitrary: fc
      .record({ lockId: lockIdArb, ttlSeconds: fc.option(ttlArb, { nil: undefined, freq: 4 }) })
      .map(({ lockId, ttlSeconds }): QueueCommand => (ttlSeconds === undefined ? { kind: 'extendLock', lockId } : { kind: 'extendLock', lockId, ttlSeconds })),
    weight: 3,
  },
  { arbitrary: lockIdArb.map((lockId): QueueCommand => ({ kind: 'release', lockId })), weight: 3 },
  { arbitrary: advanceArb.map((ms): QueueCommand => ({ kind: 'advance', ms })), weight: 5 },
  { arbitrary: fc.constantFrom(-1, 0, 1).map((deltaMs): QueueCommand => ({ kind: 'advanceToExpiry', deltaMs })), weight: 3 },
  // Pause and resume: pops hand out nothing meanwhile, locks and expiry go on.
  { arbitrary: fc.boolean().map((paused): QueueCommand => ({ kind: 'settings', settings: { paused } })), weight: 1 },
  // Retry delays: items given back wait, then come back to their place in push order.
  { arbitrary: retryArb.map((retry): QueueCommand => ({ kind: 'settings', settings: { retry } })), weight: 1 },
];

/** Mostly a live lock (there are many in shared mode), sometimes the newest or an older one (maybe ended), rarely a bogus or no id. */
const sharedLockIdArb: fc.Arbitrary<{ lockId: LockIdChoice; pick: number }> = fc.record({
  lockId: fc.oneof(
    { arbitrary: fc.constant<LockIdChoice>('live'), weight: 12 },
    { arbitrary: fc.constantFrom<LockIdChoice>('latest', 'previous'), weight: 3 },
    { arbitrary: fc.constantFrom<LockIdChoice>('bogus', 'omitted', 'null'), weight: 1 },
  ),
  pick: fc.nat({ max: 20 }),
});

/** Shared lock mode with a small delivery limit (so that items reach it), now and then another limit, no limit, or the exclusive mode. */
const settingsArb: fc.Arbitrary<SettingsChoice> = fc.oneof(
  { arbitrary: fc.constant<SettingsChoice>({ lockMode: 'shared', maxDeliveries: 2 }), weight: 6 },
  { arbitrary: fc.record({ lockMode: fc.constant<'shared'>('shared'), maxDeliveries: fc.constantFrom(1, 3, null) }), weight: 2 },
  { arbitrary: fc.constantFrom<SettingsChoice>({ maxDeliveries: 1 }, { lockMode: 'exclusive' }), weight: 1 },
  { arbitrary: fc.boolean().map((paused): SettingsChoice => ({ paused })), weight: 2 },
  { arbitrary: retryArb.map((retry): SettingsChoice => ({ retry })), weight: 2 },
);

/**
 * Competing consumers: pops with ack (mostly small depths, so locks hold a few items each),
 * ended by a live lock's id, time moving so that locks expire, and the dead-letter queue
 * popped now and then. Settings come back after a delete (which forgets them).
 */
const sharedCommandArbs: fc.WeightedArbitrary<QueueCommand>[] = [
  {
    arbitrary: fc
      .record({ depth: fc.oneof(fc.integer({ min: 1, max: 3 }), depthArb), ttlSeconds: ttlArb })
      .map(({ depth, ttlSeconds }): QueueCommand => ({ kind: 'popAck', depth, ttlSeconds })),
    weight: 16,
  },
  { arbitrary: sharedLockIdArb.map(({ lockId, pick }): QueueCommand => ({ kind: 'acknowledge', lockId, pick })), weight: 4 },
  {
    arbitrary: fc
      .record({ id: sharedLockIdArb, ttlSeconds: fc.option(ttlArb, { nil: undefined, freq: 4 }) })
      .map(({ id, ttlSeconds }): QueueCommand => (ttlSeconds === undefined ? { kind: 'extendLock', ...id } : { kind: 'extendLock', ...id, ttlSeconds })),
    weight: 3,
  },
  { arbitrary: sharedLockIdArb.map(({ lockId, pick }): QueueCommand => ({ kind: 'release', lockId, pick })), weight: 6 },
  { arbitrary: advanceArb.map((ms): QueueCommand => ({ kind: 'advance', ms })), weight: 5 },
  { arbitrary: fc.constantFrom(-1, 0, 1).map((deltaMs): QueueCommand => ({ kind: 'advanceToExpiry', deltaMs })), weight: 4 },
  { arbitrary: settingsArb.map((settings): QueueCommand => ({ kind: 'settings', settings })), weight: 2 },
  { arbitrary: fc.integer({ min: 1, max: 5 }).map((depth): QueueCommand => ({ kind: 'popDeadLetters', depth })), weight: 2 },
  { arbitrary: fc.integer({ min: 1, max: 4 }).map((maxItems): QueueCommand => ({ kind: 'redriveDeadLetters', maxItems })), weight: 2 },
];

const commandArb = ({ priorities, maxBatch, ack = false, producers = false, shared = false }: CommandShape): fc.Arbitrary<QueueCommand> =>
  fc.oneof(
    { arbitrary: entryArb(priorities, producers).map((entry): QueueCommand => ({ kind: 'push', entry })), weight: 10 },
    {
      arbitrary: fc
        .array(entryArb(priorities, producers), { minLength: 1, maxLength: maxBatch, size: maxBatch > 50 ? 'large' : 'medium' })
        .map((entries): QueueCommand => ({ kind: 'pushBatch', entries })),
      weight: 6,
    },
    {
      arbitrary: depthArb.map((depth): QueueCommand => ({ kind: 'pop', depth })),
      weight: 10,
    },
    { arbitrary: fc.constant<QueueCommand>({ kind: 'inspect' }), weight: 3 },
    { arbitrary: fc.constant<QueueCommand>({ kind: 'delete' }), weight: 1 },
    { arbitrary: fc.constant<QueueCommand>({ kind: 'deactivate' }), weight: 2 },
    ...(ack ? (shared ? sharedCommandArbs : ackCommandArbs) : []),
    ...(producers && !ack ? [{ arbitrary: advanceArb.map((ms): QueueCommand => ({ kind: 'advance', ms })), weight: 5 }] : []),
  );

// ---------------------------------------------------------------------------------------------
// Running a sequence against the service and the model.

interface QueueConfig {
  segment_size: number;
  buffer_segments: number;
}

interface PriorityInfo {
  count: number;
  head_segment: number;
  tail_segment: number;
  head_offloaded_segment: number | null;
  tail_offloaded_segment: number | null;
  /** Not in the contract's list; checked when the service shows them. */
  head_segment_count?: number;
  tail_segment_count?: number;
}

/**
 * Where the simulated clock starts, ahead of real time: far enough that no other process's
 * sweep (real clock, or a test clock moved by minutes or hours) finds this file's locks due.
 */
const SIMULATED_CLOCK_LEAD_MS = 365 * 24 * 3600 * 1000;

/** The id sent for {@link BOGUS_LOCK_ID}: well-formed, and no lock has it. */
const BOGUS_REAL_LOCK_ID = 'bogus-lock-id-0000';

/** A unix-seconds float of the service equals the model's epoch ms (1 ms tolerance: it goes through timestamptz and back). */
function expectTime(actualSeconds: unknown, expectedMs: number, label: string): void {
  expect(typeof actualSeconds, label).toBe('number');
  expect(
    Math.abs((actualSeconds as number) * 1000 - expectedMs),
    `${label}: ${String(actualSeconds)} s vs the model's ${expectedMs / 1000} s`,
  ).toBeLessThanOrEqual(1);
}

/** The value as it goes over the wire (what the service can see, e.g. -0 is sent as 0). */
const asSent = (item: Item): Item => JSON.parse(JSON.stringify(item)) as Item;

/** Gives every item of a command its sequence number (in push order). */
function stamp(command: QueueCommand, next: () => number): QueueCommand {
  const withSeq = (entry: PushEntry): PushEntry => ({ ...entry, item: asSent({ seq: next(), ...entry.item }) });
  if (command.kind === 'push') return { kind: 'push', entry: withSeq(command.entry) };
  if (command.kind === 'pushBatch') return { kind: 'pushBatch', entries: command.entries.map(withSeq) };
  return command;
}

function describeCommand(c: QueueCommand): string {
  switch (c.kind) {
    case 'push':
      return `push seq ${String(c.entry.item.seq)} p${c.entry.priority ?? '-'}${c.entry.delay_seconds !== undefined ? ` delay ${c.entry.delay_seconds} s` : ''}${c.entry.dedup_id !== undefined ? ` dedup ${c.entry.dedup_id}` : ''}`;
    case 'pushBatch':
      return `pushBatch ${c.entries.length} (seq ${String(c.entries[0].item.seq)}..)`;
    case 'pop':
      return `pop depth ${c.depth}`;
    case 'popAck':
      return `pop require_ack depth ${c.depth} ttl ${c.ttlSeconds} s`;
    case 'acknowledge':
    case 'release':
      return `${c.kind} lock_id ${c.lockId}${c.pick !== undefined ? ` pick ${c.pick}` : ''}`;
    case 'extendLock':
      return `extend-lock lock_id ${c.lockId}${c.pick !== undefined ? ` pick ${c.pick}` : ''} ttl ${c.ttlSeconds ?? '-'} s`;
    case 'settings':
      return `settings ${JSON.stringify(c.settings)}`;
    case 'popDeadLetters':
      return `pop the dead-letter queue depth ${c.depth}`;
    case 'redriveDeadLetters':
      return `redrive the dead-letter queue, max_items ${c.maxItems}`;
    case 'advance':
      return `advance ${c.ms} ms`;
    case 'advanceToExpiry':
      return `advance to the lock's expiry ${c.deltaMs >= 0 ? '+' : ''}${c.deltaMs} ms`;
    default:
      return c.kind;
  }
}

class ModelRunner {
  private readonly model = new QueueModel(Date.now() + SIMULATED_CLOCK_LEAD_MS);
  /** The service's lock id for each of the model's symbolic ones. */
  private readonly lockIds = new Map<string, string>();
  private seq = 0;
  private step = 0;
  private label = '';

  /** The dead-letter queue the `settings` command names. */
  private readonly deadLetterQueueId: string;

  constructor(
    private readonly svc: TestService,
    private readonly queueId: string,
    private readonly config: QueueConfig,
    /** Runs with shared locks (see {@link checkPriorityInvariants}). */
    private readonly sharedRun = false,
  ) {
    this.deadLetterQueueId = `${queueId}-dlq`;
  }

  async run(commands: QueueCommand[]): Promise<void> {
    // The service's clock is the model's, for this run only.
    const clock = vi.spyOn(this.svc.app.get(Clock), 'now').mockImplementation(() => this.model.now);
    try {
      for (const generated of commands) {
        const command = stamp(generated, () => this.seq++);
        this.label = `queue ${this.queueId}, step ${this.step} (${describeCommand(command)})`;
        await this.execute(command);
        await this.checkInspection();
        await this.checkDeadLetters();
        this.step += 1;
      }
      // Whatever the dead-letter queue still holds, in the model's order.
      if (this.model.deadLetters.exists) {
        this.label = `queue ${this.queueId}, after the last step (the dead-letter queue popped empty)`;
        for (let i = 0; i < 100 && this.model.deadLetters.count() > 0; i++) await this.execute({ kind: 'popDeadLetters', depth: 100 });
        await this.checkDeadLetters();
      }
    } finally {
      // Leaves no lock behind in a shared database (its far-future expiry would keep it forever).
      await this.svc.http.delete(`/queue/${this.queueId}`).catch(() => undefined);
      await this.svc.http.delete(`/queue/${this.deadLetterQueueId}`).catch(() => undefined);
      clock.mockRestore();
    }
  }

  /** The body of a lock command: the service's id for the model's choice, or no usable id. */
  private lockBody(choice: LockIdChoice, pick?: number): Record<string, unknown> {
    switch (choice) {
      case 'omitted':
        return {};
      case 'empty':
        return { lock_id: '' };
      case 'number':
        return { lock_id: 12345678901 };
      case 'null':
        return { lock_id: null };
      default: {
        const id = this.model.lockIdFor(choice, pick)!;
        return { lock_id: id === BOGUS_LOCK_ID ? BOGUS_REAL_LOCK_ID : this.lockIds.get(id)! };
      }
    }
  }

  private async execute(command: QueueCommand): Promise<void> {
    const q = this.queueId;
    const http = this.svc.http;
    // The lock a lock command names, chosen before the model applies it (the model ends it).
    const lockBody =
      command.kind === 'acknowledge' || command.kind === 'extendLock' || command.kind === 'release'
        ? (this.model.settle(), this.lockBody(command.lockId, command.pick))
        : {};
    const expected = applyCommand(this.model, command);
    switch (command.kind) {
      case 'push': {
        const res = await http.post(`/queue/${q}/push`).send(command.entry);
        this.expectStatus(res, 200);
        const want = this.as(expected, 'push');
        const delay = want.delaySeconds > 0 ? `, visible in ${want.delaySeconds} s` : '';
        const body =
          want.duplicate === true
            ? { success: true, message: `Duplicate of an item accepted on queue ${q} within the deduplication window; nothing pushed`, duplicate: true }
            : {
                success: true,
                message: `Item pushed to queue ${q} at priority ${want.priority}${delay}`,
                ...(want.duplicate === false ? { duplicate: false } : {}),
              };
        expect(res.body, this.label).toStrictEqual(body);
        return;
      }
      case 'pushBatch': {
        const res = await http.post(`/queue/${q}/push/batch`).send({ items: command.entries });
        this.expectStatus(res, 200);
        const want = this.as(expected, 'pushBatch');
        expect(res.body, this.label).toMatchObject({ success: true, count: want.count, duplicates: want.duplicates });
        return;
      }
      case 'pop': {
        const res = await http.post(`/queue/${q}/pop?depth=${command.depth}`);
        if (this.expectQueueLocked(res, expected)) return;
        this.expectStatus(res, 200);
        const { items, paused } = this.as(expected, 'pop');
        expect(res.body, this.label).toStrictEqual({ items, count: items.length, ...(paused ? { paused } : {}) });
        return;
      }
      case 'popAck': {
        const res = await http.post(`/queue/${q}/pop?require_ack=true&depth=${command.depth}&ttl_seconds=${command.ttlSeconds}`);
        if (this.expectQueueLocked(res, expected)) return;
        this.expectStatus(res, 200);
        if (expected.kind === 'popAckEmpty') {
          expect(res.body, this.label).toStrictEqual({ items: [], count: 0, locked: false, ...(expected.paused ? { paused: true } : {}) });
          return;
        }
        const want = this.as(expected, 'popAckLocked');
        expect(res.body, this.label).toStrictEqual({
          items: want.items,
          count: want.items.length,
          locked: true,
          lock_id: expect.stringMatching(LOCK_ID_PATTERN),
          lock_expires_at: expect.any(Number),
          delivery_counts: want.deliveryCounts,
        });
        expectTime(res.body.lock_expires_at, want.expiresAt, `${this.label}: lock_expires_at`);
        const lockId = res.body.lock_id as string;
        expect([...this.lockIds.values(), BOGUS_REAL_LOCK_ID], `${this.label}: a new lock id for every lock`).not.toContain(lockId);
        this.lockIds.set(want.lockId, lockId);
        return;
      }
      case 'acknowledge': {
        const res = await http.post(`/queue/${q}/acknowledge`).send(lockBody);
        if (this.expectLockError(res, expected)) return;
        this.expectStatus(res, 200);
        expect(res.body, this.label).toStrictEqual({ success: true, message: expect.any(String), items_acknowledged: this.as(expected, 'acknowledged').count });
        return;
      }
      case 'extendLock': {
        const res = await http
          .post(`/queue/${q}/extend-lock`)
          .send(command.ttlSeconds === undefined ? lockBody : { ...lockBody, ttl_seconds: command.ttlSeconds });
        if (this.expectLockError(res, expected)) return;
        this.expectStatus(res, 200);
        const want = this.as(expected, 'extended');
        expect(res.body, this.label).toStrictEqual({ success: true, lock_id: this.lockIds.get(want.lockId), lock_expires_at: expect.any(Number) });
        expectTime(res.body.lock_expires_at, want.expiresAt, `${this.label}: lock_expires_at`);
        return;
      }
      case 'release': {
        const res = await http.post(`/queue/${q}/release`).send(lockBody);
        if (this.expectLockError(res, expected)) return;
        this.expectStatus(res, 200);
        const want = this.as(expected, 'released');
        expect(res.body, this.label).toStrictEqual({
          success: true,
          items_returned: want.count,
          ...(want.deadLettered > 0 ? { items_dead_lettered: want.deadLettered } : {}),
          items_delayed: want.delayed,
        });
        return;
      }
      case 'settings': {
        const { lockMode, maxDeliveries, paused, retry } = command.settings;
        const body = {
          ...(lockMode !== undefined ? { lock_mode: lockMode } : {}),
          ...(paused !== undefined ? { paused } : {}),
          ...(retry !== undefined ? { retry_delay_seconds: retry.seconds, retry_backoff: retry.backoff, retry_delay_max_seconds: retry.max } : {}),
          ...(maxDeliveries !== undefined ? { max_deliveries: maxDeliveries, dead_letter_queue: maxDeliveries === null ? null : this.deadLetterQueueId } : {}),
        };
        const res = await http.put(`/queue/${q}/settings`).send(body);
        if (expected.kind === 'settingsLocked') {
          this.expectStatus(res, 409);
          expect(res.body, this.label).toMatchObject({ statusCode: 409, error_code: 'QUEUE_LOCKED' });
          return;
        }
        this.expectStatus(res, 200);
        expect(res.body, this.label).toStrictEqual(this.configOf(this.as(expected, 'settings').settings));
        return;
      }
      case 'popDeadLetters': {
        const res = await http.post(`/queue/${this.deadLetterQueueId}/pop?depth=${command.depth}`);
        this.expectStatus(res, 200);
        const { items } = this.as(expected, 'pop');
        expect(res.body, `${this.label}: the dead-letter queue`).toStrictEqual({ items, count: items.length });
        return;
      }
      case 'redriveDeadLetters': {
        const res = await http.post(`/queue/${this.deadLetterQueueId}/redrive`).send({ max_items: command.maxItems });
        const want = this.as(expected, 'redriven');
        if (!want.exists) {
          this.expectStatus(res, 404);
          expect(res.body, this.label).toMatchObject({ statusCode: 404, error_code: 'QUEUE_NOT_FOUND' });
          return;
        }
        this.expectStatus(res, 200);
        expect(res.body, `${this.label}: the dead-letter queue redriven`).toStrictEqual({ success: true, items_moved: want.moved, items_left: want.left });
        return;
      }
      case 'inspect':
        await this.checkRawState();
        return;
      case 'delete': {
        const res = await http.delete(`/queue/${q}`);
        const want = this.as(expected, 'delete');
        if (want.exists) {
          this.expectStatus(res, 200);
          expect(res.body, this.label).toStrictEqual({ success: true, items_deleted: want.itemsDeleted });
        } else {
          this.expectStatus(res, 404);
          expect(res.body, this.label).toMatchObject({ statusCode: 404, error_code: 'QUEUE_NOT_FOUND' });
        }
        return;
      }
      case 'deactivate':
        // As the idle sweep does (it skips actors in a turn): the next turn rebuilds the actor
        // from the queue row (and its lock from the lock row) and loads segments from the database.
        // Idle by the service's clock, which the model moves.
        this.svc.app.get(ActorRegistry).deactivateIdle(this.svc.app.get(Clock).now() + 1);
        expect(this.svc.app.get(ActorRegistry).peek(q), this.label).toBeUndefined();
        return;
      case 'advance':
      case 'advanceToExpiry':
        // Only the model's clock moves (the service reads it); no request.
        return;
    }
  }

  /** `config` of the inspection and the settings endpoints: the run's segment layout and the model's settings. */
  private configOf(settings: ModelSettings): Record<string, unknown> {
    return {
      ...this.config,
      lock_mode: settings.lockMode,
      max_deliveries: settings.maxDeliveries,
      dead_letter_queue: settings.deadLetters ? this.deadLetterQueueId : null,
      ...DEFAULT_CONTROLS,
      paused: settings.paused,
      retry_delay_seconds: settings.retryDelaySeconds,
      retry_backoff: settings.retryBackoff,
      retry_delay_max_seconds: settings.retryDelayMaxSeconds,
    };
  }

  /**
   * GET /queue/{dead-letter queue}: it exists once an item was dead-lettered, and holds the
   * model's items per priority (none delayed: its turn moved the dead letters to their tails).
   */
  private async checkDeadLetters(): Promise<void> {
    const dlq = this.model.deadLetters;
    const res = await this.svc.http.get(`/queue/${this.deadLetterQueueId}`);
    const label = `${this.label}, then GET /queue/${this.deadLetterQueueId} (the dead-letter queue)`;
    if (!dlq.exists) {
      expect(res.status, `${label}: ${JSON.stringify(res.body)}`).toBe(404);
      return;
    }
    expect(res.status, `${label}: ${JSON.stringify(res.body)}`).toBe(200);
    const body = res.body as { count: number; delayed: number; priorities: Record<string, PriorityInfo> };
    expect({ count: body.count, delayed: body.delayed }, label).toStrictEqual({ count: dlq.count(), delayed: 0 });
    expect(Object.fromEntries(Object.entries(body.priorities).map(([p, info]) => [p, info.count])), `${label}: count per priority`).toStrictEqual(
      dlq.countsByPriority(),
    );
  }

  /** The model's outcome, which must be of `kind` (a mismatch is a bug of the model or this runner). */
  private as<K extends ModelOutcome['kind']>(outcome: ModelOutcome, kind: K): Extract<ModelOutcome, { kind: K }> {
    if (outcome.kind !== kind) throw new Error(`${this.label}: the model answered ${outcome.kind}, the runner expected ${kind}`);
    return outcome as Extract<ModelOutcome, { kind: K }>;
  }

  private expectStatus(res: Response, status: number): void {
    expect(res.status, `${this.label}: status ${JSON.stringify(res.body)}`).toBe(status);
  }

  /** If the model expects 423 QUEUE_LOCKED, checks it (and its lock_expires_at) and returns true; otherwise the answer must not be a 423. */
  private expectQueueLocked(res: Response, expected: ModelOutcome): boolean {
    if (expected.kind !== 'queueLocked') {
      expect(res.status, `${this.label}: the model has no unexpired lock: ${JSON.stringify(res.body)}`).not.toBe(423);
      return false;
    }
    const at = expectQueueLocked(res, `${this.label}:`);
    expectTime(at, expected.expiresAt, `${this.label}: 423 lock_expires_at`);
    return true;
  }

  /** If the model expects a lock error, checks status and body and returns true. */
  private expectLockError(res: Response, expected: ModelOutcome): boolean {
    if (expected.kind !== 'lockError') return false;
    expectLockError(res, expected.code, `${this.label}: ${JSON.stringify(res.body)}`);
    return true;
  }

  /**
   * GET /queue/{id}: counts and lock equal the model's; per-priority metadata keeps its
   * invariants. Then the listing (which runs no turn, so it sees what that GET committed,
   * expiry included) has the same count and locked flag.
   */
  private async checkInspection(): Promise<void> {
    // An inspection is an operation on the queue: a due expiry is applied first.
    const expected = applyCommand(this.model, { kind: 'inspect' });
    if (expected.kind !== 'inspect') throw new Error('the model answered an inspection with ' + expected.kind);
    const res = await this.svc.http.get(`/queue/${this.queueId}`);
    const label = `${this.label}, then GET /queue/${this.queueId}`;
    const row = await listed(this.svc.http, this.queueId);
    const listLabel = `${this.label}, then GET /queues?prefix=${this.queueId}`;
    if (!expected.exists) {
      expect(res.status, `${label}: ${JSON.stringify(res.body)}`).toBe(404);
      expect(res.body, label).toMatchObject({ statusCode: 404, error_code: 'QUEUE_NOT_FOUND' });
      expect(row, listLabel).toBeUndefined();
      return;
    }
    expect(res.status, `${label}: ${JSON.stringify(res.body)}`).toBe(200);
    const body = res.body as { queue_id: string; count: number; priorities: Record<string, PriorityInfo>; config: QueueConfig; lock: unknown; locks?: unknown };
    expect(body.queue_id, label).toBe(this.queueId);
    expect(body.config, label).toStrictEqual(this.configOf(expected.settings));
    if (expected.locks !== undefined) {
      const { count, itemCount, nextExpiresAt } = expected.locks;
      expect('lock' in body, `${label}: no lock in shared mode`).toBe(false);
      expect(body.locks, `${label}: locks`).toStrictEqual({
        count,
        item_count: itemCount,
        next_expires_at: nextExpiresAt === null ? null : expect.any(Number),
      });
      if (nextExpiresAt !== null) expectTime((body.locks as { next_expires_at: number }).next_expires_at, nextExpiresAt, `${label}: locks.next_expires_at`);
    } else if (expected.lock === null || expected.lock === undefined) {
      expect(body.lock, `${label}: lock`).toBeNull();
    } else {
      expect(body.lock, `${label}: lock`).toStrictEqual({
        expires_at: expect.any(Number),
        created_at: expect.any(Number),
        item_count: expected.lock.itemCount,
      });
      const lock = body.lock as { expires_at: number; created_at: number };
      expectTime(lock.expires_at, expected.lock.expiresAt, `${label}: lock.expires_at`);
      expectTime(lock.created_at, expected.lock.createdAt, `${label}: lock.created_at`);
    }
    expect(body.count, `${label}: count`).toBe(expected.count);
    expect((body as { delayed?: unknown }).delayed, `${label}: delayed`).toBe(expected.delayed);
    const counts = Object.fromEntries(Object.entries(body.priorities).map(([p, info]) => [p, info.count]));
    expect(counts, `${label}: count per priority`).toStrictEqual(expected.counts);
    for (const [p, info] of Object.entries(body.priorities)) this.checkPriorityInvariants(`${label}, priority ${p}`, Number(p), info);
    const locked = expected.locks !== undefined ? expected.locks.count > 0 : expected.lock !== null;
    expect(row, listLabel).toStrictEqual({ queue_id: this.queueId, count: expected.count, locked, paused: expected.settings.paused });
  }

  /**
   * Seed 003's structure of one priority: items in segments head..tail, every segment strictly
   * between them full, head and tail non-empty (an emptied head is deleted, a tail is only
   * allocated by a push), the offloaded range (if any) strictly inside (head + buffer, tail).
   * No segment exceeds `segment_size`, except the head after a lock's items came back (seed
   * 003, edge case 3): it may hold up to `segment_size` + the largest number of items one
   * return put back at this priority ({@link QueueModel.largestReturnAt}).
   */
  private checkPriorityInvariants(label: string, priority: number, info: PriorityInfo): void {
    const { segment_size: size, buffer_segments: buffer } = this.config;
    const { head_segment: head, tail_segment: tail, head_offloaded_segment: hos, tail_offloaded_segment: tos } = info;
    // Items given back by shared locks wait apart from the segments.
    const apart = this.model.apartAt(priority);
    const count = info.count - apart;
    const headExtra = this.model.largestReturnAt(priority);
    const detail = `${label}: ${JSON.stringify(info)} (head may exceed segment_size by ${headExtra}; ${apart} given back, apart from the segments)`;
    if (count === 0 && apart > 0) return;
    // Shared locks keep a priority's entry while they hold its items: its emptied head segment stays, and pushes go on at the tail.
    const emptyHead = this.sharedRun ? 1 : 0;
    expect(Number.isInteger(head) && Number.isInteger(tail) && head >= 0, detail).toBe(true);
    expect(head, detail).toBeLessThanOrEqual(tail);
    expect(count, detail).toBeGreaterThanOrEqual(1);
    expect(count, detail).toBeLessThanOrEqual((tail - head + 1) * size + headExtra);
    const minimum = head === tail ? 1 : (tail - head - 1) * size + 2 - emptyHead;
    expect(count, detail).toBeGreaterThanOrEqual(minimum);
    const { head_segment_count: headCount, tail_segment_count: tailCount } = info;
    if (headCount !== undefined || tailCount !== undefined) {
      expect(headCount, `${detail}: head_segment_count`).toBeGreaterThanOrEqual(1 - emptyHead);
      expect(headCount, `${detail}: head_segment_count`).toBeLessThanOrEqual(size + headExtra);
      if (head === tail) {
        expect([headCount, tailCount], `${detail}: one segment`).toStrictEqual([count, count]);
      } else {
        expect(tailCount, `${detail}: tail_segment_count`).toBeGreaterThanOrEqual(1);
        expect(tailCount, `${detail}: tail_segment_count`).toBeLessThanOrEqual(size);
        expect(headCount! + (tail - head - 1) * size + tailCount!, `${detail}: head + full middle segments + tail`).toBe(count);
      }
    }
    expect(hos === null, `${detail}: offloaded pair both null or both set`).toBe(tos === null);
    if (hos !== null && tos !== null) {
      expect(hos, detail).toBeGreaterThan(head + buffer);
      expect(hos, detail).toBeLessThanOrEqual(tos);
      expect(tos, detail).toBeLessThan(tail);
    }
  }

  /**
   * The raw state: the metadata document agrees with the model, and per priority the head
   * segment, the one after it and the tail segment hold exactly the model's items at those
   * places (and the first offloaded segment, if any, in the offload store).
   */
  private async checkRawState(): Promise<void> {
    const q = this.queueId;
    const http = this.svc.http;
    const size = this.config.segment_size;
    const label = `${this.label}: raw state`;
    const metaRes = await http.get(`/queue/${q}/state/metadata`);
    if (!this.model.exists) {
      expect(metaRes.status, `${label}: ${JSON.stringify(metaRes.body)}`).toBe(404);
      expect(metaRes.body, label).toMatchObject({ error_code: 'STATE_KEY_NOT_FOUND' });
      return;
    }
    expect(metaRes.status, `${label}: ${JSON.stringify(metaRes.body)}`).toBe(200);
    const doc = metaRes.body as {
      config: QueueConfig;
      queues: Record<string, { metadata: Partial<PriorityInfo> & { count: number; head_segment: number; tail_segment: number } }>;
    };
    expect(doc.config, label).toStrictEqual(this.config);
    const expectedKeys = this.model.priorities().map((p) => `queue_${p}`);
    expect(Object.keys(doc.queues).sort(), label).toStrictEqual([...expectedKeys].sort());

    const segment = async (key: string): Promise<unknown> => {
      const res = await http.get(`/queue/${q}/state/${key}`);
      // An emptied head segment kept for shared locks stores nothing.
      if (this.sharedRun && res.status === 404) return [];
      expect(res.status, `${label}: GET state/${key}: ${JSON.stringify(res.body)}`).toBe(200);
      return res.body;
    };
    for (const p of this.model.priorities()) {
      // The segments' items: those given back by shared locks wait apart.
      const items = this.model.segmentItemsAt(p);
      const m = doc.queues[`queue_${p}`].metadata;
      const where = `${label}, priority ${p} ${JSON.stringify(m)}`;
      expect(m.count, where).toBe(items.length);
      if (items.length === 0) continue;
      const headItems = (await segment(`queue_${p}_seg_${m.head_segment}`)) as Item[];
      if (m.head_segment === m.tail_segment) {
        expect(headItems, `${where}: the only segment`).toStrictEqual(items);
        continue;
      }
      expect(headItems.length, `${where}: head segment size`).toBeGreaterThanOrEqual(this.sharedRun ? 0 : 1);
      expect(headItems.length, `${where}: head segment size`).toBeLessThanOrEqual(size + this.model.largestReturnAt(p));
      expect(headItems, `${where}: head segment`).toStrictEqual(items.slice(0, headItems.length));
      const tailItems = (await segment(`queue_${p}_seg_${m.tail_segment}`)) as Item[];
      const middle = m.tail_segment - m.head_segment - 1;
      expect(headItems.length + middle * size + tailItems.length, `${where}: head + full middle segments + tail`).toBe(items.length);
      expect(tailItems, `${where}: tail segment`).toStrictEqual(items.slice(items.length - tailItems.length));
      const middleItems = (n: number): Item[] => {
        const start = headItems.length + (n - m.head_segment - 1) * size;
        return items.slice(start, start + size);
      };
      if (middle > 0) {
        // The segment after the head is within the buffer, so never offloaded.
        const n = m.head_segment + 1;
        expect(await segment(`queue_${p}_seg_${n}`), `${where}: segment ${n}`).toStrictEqual(middleItems(n));
      }
      if (m.head_offloaded_segment !== undefined && m.head_offloaded_segment !== null) {
        const n = m.head_offloaded_segment;
        expect(await segment(`offloaded_queue_${p}_seg_${n}_${q}`), `${where}: offloaded segment ${n}`).toStrictEqual(middleItems(n));
        const inState = await http.get(`/queue/${q}/state/queue_${p}_seg_${n}`);
        expect(inState.status, `${where}: offloaded segment ${n} is no longer in the actor's state`).toBe(404);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------

describe(`queue against the in-memory model, tiny segments (SEGMENT_SIZE 3, BUFFER_SEGMENTS 1) (${databaseKind})`, () => {
  let svc: TestService;
  beforeAll(async () => {
    // The lock sweep stopped: in this service only requests expire locks, at the moments the
    // model says (the simulated clock jumps ahead; a sweep would race the model's requests).
    svc = await startService({ env: { SEGMENT_SIZE: '3', BUFFER_SEGMENTS: '1', LOCK_SWEEP_INTERVAL_MS: '60000' } });
    await svc.app.get(LockSweeper).onModuleDestroy();
    await svc.app.get(DelaySweeper).onModuleDestroy();
  });
  afterAll(async () => {
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  it('agrees with the model after every push, batch push, pop, inspection, delete and deactivation', { timeout: 300_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(commandArb({ priorities: 3, maxBatch: 30 }), { minLength: 1, maxLength: 40, size: 'medium' }), async (commands) => {
        await new ModelRunner(svc, uniqueQueueId('model'), { segment_size: 3, buffer_segments: 1 }).run(commands);
      }),
      // A failing run is shrunk; the time limit keeps that (at 30-80 requests per run) from
      // outlasting the test timeout, and still reports the smallest counterexample found.
      { ...replay, numRuns: propertyRuns(30), interruptAfterTimeLimit: 240_000, markInterruptAsFailure: true },
    );
  });

  it(
    'agrees with the model with acknowledgement locks: pop with require_ack, acknowledge, extend-lock, release, expiry on a simulated clock',
    { timeout: 300_000 },
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(commandArb({ priorities: 3, maxBatch: 20, ack: true }), { minLength: 1, maxLength: 60, size: 'medium' }),
          async (commands) => {
            await new ModelRunner(svc, uniqueQueueId('model-ack'), { segment_size: 3, buffer_segments: 1 }).run(commands);
          },
        ),
        { ...replay, numRuns: propertyRuns(30), interruptAfterTimeLimit: 240_000, markInterruptAsFailure: true },
      );
    },
  );

  it(
    'agrees with the model with delayed items and dedup ids: delay_seconds and dedup_id on pushes and batch entries, a simulated clock, and locks',
    { timeout: 300_000 },
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(commandArb({ priorities: 3, maxBatch: 12, ack: true, producers: true }), { minLength: 1, maxLength: 50, size: 'medium' }),
          async (commands) => {
            await new ModelRunner(svc, uniqueQueueId('model-producers'), { segment_size: 3, buffer_segments: 1 }).run(commands);
          },
        ),
        { ...replay, numRuns: propertyRuns(25), interruptAfterTimeLimit: 240_000, markInterruptAsFailure: true },
      );
    },
  );
});

describe(`queue against the in-memory model in shared lock mode, with delivery limits and a dead-letter queue (${databaseKind})`, () => {
  let svc: TestService;
  beforeAll(async () => {
    // As above: only requests expire locks (and forget none), at the moments the model says.
    svc = await startService({ env: { SEGMENT_SIZE: '3', BUFFER_SEGMENTS: '1', LOCK_SWEEP_INTERVAL_MS: '60000' } });
    await svc.app.get(LockSweeper).onModuleDestroy();
    await svc.app.get(DelaySweeper).onModuleDestroy();
  });
  afterAll(async () => {
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  it(
    'agrees with the model: competing locks given back in push order, delivery counts, dead letters at the tail of the dead-letter queue',
    { timeout: 300_000 },
    async () => {
      const settings: QueueCommand = { kind: 'settings', settings: { lockMode: 'shared', maxDeliveries: 2 } };
      await fc.assert(
        fc.asyncProperty(
          fc.array(commandArb({ priorities: 2, maxBatch: 10, ack: true, shared: true }), { minLength: 1, maxLength: 60, size: 'medium' }),
          async (commands) => {
            // Every run starts in shared mode; `settings` commands change it, and bring it back after a delete.
            await new ModelRunner(svc, uniqueQueueId('model-shared'), { segment_size: 3, buffer_segments: 1 }, true).run([settings, ...commands]);
          },
        ),
        { ...replay, numRuns: propertyRuns(60), interruptAfterTimeLimit: 240_000, markInterruptAsFailure: true },
      );
    },
  );

  it('agrees with the model in shared mode with delayed items and dedup ids', { timeout: 300_000 }, async () => {
    const settings: QueueCommand = { kind: 'settings', settings: { lockMode: 'shared', maxDeliveries: 2 } };
    await fc.assert(
      fc.asyncProperty(
        fc.array(commandArb({ priorities: 2, maxBatch: 8, ack: true, shared: true, producers: true }), { minLength: 1, maxLength: 40, size: 'medium' }),
        async (commands) => {
          await new ModelRunner(svc, uniqueQueueId('model-shared-producers'), { segment_size: 3, buffer_segments: 1 }, true).run([settings, ...commands]);
        },
      ),
      { ...replay, numRuns: propertyRuns(30), interruptAfterTimeLimit: 240_000, markInterruptAsFailure: true },
    );
  });
});

describe('queue against the in-memory model, default segments (100), large batches', () => {
  let svc: TestService;
  beforeAll(async () => {
    // Runs also set the service's clock to the model's: only requests expire locks here.
    svc = await startService({ env: { LOCK_SWEEP_INTERVAL_MS: '60000' } });
    await svc.app.get(LockSweeper).onModuleDestroy();
    await svc.app.get(DelaySweeper).onModuleDestroy();
  });
  afterAll(async () => {
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  it('agrees with the model with batches of up to 300 items over a few priorities', { timeout: 300_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(commandArb({ priorities: 1, maxBatch: 300 }), { minLength: 1, maxLength: 20, size: 'medium' }), async (commands) => {
        await new ModelRunner(svc, uniqueQueueId('model-big'), { segment_size: 100, buffer_segments: 1 }).run(commands);
      }),
      { ...replay, numRuns: propertyRuns(15), interruptAfterTimeLimit: 240_000, markInterruptAsFailure: true },
    );
  });

  // Contract: "an item: any JSON object, returned as the same JSON value". These keys are
  // ordinary JSON keys (ASTs, JSON Schemas, class descriptions use them); nothing evaluates
  // an item, so dropping them is silent data loss behind a 200.
  it('returns items with __proto__, constructor and prototype keys unchanged', async () => {
    const dangerousKey = fc.constantFrom('__proto__', 'constructor', 'prototype');
    const nested: fc.Arbitrary<Item> = fc.dictionary(fc.oneof(dangerousKey, fc.constantFrom('a', 'b')), valueArb, {
      minKeys: 1,
      maxKeys: 3,
      noNullPrototype: true,
    });
    const itemArb: fc.Arbitrary<Item> = fc.dictionary(fc.oneof(dangerousKey, fc.constantFrom('a', 'b')), fc.oneof(valueArb, nested), {
      minKeys: 1,
      maxKeys: 3,
      noNullPrototype: true,
    });
    await fc.assert(
      fc.asyncProperty(itemArb, async (item) => {
        const q = uniqueQueueId('model-keys');
        const pushed = await svc.http.post(`/queue/${q}/push`).send({ item });
        expect(pushed.status, JSON.stringify(pushed.body)).toBe(200);
        const popped = await svc.http.post(`/queue/${q}/pop`);
        // Compared as JSON text: a parsed body may not keep a `__proto__` key as an own property.
        expect(popped.text, `queue ${q}`).toBe(JSON.stringify({ items: [item], count: 1 }));
      }),
      { numRuns: propertyRuns(20) },
    );
  });
});
