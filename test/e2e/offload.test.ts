import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OffloadStats } from '../../src/offload/offload-stats.js';
import { ActorRegistry } from '../../src/queue/runtime/actor-registry.js';
import {
  expectCountsMatch,
  expectOffloadInvariant,
  expectRawStateMatches,
  inspectQueue,
  sequencedEntries,
  stateKey,
  storedRows,
} from '../support/offload-helpers.js';
import { drain, range, seededRandom, testSeed } from '../support/queue-helpers.js';
import { QueueModel, type Item } from '../support/queue-model.js';
import { databaseKind, removeDataDir, startService, TestService, uniqueQueueId } from '../support/service.js';

/**
 * Segment offloading through the HTTP contract (CONTRACT.md "Segments and offloading", the
 * state endpoint; seed 003 "Segment Offloading", its worked example).
 */

const ids = (from: number, to: number): Item[] => range(to - from).map((i) => ({ id: from + i }));

describe('seed 003 worked example: 500 items, SEGMENT_SIZE 100, BUFFER_SEGMENTS 1', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startService({ env: { SEGMENT_SIZE: '100', BUFFER_SEGMENTS: '1' } });
  });
  afterAll(async () => {
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  const pushIds = async (q: string, from: number, to: number, priority = 0): Promise<void> => {
    for (let i = from; i < to; i += 100) {
      const items = ids(i, Math.min(i + 100, to)).map((item) => ({ item, priority }));
      const res = await svc.http.post(`/queue/${q}/push/batch`).send({ items });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    }
  };

  it('offloads segments 2 and 3 and shows them only under their offloaded keys; loads 2 back after 100 pops', async () => {
    const q = uniqueQueueId('seed003');
    const other = uniqueQueueId('seed003-other');
    await pushIds(q, 0, 500);
    // Another queue with offloaded segments of its own (its keys must not be readable through q).
    await pushIds(other, 10_000, 10_500);

    const meta = await stateKey(svc.http, q, 'metadata');
    expect(meta).toStrictEqual({
      config: { segment_size: 100, buffer_segments: 1 },
      queues: { queue_0: { metadata: { count: 500, head_segment: 0, tail_segment: 4, head_offloaded_segment: 2, tail_offloaded_segment: 3 } } },
    });

    // In the actor's state: segments 0, 1, 4.
    for (const [n, from] of [
      [0, 0],
      [1, 100],
      [4, 400],
    ] as const) {
      const seg = (await stateKey(svc.http, q, `queue_0_seg_${n}`)) as Item[];
      expect(seg, `queue_0_seg_${n}`).toHaveLength(100);
      expect(seg[0], `queue_0_seg_${n} first item`).toStrictEqual({ id: from });
      expect(seg, `queue_0_seg_${n}`).toStrictEqual(ids(from, from + 100));
    }
    // Offloaded: segments 2, 3 — not in the actor's state, but in the offload store.
    for (const n of [2, 3]) {
      const res = await svc.http.get(`/queue/${q}/state/queue_0_seg_${n}`);
      expect(res.status, `queue_0_seg_${n}: ${JSON.stringify(res.body)}`).toBe(404);
      expect(res.body).toMatchObject({ statusCode: 404, error_code: 'STATE_KEY_NOT_FOUND' });
      const off = await svc.http.get(`/queue/${q}/state/offloaded_queue_0_seg_${n}_${q}`);
      expect(off.status, `offloaded_queue_0_seg_${n}_${q}: ${JSON.stringify(off.body)}`).toBe(200);
      expect(off.body).toHaveLength(100);
      expect(off.body[0]).toStrictEqual({ id: n * 100 });
      expect(off.body).toStrictEqual(ids(n * 100, n * 100 + 100));
    }
    // Keys that were never offloaded.
    for (const key of [`offloaded_queue_0_seg_1_${q}`, `offloaded_queue_0_seg_4_${q}`, `offloaded_queue_1_seg_2_${q}`, 'queue_0_seg_5', 'queue_1_seg_0']) {
      expect(await stateKey(svc.http, q, key), key).toBeUndefined();
    }
    // The other queue's offloaded segment exists, but not through q; nor a queue that does not exist.
    expect(await stateKey(svc.http, other, `offloaded_queue_0_seg_2_${other}`), 'the other queue itself').toStrictEqual(ids(10_200, 10_300));
    for (const key of [`offloaded_queue_0_seg_2_${other}`, `offloaded_queue_0_seg_2_${uniqueQueueId('nobody')}`, `offloaded_queue_0_seg_2_${q}x`]) {
      const res = await svc.http.get(`/queue/${q}/state/${key}`);
      expect(res.status, `${key} through ${q}: ${JSON.stringify(res.body)}`).toBe(404);
      expect(res.body).toMatchObject({ statusCode: 404, error_code: 'STATE_KEY_NOT_FOUND' });
    }

    const info = await inspectQueue(svc.http, q);
    expect(info).toMatchObject({ queue_id: q, count: 500, config: { segment_size: 100, buffer_segments: 1 }, lock: null });
    expect(info.priorities).toStrictEqual({
      '0': {
        count: 500,
        head_segment: 0,
        tail_segment: 4,
        head_offloaded_segment: 2,
        tail_offloaded_segment: 3,
        head_segment_count: 100,
        tail_segment_count: 100,
      },
    });

    // Pop 100: head 1; segment 2 comes into the buffer and is back before the pop answers.
    const pop = await svc.http.post(`/queue/${q}/pop?depth=100`);
    expect(pop.status).toBe(200);
    expect(pop.body).toStrictEqual({ items: ids(0, 100), count: 100 });

    expect(await stateKey(svc.http, q, 'metadata')).toStrictEqual({
      config: { segment_size: 100, buffer_segments: 1 },
      queues: { queue_0: { metadata: { count: 400, head_segment: 1, tail_segment: 4, head_offloaded_segment: 3, tail_offloaded_segment: 3 } } },
    });
    expect(await stateKey(svc.http, q, 'queue_0_seg_0'), 'popped segment 0 is gone').toBeUndefined();
    expect(await stateKey(svc.http, q, 'queue_0_seg_1')).toStrictEqual(ids(100, 200));
    expect(await stateKey(svc.http, q, 'queue_0_seg_2'), 'segment 2 loaded back').toStrictEqual(ids(200, 300));
    expect(await stateKey(svc.http, q, `offloaded_queue_0_seg_2_${q}`), 'segment 2 no longer offloaded').toBeUndefined();
    expect(await stateKey(svc.http, q, 'queue_0_seg_3'), 'segment 3 still offloaded').toBeUndefined();
    expect(await stateKey(svc.http, q, `offloaded_queue_0_seg_3_${q}`)).toStrictEqual(ids(300, 400));
    expect(await stateKey(svc.http, q, 'queue_0_seg_4')).toStrictEqual(ids(400, 500));
    expect((await inspectQueue(svc.http, q)).priorities).toStrictEqual({
      '0': {
        count: 400,
        head_segment: 1,
        tail_segment: 4,
        head_offloaded_segment: 3,
        tail_offloaded_segment: 3,
        head_segment_count: 100,
        tail_segment_count: 100,
      },
    });

    // Pop 100 more: head 2, segment 3 back, nothing offloaded (the pair leaves the metadata document).
    const pop2 = await svc.http.post(`/queue/${q}/pop?depth=100`);
    expect(pop2.body).toStrictEqual({ items: ids(100, 200), count: 100 });
    expect(await stateKey(svc.http, q, 'metadata')).toStrictEqual({
      config: { segment_size: 100, buffer_segments: 1 },
      queues: { queue_0: { metadata: { count: 300, head_segment: 2, tail_segment: 4 } } },
    });
    expect(await stateKey(svc.http, q, 'queue_0_seg_3')).toStrictEqual(ids(300, 400));
    expect(await stateKey(svc.http, q, `offloaded_queue_0_seg_3_${q}`)).toBeUndefined();
    expect((await inspectQueue(svc.http, q)).priorities['0']).toStrictEqual({
      count: 300,
      head_segment: 2,
      tail_segment: 4,
      head_offloaded_segment: null,
      tail_offloaded_segment: null,
      head_segment_count: 100,
      tail_segment_count: 100,
    });

    expect(await drain(svc.http, q)).toStrictEqual(ids(200, 500));
    expect(await drain(svc.http, other)).toStrictEqual(ids(10_000, 10_500));
    expect(await storedRows(svc.app, q), 'a drained queue leaves nothing in either table').toStrictEqual({ items: 0, offloaded: 0 });
    expect(await storedRows(svc.app, other)).toStrictEqual({ items: 0, offloaded: 0 });
  });

  it('offloaded keys of a queue id that itself contains "_seg_" and other allowed characters', async () => {
    const q = `${uniqueQueueId('x_seg_7_y')}:a@b.c_seg_1`;
    await pushIds(q, 0, 500);
    expect(await stateKey(svc.http, q, `offloaded_queue_0_seg_2_${q}`)).toStrictEqual(ids(200, 300));
    expect(await stateKey(svc.http, q, `offloaded_queue_0_seg_3_${q}`)).toStrictEqual(ids(300, 400));
    expect(await stateKey(svc.http, q, 'queue_0_seg_3')).toBeUndefined();
    expect(await stateKey(svc.http, q, `offloaded_queue_0_seg_3_${q.slice(0, -6)}`), 'a prefix of the id').toBeUndefined();
    expect(await storedRows(svc.app, q)).toStrictEqual({ items: 300, offloaded: 2 });
    expect(await drain(svc.http, q)).toStrictEqual(ids(0, 500));
  });

  it('GET /queue/{id} shows the offloaded range of each priority', async () => {
    const q = uniqueQueueId('per-priority');
    await pushIds(q, 0, 500, 0); //   head 0, tail 4 -> 2..3 offloaded
    await pushIds(q, 1000, 1400, 3); // head 0, tail 3 -> 2..2
    await pushIds(q, 2000, 2700, 7); // head 0, tail 6 -> 2..5
    await pushIds(q, 3000, 3250, 9); // head 0, tail 2 -> nothing
    const info = await inspectQueue(svc.http, q);
    expect(info.count).toBe(1850);
    expect(info.priorities).toStrictEqual({
      '0': {
        count: 500,
        head_segment: 0,
        tail_segment: 4,
        head_offloaded_segment: 2,
        tail_offloaded_segment: 3,
        head_segment_count: 100,
        tail_segment_count: 100,
      },
      '3': {
        count: 400,
        head_segment: 0,
        tail_segment: 3,
        head_offloaded_segment: 2,
        tail_offloaded_segment: 2,
        head_segment_count: 100,
        tail_segment_count: 100,
      },
      '7': {
        count: 700,
        head_segment: 0,
        tail_segment: 6,
        head_offloaded_segment: 2,
        tail_offloaded_segment: 5,
        head_segment_count: 100,
        tail_segment_count: 100,
      },
      '9': {
        count: 250,
        head_segment: 0,
        tail_segment: 2,
        head_offloaded_segment: null,
        tail_offloaded_segment: null,
        head_segment_count: 100,
        tail_segment_count: 50,
      },
    });
    const meta = (await stateKey(svc.http, q, 'metadata')) as { queues: Record<string, { metadata: Record<string, number> }> };
    expect(meta.queues.queue_9.metadata, 'no offloaded pair in the metadata document when nothing is offloaded').toStrictEqual({
      count: 250,
      head_segment: 0,
      tail_segment: 2,
    });
    expect(await stateKey(svc.http, q, `offloaded_queue_7_seg_5_${q}`)).toStrictEqual(ids(2500, 2600));
    expect(await stateKey(svc.http, q, `offloaded_queue_3_seg_2_${q}`)).toStrictEqual(ids(1200, 1300));

    // Pop 550: priority 0 drained (its entry goes), priority 3 head 0 -> 50 popped; nothing loaded there yet.
    const popped: Item[] = [];
    for (const depth of [100, 100, 100, 100, 100, 50]) popped.push(...(await svc.http.post(`/queue/${q}/pop?depth=${depth}`)).body.items);
    expect(popped).toStrictEqual([...ids(0, 500), ...ids(1000, 1050)]);
    const after = await inspectQueue(svc.http, q);
    expect(after.priorities).toStrictEqual({
      '3': {
        count: 350,
        head_segment: 0,
        tail_segment: 3,
        head_offloaded_segment: 2,
        tail_offloaded_segment: 2,
        head_segment_count: 50,
        tail_segment_count: 100,
      },
      '7': {
        count: 700,
        head_segment: 0,
        tail_segment: 6,
        head_offloaded_segment: 2,
        tail_offloaded_segment: 5,
        head_segment_count: 100,
        tail_segment_count: 100,
      },
      '9': {
        count: 250,
        head_segment: 0,
        tail_segment: 2,
        head_offloaded_segment: null,
        tail_offloaded_segment: null,
        head_segment_count: 100,
        tail_segment_count: 50,
      },
    });
    expect(await stateKey(svc.http, q, `offloaded_queue_0_seg_2_${q}`), 'priority 0 is gone, and its offloaded segments with it').toBeUndefined();

    expect(await storedRows(svc.app, q), 'before the delete').toStrictEqual({ items: 1300 - 100 - 400, offloaded: 1 + 4 });
    const del = await svc.http.delete(`/queue/${q}`);
    expect(del.body).toStrictEqual({ success: true, items_deleted: 1300 });
    expect(await storedRows(svc.app, q), 'a deleted queue leaves no offloaded segment behind').toStrictEqual({ items: 0, offloaded: 0 });
  });
});

