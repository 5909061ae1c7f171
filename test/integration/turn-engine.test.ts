import { AsyncLocalStorage } from 'node:async_hooks';
import { randomInt } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { Clock } from '../../src/common/clock.js';
import { UnitOfWork, type DbSession } from '../../src/database/unit-of-work.js';
import { DedupSweeper } from '../../src/dedup/dedup-sweeper.js';
import { LockSweeper } from '../../src/lock/lock-sweeper.js';
import { ScheduleSweeper } from '../../src/schedules/schedule-sweeper.js';
import { EnqueueCarrier } from '../../src/enqueue/enqueue-carrier.js';
import { DelaySweeper } from '../../src/delay/delay-sweeper.js';
import { QueueService } from '../../src/queue/queue.service.js';
import { QueueLocksService } from '../../src/queue/queue-locks.service.js';
import { ActorRegistry } from '../../src/queue/runtime/actor-registry.js';
import { QueueEvents } from '../../src/queue/runtime/queue-events.js';
import type { PopResponseDto } from '../../src/queue/dto/queue-responses.dto.js';
import type { StoredTurnWrite } from '../../src/database/stored-queue.js';
import { QueueStateRepository } from '../../src/storage/queue-state.repository.js';
import { LockRepository } from '../../src/storage/lock.repository.js';
import { QueueCore } from '../../src/queue/core/queue-core.js';
import { MAX_KNOWN_LOCKS } from '../../src/queue/core/shared-locks.js';
import { range } from '../support/queue-helpers.js';
import { databaseKind, removeDataDir, sharedDatabase, startService, TestService, uniqueQueueId } from '../support/service.js';

/**
 * The turn engine: one statement per turn in the common case, and operations waiting on one
 * queue taken together (group commit), each with its own answer, in arrival order.
 */