describe('FIFO and priority order through offload and load: 5,000 items, 3 priorities, SEGMENT_SIZE 10', () => {
  const SIZE = 10;
  const BUFFER = 1;
  let svc: TestService;
  beforeAll(async () => {
    svc = await startService({ env: { SEGMENT_SIZE: String(SIZE), BUFFER_SEGMENTS: String(BUFFER) } });
  });
  afterAll(async () => {
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  it('pops everything in the model order with random batch pushes and pops, keeping the offloaded range invariant', async () => {
    const seed = testSeed();
    const rnd = seededRandom(seed);
    const where = `(seed ${seed}, ${databaseKind})`;
    const q = uniqueQueueId('order');
    const model = new QueueModel();
    const stats = svc.app.get(OffloadStats);
    const before = { ...stats };
    const priorities = [0, 1, 2];
    const next = new Map<number, number>();
    let pushed = 0;
    let step = 0;
    let rawChecks = 0;
    let maxOffloaded = 0;
    const started = Date.now();

    const pop = async (depth: number, label: string): Promise<void> => {
      const res = await svc.http.post(`/queue/${q}/pop?depth=${depth}`);
      expect(res.status, `${label}: ${JSON.stringify(res.body)}`).toBe(200);
      const expected = model.pop(depth);
      expect(res.body, `${label}: pop depth ${depth}`).toStrictEqual({ items: expected, count: expected.length });
    };

    while (pushed < 5000) {
      const n = Math.min(5000 - pushed, rnd.int(100, 500));
      // Skewed so that the priorities grow unevenly and pops spill over between them.
      const entries = sequencedEntries(priorities, n, next, () => (rnd.next() < 0.5 ? 0 : rnd.next() < 0.6 ? 1 : 2));
      const label = `${where} step ${step} push ${n}`;
      const res = await svc.http.post(`/queue/${q}/push/batch`).send({ items: entries });
      expect(res.status, `${label}: ${JSON.stringify(res.body)}`).toBe(200);
      model.pushBatch(entries);
      pushed += n;
      const info = await inspectQueue(svc.http, q, label);
      expectCountsMatch(info, model, label);
      expectOffloadInvariant(info, 'after-push', label, new Set(entries.map((e) => e.priority)));
      for (const pi of Object.values(info.priorities))
        if (pi.head_offloaded_segment !== null) maxOffloaded = Math.max(maxOffloaded, pi.tail_offloaded_segment! - pi.head_offloaded_segment + 1);
      if (step % 4 === 0) rawChecks += await expectRawStateMatches(svc.http, q, info, model, label);

      const pops = rnd.int(0, 4);
      for (let i = 0; i < pops; i++) {
        const plabel = `${where} step ${step} pop ${i}`;
        await pop(rnd.int(1, 100), plabel);
        const after = await inspectQueue(svc.http, q, plabel);
        expectCountsMatch(after, model, plabel);
        expectOffloadInvariant(after, 'at-rest', plabel);
      }
      step += 1;
    }

    // Drain with random depths, checking along the way.
    let pops = 0;
    while (model.count() > 0) {
      const label = `${where} drain pop ${pops}`;
      await pop(rnd.int(1, 100), label);
      if (model.count() === 0) break;
      const info = await inspectQueue(svc.http, q, label);
      expectCountsMatch(info, model, label);
      expectOffloadInvariant(info, 'at-rest', label);
      if (pops % 10 === 0) rawChecks += await expectRawStateMatches(svc.http, q, info, model, label);
      pops += 1;
    }
    const empty = await svc.http.post(`/queue/${q}/pop?depth=100`);
    expect(empty.body, `${where}: empty at the end`).toStrictEqual({ items: [], count: 0 });
    expect(await stateKey(svc.http, q, 'metadata'), where).toStrictEqual({ config: { segment_size: SIZE, buffer_segments: BUFFER }, queues: {} });
    expect(await storedRows(svc.app, q), `${where}: nothing left in either table`).toStrictEqual({ items: 0, offloaded: 0 });

    // Offloading really happened, many times, in both directions, without a failure.
    const offloaded = stats.segmentsOffloaded - before.segmentsOffloaded;
    const loaded = stats.segmentsLoaded - before.segmentsLoaded;
    expect(offloaded, `${where}: segments offloaded`).toBeGreaterThan(100);
    expect(loaded, `${where}: segments loaded back`).toBeGreaterThan(100);
    expect(stats.offloadFailures - before.offloadFailures, where).toBe(0);
    expect(stats.loadFailures - before.loadFailures, where).toBe(0);
    expect(rawChecks, `${where}: offloaded segments compared with the model`).toBeGreaterThan(10);
    console.log(
      `[offload order ${databaseKind}] seed ${seed}: ${step} push batches, ${pops} drain pops, ${offloaded} segments offloaded, ${loaded} loaded, ` +
        `largest offloaded range ${maxOffloaded} segments, ${rawChecks} offloaded segments compared, ${Date.now() - started} ms`,
    );
  });
});

describe('restart with offloaded segments (SEGMENT_SIZE 10, BUFFER_SEGMENTS 2)', () => {
  const env = { SEGMENT_SIZE: '10', BUFFER_SEGMENTS: '2' };
  let svc: TestService | undefined;
  let dataDir: string | undefined;
  afterAll(async () => {
    await svc?.close();
    if (dataDir) removeDataDir(dataDir);
  });

  it('keeps the offloaded ranges and every item in order across a restart', async () => {
    const seed = testSeed();
    const rnd = seededRandom(seed);
    const where = `(seed ${seed}, ${databaseKind})`;
    svc = await startService({ env });
    dataDir = svc.dataDir;
    const q = uniqueQueueId('restart');
    const model = new QueueModel();
    const next = new Map<number, number>();
    const push = async (n: number): Promise<void> => {
      const entries = sequencedEntries([0, 4], n, next, () => (rnd.next() < 0.6 ? 0 : 1));
      const res = await svc!.http.post(`/queue/${q}/push/batch`).send({ items: entries });
      expect(res.status, `${where}: ${JSON.stringify(res.body)}`).toBe(200);
      model.pushBatch(entries);
    };
    const pop = async (depth: number): Promise<void> => {
      const res = await svc!.http.post(`/queue/${q}/pop?depth=${depth}`);
      expect(res.status, `${where}: ${JSON.stringify(res.body)}`).toBe(200);
      const expected = model.pop(depth);
      expect(res.body, `${where}: pop depth ${depth}`).toStrictEqual({ items: expected, count: expected.length });
    };

    for (let i = 0; i < 4; i++) await push(250);
    for (let i = 0; i < 3; i++) await pop(rnd.int(30, 100));
    await push(37);
    await pop(45);

    const before = await inspectQueue(svc.http, q, where);
    expectCountsMatch(before, model, `${where} before restart`);
    expectOffloadInvariant(before, 'at-rest', `${where} before restart`);
    const offloadedBefore = Object.values(before.priorities).filter((pi) => pi.head_offloaded_segment !== null);
    expect(offloadedBefore.length, `${where}: both priorities have offloaded segments before the restart ${JSON.stringify(before.priorities)}`).toBe(2);
    const metaBefore = await stateKey(svc.http, q, 'metadata');

    await svc.close();
    svc = undefined;
    svc = await startService({ dataDir, env });
    expect(svc.app.get(ActorRegistry).peek(q), 'a fresh process has no actor yet').toBeUndefined();

    expect(await stateKey(svc.http, q, 'metadata'), `${where}: metadata after restart`).toStrictEqual(metaBefore);
    const after = await inspectQueue(svc.http, q, where);
    expect(after, `${where}: inspection after restart`).toStrictEqual(before);
    expect(await expectRawStateMatches(svc.http, q, after, model, `${where} after restart`)).toBeGreaterThan(0);

    // Carry on: more pushes (offloading continues from the preserved range) and pops.
    await push(120);
    const mid = await inspectQueue(svc.http, q, where);
    expectCountsMatch(mid, model, `${where} after restart + push`);
    expectOffloadInvariant(mid, 'after-push', `${where} after restart + push`);
    const loadedBefore = svc.app.get(OffloadStats).segmentsLoaded;
    while (model.count() > 0) {
      await pop(rnd.int(1, 100));
      if (model.count() > 0) expectOffloadInvariant(await inspectQueue(svc.http, q, where), 'at-rest', `${where} draining after restart`);
    }
    expect(
      svc.app.get(OffloadStats).segmentsLoaded - loadedBefore,
      `${where}: segments offloaded before the restart were loaded back by the new process`,
    ).toBeGreaterThan(10);
    expect((await svc.http.post(`/queue/${q}/pop?depth=10`)).body).toStrictEqual({ items: [], count: 0 });
    expect(await storedRows(svc.app, q), `${where}: nothing left in either table`).toStrictEqual({ items: 0, offloaded: 0 });
  });
});