describe(`turn engine (${databaseKind})`, () => {
  let svc: TestService;
  let queues: QueueService;
  let locks: QueueLocksService;
  let segments: QueueStateRepository;

  beforeAll(async () => {
    svc = await startService({ env: { SEGMENT_SIZE: '100' } });
    // The background sweeps' statements are not a request's: stopped, they cannot be counted
    // whatever context their timers run in (nothing here needs them; locks and delayed items
    // that come due are handled by the queues' own turns).
    for (const sweeper of [LockSweeper, DelaySweeper, DedupSweeper, ScheduleSweeper, EnqueueCarrier])
      await svc.app.get<{ onModuleDestroy(): Promise<void> }>(sweeper).onModuleDestroy();
    queues = svc.app.get(QueueService);
    locks = svc.app.get(QueueLocksService);
    segments = svc.app.get(QueueStateRepository);
  });
  afterEach(() => vi.restoreAllMocks());
  afterAll(async () => {
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  /**
   * Statements are counted by the request that sent them, not by leaving names out: from
   * `countStatements()` on, the test's own calls (and whatever they start) run under a tag, and
   * only statements sent under it count, in autocommit or in a transaction. The background
   * sweeps are stopped (above); an unnamed statement added to a request's path would count.
   */
  const request = new AsyncLocalStorage<true>();
  let sent: { text: string; name?: string }[] = [];
  const recording = (session: DbSession): DbSession => {
    const query = session.query.bind(session);
    return {
      query: <R>(text: string, values?: readonly unknown[], name?: string): Promise<R[]> => {
        if (request.getStore()) sent.push({ text, name });
        return query<R>(text, values, name);
      },
    };
  };
  const countStatements = (): void => {
    sent = [];
    const uow = svc.app.get(UnitOfWork);
    const autocommit = recording(uow.autocommit);
    vi.spyOn(uow.autocommit, 'query').mockImplementation(autocommit.query);
    const transaction = uow.transaction.bind(uow);
    vi.spyOn(uow, 'transaction').mockImplementation((fn) => transaction((session) => fn(recording(session))));
    request.enterWith(true);
  };
  /** Names of the statements this test's requests sent since `countStatements()` (unnamed ones as `undefined`). */
  const turnNames = (): unknown[] => sent.map((s) => s.name);
  /** How many statements this test's requests sent since `countStatements()`. */
  const turnStatements = (): number => sent.length;

  it('a push or a pop on an active queue is one statement; a pop of a queue that does not exist is one', async () => {
    const q = uniqueQueueId('one-trip');
    await queues.pushBatch(
      q,
      range(10).map((n) => ({ item: { n } })),
    );
    await queues.pop(q, { depth: 1, requireAck: false, ttlSeconds: 30, waitSeconds: 0 });
    countStatements();
    await queues.push(q, { n: 10 }, 0);
    expect(turnNames(), 'a plain push: the short form of the turn statement').toEqual(['pushpop_write_turn_basic']);
    expect(await queues.pop(q, { depth: 2, requireAck: false, ttlSeconds: 30, waitSeconds: 0 })).toEqual({ items: [{ n: 1 }, { n: 2 }], count: 2 });
    expect(turnNames()).toHaveLength(2);
    const lock = await queues.pop(q, { depth: 2, requireAck: true, ttlSeconds: 30, waitSeconds: 0 });
    expect(turnNames()[2], 'a lock written: the full form (delivery counts, where the items were pushed)').toBe('pushpop_write_turn');
    await locks.acknowledge(q, lock.lock_id);
    expect(turnNames()).toHaveLength(4);
    expect(await queues.pop(uniqueQueueId('never'), { depth: 1, requireAck: false, ttlSeconds: 30, waitSeconds: 0 })).toEqual({ items: [], count: 0 });
    expect(turnNames()).toHaveLength(5);
  });

  it('a pop on a queue not in memory loads its row and its front segment in one statement, then writes', async () => {
    const q = uniqueQueueId('cold-pop');
    await queues.pushBatch(
      q,
      range(150).map((n) => ({ item: { n }, priority: n % 2 })),
    );
    svc.app.get(ActorRegistry).deactivate(q);
    countStatements();
    expect(await queues.pop(q, { depth: 2, requireAck: false, ttlSeconds: 30, waitSeconds: 0 })).toEqual({ items: [{ n: 0 }, { n: 2 }], count: 2 });
    expect(turnNames()).toEqual(['pushpop_load_queues', 'pushpop_write_turn_basic']);
    // Deeper than the front segment: the rest is read as before, and order holds across priorities.
    svc.app.get(ActorRegistry).deactivate(q);
    const deep = await queues.pop(q, { depth: 140, requireAck: false, ttlSeconds: 30, waitSeconds: 0 });
    expect(deep.items).toEqual([...range(73).map((k) => ({ n: 4 + 2 * k })), ...range(67).map((k) => ({ n: 1 + 2 * k }))]);
    // A push does not ask for the front segment.
    svc.app.get(ActorRegistry).deactivate(q);
    const loads = vi.spyOn(segments, 'loadQueues');
    sent = [];
    await queues.push(q, { n: 150 }, 0);
    expect(loads.mock.calls[0][0]).toEqual([{ queueId: q, front: false }]);
    expect(turnNames(), 'one queue alone: the plain load').toEqual(['pushpop_load_queue', 'pushpop_write_turn_basic']);
  });

  it('queues activated at the same time share their load statements', async () => {
    const ids = range(200).map((n) => uniqueQueueId(`burst-${n}`));
    await Promise.all(ids.map((q) => queues.push(q, { q }, 0)));
    for (const q of ids) svc.app.get(ActorRegistry).deactivate(q);
    const loads = vi.spyOn(segments, 'loadQueues');
    const popped = await Promise.all(ids.map((q) => queues.pop(q, { depth: 1, requireAck: false, ttlSeconds: 30, waitSeconds: 0 })));
    expect(popped).toEqual(ids.map((q) => ({ items: [{ q }], count: 1 })));
    expect(
      loads.mock.calls
        .flatMap((c) => c[0])
        .map((r) => r.queueId)
        .sort(),
    ).toEqual([...ids].sort());
    // The first load goes out alone; the others gather while it is in flight.
    expect(loads.mock.calls.length).toBeLessThan(20);
  });

  it('a pop refused by a lock another process has since acknowledged: the row is read again with its front, then written', async () => {
    const other = await startService({ env: { SEGMENT_SIZE: '100', ...sharedDatabase(svc) } });
    try {
      const q = uniqueQueueId('stale');
      const otherQueues = other.app.get(QueueService);
      await queues.pushBatch(
        q,
        range(10).map((n) => ({ item: { n } })),
      );
      const held = await otherQueues.pop(q, { depth: 2, requireAck: true, ttlSeconds: 30, waitSeconds: 0 });
      await expect(queues.pop(q, { depth: 2, requireAck: true, ttlSeconds: 30, waitSeconds: 0 })).rejects.toMatchObject({ errorCode: 'QUEUE_LOCKED' });
      await other.app.get(QueueLocksService).acknowledge(q, held.lock_id!);
      // Here the actor still holds the other process's lock.
      countStatements();
      const rechecks = vi.spyOn(segments, 'recheckQueue');
      const mine = await queues.pop(q, { depth: 2, requireAck: true, ttlSeconds: 30, waitSeconds: 0 });
      expect(mine.items).toEqual([{ n: 2 }, { n: 3 }]);
      expect(turnNames(), 'the check of the row finds it changed and brings the front; the turn runs again and writes').toEqual([
        'pushpop_recheck_queue',
        'pushpop_write_turn',
      ]);
      expect((await rechecks.mock.results[0].value)?.front?.entries).toHaveLength(8);
      // Refused by its own lock, nothing changed: the check reads the row alone.
      await expect(queues.pop(q, { depth: 2, requireAck: true, ttlSeconds: 30, waitSeconds: 0 })).rejects.toMatchObject({ errorCode: 'QUEUE_LOCKED' });
      expect(turnNames().slice(2)).toEqual(['pushpop_recheck_queue']);
      expect(await rechecks.mock.results[1].value).toEqual({ queue: expect.objectContaining({ version: expect.any(Number) }) });
    } finally {
      await other.close();
      removeDataDir(other.dataDir);
    }
  });

  it('delayed items and dedup ids: one more read only when something is due or a push carries a dedup id', async () => {
    const q = uniqueQueueId('producers-trips');
    // Due items are moved here by the queue's own turns only (the delay sweep is stopped, above).
    let now = Date.now();
    vi.spyOn(svc.app.get(Clock), 'now').mockImplementation(() => now);
    await queues.push(q, { n: 0 }, 0);
    countStatements();
    await queues.push(q, { n: 1 }, 0, { delaySeconds: 10 });
    expect(turnStatements(), 'a delayed push: one statement').toBe(1);
    await queues.push(q, { n: 2 }, 0);
    expect(await queues.pop(q, { depth: 1, requireAck: false, ttlSeconds: 30, waitSeconds: 0 })).toEqual({ items: [{ n: 0 }], count: 1 });
    expect(turnStatements(), 'pushes and pops while nothing is due: one statement each').toBe(3);
    now += 10_000;
    expect(await queues.pop(q, { depth: 5, requireAck: false, ttlSeconds: 30, waitSeconds: 0 })).toEqual({ items: [{ n: 2 }, { n: 1 }], count: 2 });
    expect(turnStatements(), 'the first turn after the due time reads the due items, then writes').toBe(5);
    await queues.push(q, { n: 3 }, 0, { dedupId: 'once' });
    expect(turnStatements(), 'a push with a dedup id: the read of live ids, then the write').toBe(7);
    expect(await queues.push(q, { n: 4 }, 0, { dedupId: 'once' })).toMatchObject({ duplicate: true });
    expect(turnStatements(), 'a duplicate: the read, then a version check (nothing to write)').toBe(9);
    await queues.push(q, { n: 5 }, 0);
    expect(turnStatements(), 'and a plain push is one statement again').toBe(10);
  });

  it('shared locks: with 1,000 live locks a pop with ack is one statement, an acknowledge one (a lock the actor knows) or two (one it must read); memory stays bounded', async () => {
    const q = uniqueQueueId('shared-trips');
    await queues.putSettings(q, { lockMode: 'shared' });
    await queues.pushBatch(
      q,
      range(1010).map((n) => ({ item: { n } })),
    );
    const lockIds: string[] = [];
    for (let i = 0; i < 1000; i++) lockIds.push((await queues.pop(q, { depth: 1, requireAck: true, ttlSeconds: 300, waitSeconds: 0 })).lock_id!);
    countStatements();
    const popped = await queues.pop(q, { depth: 2, requireAck: true, ttlSeconds: 300, waitSeconds: 0 });
    expect(popped).toMatchObject({ items: [{ n: 1000 }, { n: 1001 }], delivery_counts: [1, 1] });
    expect(turnStatements(), 'a pop with ack: the write alone').toBe(1);
    await locks.acknowledge(q, lockIds[500]);
    expect(turnStatements(), 'an acknowledge of a lock the actor knows: the write alone').toBe(2);
    // The actor knows the most recent MAX_KNOWN_LOCKS locks: the first ones popped are not among them.
    await locks.acknowledge(q, lockIds[0]);
    expect(turnStatements(), 'an acknowledge of a lock it does not know: the lock read, then the write').toBe(4);
    const info = await queues.getQueue(q);
    expect(info.locks).toMatchObject({ count: 999, item_count: 1000 });
    const actor = svc.app.get(ActorRegistry).get(q)!;
    expect(actor.itemsInMemory, 'the segments of its window, and the items of the locks it knows').toBeLessThanOrEqual(3 * 100 + MAX_KNOWN_LOCKS);
    expect(actor.lock).toBeNull();
  });

  it('concurrent acknowledgements and batches of one queue share turns: each turn reads the locks of all its operations at once', async () => {
    const q = uniqueQueueId('ack-group');
    await queues.putSettings(q, { lockMode: 'shared' });
    await queues.pushBatch(
      q,
      range(120).map((n) => ({ item: { n } })),
    );
    const lockIds: string[] = [];
    for (let i = 0; i < 12; i++)
      lockIds.push(...(await queues.pop(q, { depth: 10, requireAck: true, lockPerItem: true, ttlSeconds: 300, waitSeconds: 0 })).lock_ids!);
    expect(lockIds).toHaveLength(120);
    svc.app.get(ActorRegistry).deactivate(q);
    const writes = vi.spyOn(segments, 'writeTurn');
    const reads = vi.spyOn(svc.app.get(LockRepository), 'loadSharedLocks');
    const singles = lockIds.slice(0, 60).map((id) => locks.acknowledge(q, id));
    const batches = range(6).map((b) => locks.acknowledgeBatch(q, lockIds.slice(60 + b * 10, 70 + b * 10)));
    const answers = await Promise.all([...singles, ...batches]);
    expect(
      answers.reduce((sum, a) => sum + a.items_acknowledged, 0),
      'every item acknowledged once',
    ).toBe(120);
    expect(writes.mock.calls.length, 'turns for 66 concurrent acknowledgements').toBeLessThan(66);
    expect(reads.mock.calls.length, 'one lock read per turn at most').toBeLessThanOrEqual(writes.mock.calls.length);
    expect((await queues.getQueue(q)).locks).toMatchObject({ count: 0, item_count: 0 });
  });

  it("a push hands its items to the queue's waiting long polls in its own turn: one write for the push and the pops it answers", async () => {
    const q = uniqueQueueId('hand-off');
    await queues.putSettings(q, { lockMode: 'shared' });
    await queues.push(q, { warm: true }, 0);
    await queues.pop(q, { depth: 1, requireAck: false, ttlSeconds: 30, waitSeconds: 0 });
    const events = svc.app.get(QueueEvents);
    const poll = (n: number): Promise<PopResponseDto> => queues.pop(q, { depth: n, requireAck: true, ttlSeconds: 30, waitSeconds: 10 });
    const first = poll(1);
    const second = poll(1);
    await vi.waitFor(() => expect(events.waiting, 'both polls wait').toBe(2));
    const writes = vi.spyOn(segments, 'writeTurn');
    // Three items for two polls: each poll gets one in the push's turn, the third stays.
    const pushed = await queues.pushBatch(q, [{ item: { n: 1 } }, { item: { n: 2 } }, { item: { n: 3 } }]);
    expect(pushed.count).toBe(3);
    const [a, b] = await Promise.all([first, second]);
    expect([a.items, b.items], 'the longest waiting first, in push order').toEqual([[{ n: 1 }], [{ n: 2 }]]);
    expect(writes.mock.calls.length, 'one turn wrote the push and both pops').toBe(1);
    expect((await queues.pop(q, { depth: 5, requireAck: false, ttlSeconds: 30, waitSeconds: 0 })).items, 'the third stayed').toEqual([{ n: 3 }]);
    // A poll is not handed a delayed item: it keeps waiting, and answers when an item comes.
    const third = poll(1);
    await vi.waitFor(() => expect(events.waiting).toBe(1));
    await queues.push(q, { later: true }, 0, { delaySeconds: 60 });
    expect(events.waiting, 'still waiting').toBe(1);
    await queues.push(q, { n: 4 }, 0);
    expect((await third).items).toEqual([{ n: 4 }]);
  });

  it('concurrent operations on one queue share turns, answer in arrival order, and FIFO holds', async () => {
    const q = uniqueQueueId('group');
    const writes = vi.spyOn(segments, 'writeTurn');
    await Promise.all(range(200).map((n) => queues.push(q, { n }, n % 3)));
    expect(writes.mock.calls.length, 'turns for 200 concurrent pushes').toBeLessThan(100);
    const popped = await queues.pop(q, { depth: 100, requireAck: false, ttlSeconds: 30, waitSeconds: 0 });
    const rest = await queues.pop(q, { depth: 100, requireAck: false, ttlSeconds: 30, waitSeconds: 0 });
    const expected = [0, 1, 2].flatMap((p) => range(200).filter((n) => n % 3 === p)).map((n) => ({ n }));
    expect([...popped.items, ...rest.items]).toEqual(expected);
  });

  it('an operation refused in a shared turn fails alone; its neighbours commit and answer', async () => {
    const q = uniqueQueueId('alone');
    await queues.push(q, { n: 0 }, 0);
    const results = await Promise.allSettled([
      queues.push(q, { n: 1 }, 0),
      locks.acknowledge(q, 'AAAAAAAAAAA'),
      queues.push(q, { deep: JSON.parse('['.repeat(70) + ']'.repeat(70)) as unknown }, 0),
      queues.push(q, { n: 2 }, 0),
      queues.pop(q, { depth: 2, requireAck: true, ttlSeconds: 30, waitSeconds: 0 }),
      queues.pop(q, { depth: 1, requireAck: false, ttlSeconds: 30, waitSeconds: 0 }),
    ]);
    expect(results.map((r) => (r.status === 'fulfilled' ? 'ok' : (r.reason as { errorCode: string }).errorCode))).toEqual([
      'ok',
      'LOCK_NOT_FOUND',
      'ITEM_TOO_DEEP',
      'ok',
      'ok',
      'QUEUE_LOCKED',
    ]);
    expect((results[4] as PromiseFulfilledResult<{ items: unknown[] }>).value.items).toEqual([{ n: 0 }, { n: 1 }]);
    expect(await queues.getQueue(q)).toMatchObject({ count: 1, lock: { item_count: 2 } });
  });

  it("a locked load that waited for another turn sees that turn's lock, not the lock from before it waited", async () => {
    // Another process's turn (here a transaction of our own) gives the queue a lock and a new
    // version while the locked load waits for the row: the load must return both, as committed.
    const q = uniqueQueueId('wait-lock');
    await queues.push(q, { n: 0 }, 0);
    const uow = svc.app.get(UnitOfWork);
    let commit!: () => void;
    const held = new Promise<void>((r) => (commit = r));
    let updated!: () => void;
    const rowLocked = new Promise<void>((r) => (updated = r));
    const other = uow.transaction(async (s) => {
      await s.query(`UPDATE queues SET version = 4242 WHERE queue_id = $1`, [q]);
      await s.query(
        `INSERT INTO queue_locks (queue_id, lock_id, state, priorities, items, created_at, expires_at) VALUES ($1, 'AAAAAAAAAAA', 'active', '{0}', '{"{}"}', now(), now() + interval '1 minute')`,
        [q],
      );
      updated();
      await held;
    });
    await rowLocked;
    const load = uow.transaction((s) => segments.loadQueue(q, s, true));
    // Let the other transaction commit only once the locked load waits for the row.
    await vi.waitFor(
      async () => {
        const [waiting] = await uow.autocommit.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE%'`,
        );
        expect(waiting.n).toBeGreaterThan(0);
      },
      { timeout: 10_000, interval: 20 },
    );
    commit();
    await other;
    const loaded = await load;
    expect(loaded?.version).toBe(4242);
    expect(loaded?.lock).toMatchObject({ lockId: 'AAAAAAAAAAA', state: 'active' });
  });

  it('a turn takes at most 1000 items: large batches waiting together are written in several statements', async () => {
    const q = uniqueQueueId('bound');
    const writes = vi.spyOn(segments, 'writeTurn');
    await Promise.all(
      range(3).map((b) =>
        queues.pushBatch(
          q,
          range(600).map((n) => ({ item: { b, n } })),
        ),
      ),
    );
    expect(writes.mock.calls.length).toBeGreaterThanOrEqual(3);
    for (const [, write] of writes.mock.calls) expect(write.inserts.length).toBeLessThanOrEqual(1000);
    expect((await queues.getQueue(q)).count).toBe(1800);
  });
  /**
   * Runs `turns` (that many turns of different queues at once) and checks that some of their
   * writes went together: a statement named `<group>_<n>`, fewer statements than turns.
   */
  const expectSharedStatements = async <T>(group: string, turns: number, run: () => Promise<T>): Promise<T> => {
    const before = segments.writeGroups;
    countStatements();
    const result = await run();
    const names = turnNames().map(String);
    expect(
      names.some((name) => new RegExp(`^${group}_\\d+$`).test(name)),
      names.join(' '),
    ).toBe(true);
    expect(names.length, 'fewer statements than turns').toBeLessThan(turns);
    expect(segments.writeGroups.grouped).toBeGreaterThan(before.grouped);
    return result;
  };

  it('turns of different queues writing while a fifth of the pool is in use share statements, each with its own outcome', async () => {
    const ids = range(24).map((i) => uniqueQueueId(`group-${i}`));
    // Active first, so that each push is its write alone.
    await Promise.all(ids.map((q) => queues.push(q, { n: -1 }, 0)));
    await Promise.all(ids.map((q) => queues.pop(q, { depth: 1, requireAck: false, ttlSeconds: 30, waitSeconds: 0 })));
    await expectSharedStatements('pushpop_write_turns_basic', ids.length, () => Promise.all(ids.map((q, n) => queues.push(q, { n }, 0))));
    for (const [n, q] of ids.entries()) expect((await queues.pop(q, { depth: 5, requireAck: false, ttlSeconds: 30, waitSeconds: 0 })).items).toEqual([{ n }]);
  });

  it('full-form writes (locks taken and acknowledged with the next) of different queues share statements too, each with its own outcome', async () => {
    const ids = range(24).map((i) => uniqueQueueId(`group-full-${i}`));
    await Promise.all(ids.map((q) => queues.pushBatch(q, [{ item: { n: 0 } }, { item: { n: 1 } }])));
    const held = await Promise.all(ids.map((q) => queues.pop(q, { depth: 1, requireAck: true, ttlSeconds: 30, waitSeconds: 0 })));
    const answers = await expectSharedStatements('pushpop_write_turns_full', ids.length, () =>
      Promise.all(ids.map((q, i) => locks.acknowledge(q, held[i].lock_id, { depth: 1, ttlSeconds: 30, lockPerItem: false, includeHeaders: false }))),
    );
    for (const [i, q] of ids.entries()) {
      expect(answers[i].next).toMatchObject({ items: [{ n: 1 }], count: 1, locked: true });
      // The first lock is gone and the second is held: it acknowledges, and then the queue is empty.
      expect(await locks.acknowledge(q, answers[i].next!.lock_id)).toMatchObject({ success: true, items_acknowledged: 1 });
      expect((await queues.pop(q, { depth: 5, requireAck: false, ttlSeconds: 30, waitSeconds: 0 })).items).toEqual([]);
    }
  });

  it('a write that fails inside a shared statement fails alone: the others are written again on their own', async () => {
    const write = (json: string, duplicate = false): StoredTurnWrite => {
      const core = QueueCore.absent({ segmentSize: 100, bufferSegments: 1 });
      core.push([{ priority: 0, json }], 0, 0);
      const w = core.pendingWrite(() => randomInt(2 ** 40, 2 ** 47))!;
      return { ...w, inserts: duplicate ? [...w.inserts, ...w.inserts] : w.inserts, storeSaves: [], storeDeletes: [] };
    };
    const ids = range(8).map((i) => uniqueQueueId(`fails-${i}`));
    const before = segments.writeGroups;
    // A fifth of the pool (2) goes out alone; the other six wait and go together.
    const outcomes = await Promise.allSettled(ids.map((q, i) => segments.writeTurn(q, write(`{"i":${i}}`, i === 6))));
    expect(segments.writeGroups.grouped, 'the last six shared a statement').toBeGreaterThan(before.grouped);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    expect(String((outcomes[6] as PromiseRejectedResult).reason)).toMatch(/duplicate key/);
    for (const [i, q] of ids.entries()) {
      if (i === 6) expect(await segments.loadQueue(q), 'nothing of the failed write').toBeUndefined();
      else expect((await queues.pop(q, { depth: 5, requireAck: false, ttlSeconds: 30, waitSeconds: 0 })).items).toEqual([{ i }]);
    }
  });
});
