import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { OffloadStats } from '../../src/offload/offload-stats.js';
import { OffloadStore } from '../../src/offload/offload-store.js';
import {
  expectCountsMatch,
  expectOffloadInvariant,
  injectStoreFaults,
  inspectQueue,
  sequencedEntries,
  stateKey,
  storedRows,
  type StoreFaults,
} from '../support/offload-helpers.js';
import { lockItems, release } from '../support/lock-helpers.js';
import { drain, range, seededRandom, testSeed } from '../support/queue-helpers.js';
import { QueueModel } from '../support/queue-model.js';
import { databaseKind, removeDataDir, startService, TestService, uniqueQueueId } from '../support/service.js';

/**
 * An offload store that fails (CONTRACT.md "Segments and offloading": an offload or load
 * failure is logged and counted, and never fails the push or loses an item; seed 003 "Error
 * Handling"). The store is the service's own singleton, wrapped with vi.spyOn, and told it is
 * not the database's own table: the service then treats it as any store outside the database
 * (object storage, a file system), calling it before and after each turn's write, where its
 * failures can happen. (In the database's own table, moves are written by the turn's single
 * statement, atomically: it fails only when the database does, and then the turn fails.)
 */

const SIZE = 10;
const BUFFER = 1;

describe('offload store failures', () => {
  let svc: TestService;
  let store: OffloadStore;
  let stats: OffloadStats;
  let faults: StoreFaults | undefined;
  beforeAll(async () => {
    // LOG_LEVEL fatal: the injected failures would log hundreds of errors.
    svc = await startService({ env: { SEGMENT_SIZE: String(SIZE), BUFFER_SEGMENTS: String(BUFFER), LOG_LEVEL: 'fatal' } });
    store = svc.app.get(OffloadStore);
    vi.spyOn(store, 'inDatabase', 'get').mockReturnValue(false);
    stats = svc.app.get(OffloadStats);
  });
  afterEach(() => {
    faults?.restore();
    faults = undefined;
  });
  afterAll(async () => {
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  /**
   * Pushes and pops a few thousand items over 2 priorities against the model. Every push
   * must answer 200. A pop may answer 503 STORE_UNAVAILABLE only when a load failed during
   * it (and then nothing was removed: the model is untouched and the pop is retried); a pop
   * may return fewer than `depth` items when the next head segment could not be loaded, but
   * what it returns is always the model's next items.
   */
  async function runAgainstModel(q: string, total: number, seed: number, where: string): Promise<{ retried503: number; shortPops: number; pops: number }> {
    const rnd = seededRandom(seed);
    const model = new QueueModel();
    const next = new Map<number, number>();
    let pushed = 0;
    let retried503 = 0;
    let shortPops = 0;
    let pops = 0;

    const pop = async (depth: number, label: string): Promise<void> => {
      for (let attempt = 0; ; attempt++) {
        const loadFailuresBefore = stats.loadFailures;
        const res = await svc.http.post(`/queue/${q}/pop?depth=${depth}`);
        pops += 1;
        if (res.status === 503) {
          expect(res.body, `${label}: 503 body`).toMatchObject({ statusCode: 503, error_code: 'STORE_UNAVAILABLE' });
          expect(res.headers['retry-after'], `${label}: Retry-After`).toBeDefined();
          expect(stats.loadFailures, `${label}: a 503 without a failed load during the pop`).toBeGreaterThan(loadFailuresBefore);
          expect(model.count(), `${label}: a 503 on a queue the model says is empty`).toBeGreaterThan(0);
          expect(attempt, `${label}: still 503 after ${attempt} retries`).toBeLessThan(20);
          retried503 += 1;
          continue;
        }
        expect(res.status, `${label}: ${JSON.stringify(res.body)}`).toBe(200);
        const count = res.body.count as number;
        expect(count, `${label}: count`).toBe(res.body.items.length);
        expect(count, `${label}: at most depth`).toBeLessThanOrEqual(depth);
        const expected = model.pop(count);
        expect(res.body.items, `${label}: the model's next ${count} items`).toStrictEqual(expected);
        if (count < depth && model.count() > 0) {
          // Short only because the next head segment could not be loaded during this pop.
          expect(stats.loadFailures, `${label}: ${count} < depth ${depth} with ${model.count()} items left and no failed load`).toBeGreaterThan(
            loadFailuresBefore,
          );
          shortPops += 1;
        }
        if (count === 0) expect(model.count(), `${label}: empty pop with items left`).toBe(0);
        return;
      }
    };

    let step = 0;
    while (pushed < total) {
      const n = Math.min(total - pushed, rnd.int(50, 300));
      const entries = sequencedEntries([0, 1], n, next, () => (rnd.next() < 0.55 ? 0 : 1));
      const label = `${where} step ${step} push ${n}`;
      const res = await svc.http.post(`/queue/${q}/push/batch`).send({ items: entries });
      expect(res.status, `${label}: ${JSON.stringify(res.body)}`).toBe(200);
      model.pushBatch(entries);
      pushed += n;
      const info = await inspectQueue(svc.http, q, label);
      expectCountsMatch(info, model, label);
      expectOffloadInvariant(info, 'degraded', label);
      const k = rnd.int(0, 3);
      for (let i = 0; i < k; i++) {
        const plabel = `${where} step ${step} pop ${i}`;
        await pop(rnd.int(1, 100), plabel);
        const after = await inspectQueue(svc.http, q, plabel);
        expectCountsMatch(after, model, plabel);
        expectOffloadInvariant(after, 'degraded', plabel);
      }
      step += 1;
    }
    let drainPops = 0;
    while (model.count() > 0) {
      const label = `${where} drain pop ${drainPops++}`;
      await pop(rnd.int(20, 100), label);
      if (model.count() > 0) {
        const info = await inspectQueue(svc.http, q, label);
        expectCountsMatch(info, model, label);
        expectOffloadInvariant(info, 'degraded', label);
      }
      expect(drainPops, `${where}: drain does not end`).toBeLessThan(2000);
    }
    expect((await svc.http.post(`/queue/${q}/pop?depth=100`)).body, `${where}: empty at the end`).toStrictEqual({ items: [], count: 0 });
    expect(await stateKey(svc.http, q, 'metadata'), `${where}: no priorities left`).toStrictEqual({
      config: { segment_size: SIZE, buffer_segments: BUFFER },
      queues: {},
    });
    expect(await storedRows(svc.app, q), `${where}: nothing left behind in either table`).toStrictEqual({ items: 0, offloaded: 0 });
    return { retried503, shortPops, pops };
  }

  it('every second save, load and delete fails: pushes all succeed, nothing is lost or reordered, failures are counted', async () => {
    const seed = testSeed();
    const where = `(seed ${seed}, ${databaseKind}, every 2nd call fails)`;
    const before = { ...stats };
    faults = injectStoreFaults(store, ['save', 'load', 'delete'], (_m, n) => n % 2 === 0);
    const started = Date.now();
    const result = await runAgainstModel(uniqueQueueId('flaky'), 3000, seed, where);
    const s = stats;
    const delta = {
      segmentsOffloaded: s.segmentsOffloaded - before.segmentsOffloaded,
      offloadFailures: s.offloadFailures - before.offloadFailures,
      segmentsLoaded: s.segmentsLoaded - before.segmentsLoaded,
      loadFailures: s.loadFailures - before.loadFailures,
    };
    console.log(
      `[offload failures ${databaseKind}] every 2nd call: ${JSON.stringify({ ...delta, ...result, calls: faults.calls, injected: faults.failures })} in ${Date.now() - started} ms (seed ${seed})`,
    );
    expect(faults.failures.save, where).toBeGreaterThan(10);
    expect(faults.failures.load, where).toBeGreaterThan(10);
    expect(faults.failures.delete, where).toBeGreaterThan(5);
    expect(delta.offloadFailures, `${where}: offload failures counted`).toBeGreaterThan(0);
    expect(delta.loadFailures, `${where}: load failures counted`).toBeGreaterThan(0);
    expect(delta.segmentsOffloaded, `${where}: segments still offloaded`).toBeGreaterThan(10);
    expect(delta.segmentsLoaded, `${where}: segments still loaded back`).toBeGreaterThan(10);
    // Every failed save is one offload failure (a save is only called by an offload); every failed load one load failure.
    expect(delta.offloadFailures, `${where}: offload failures = failed saves`).toBe(faults.failures.save);
    expect(delta.loadFailures, `${where}: load failures >= failed loads`).toBeGreaterThanOrEqual(faults.failures.load);
  });

  it('a store that does the work and then reports a failure: the unused copies are deleted again, nothing is lost or duplicated', async () => {
    const seed = testSeed() + 1;
    const where = `(seed ${seed}, ${databaseKind}, every 3rd call fails after the write)`;
    const before = { ...stats };
    faults = injectStoreFaults(
      store,
      ['save', 'load', 'delete'],
      (_m, n) => n % 3 === 0,
      () => true,
    );
    const result = await runAgainstModel(uniqueQueueId('flaky-after'), 1500, seed, where);
    console.log(
      `[offload failures ${databaseKind}] every 3rd call fails after the write: ${JSON.stringify({ ...result, calls: faults.calls, injected: faults.failures })}`,
    );
    expect(faults.failures.save + faults.failures.load + faults.failures.delete, where).toBeGreaterThan(10);
    expect(stats.offloadFailures - before.offloadFailures, where).toBeGreaterThan(0);
    expect(stats.loadFailures - before.loadFailures, where).toBeGreaterThan(0);
  });

  it('a store that always fails on save: pushes all succeed, nothing is offloaded, everything pops in order', async () => {
    const seed = testSeed() + 2;
    const rnd = seededRandom(seed);
    const where = `(seed ${seed}, ${databaseKind}, save always fails)`;
    const before = { ...stats };
    faults = injectStoreFaults(store, ['save'], () => true);
    const q = uniqueQueueId('no-offload');
    const model = new QueueModel();
    const next = new Map<number, number>();
    for (let i = 0; i < 6; i++) {
      const entries = sequencedEntries([0, 1], 200, next, () => (rnd.next() < 0.5 ? 0 : 1));
      const res = await svc.http.post(`/queue/${q}/push/batch`).send({ items: entries });
      expect(res.status, `${where}: ${JSON.stringify(res.body)}`).toBe(200);
      model.pushBatch(entries);
      const one = { item: { single: i }, priority: 1 };
      const single = await svc.http.post(`/queue/${q}/push`).send(one);
      expect(single.status, `${where}: ${JSON.stringify(single.body)}`).toBe(200);
      model.push(one.item, one.priority);
    }
    const info = await inspectQueue(svc.http, q, where);
    expectCountsMatch(info, model, where);
    for (const [p, pi] of Object.entries(info.priorities)) {
      expect(pi.tail_segment - pi.head_segment, `${where}: priority ${p} has full middle segments`).toBeGreaterThan(10);
      expect([pi.head_offloaded_segment, pi.tail_offloaded_segment], `${where}: priority ${p} nothing offloaded`).toStrictEqual([null, null]);
    }
    const meta = (await stateKey(svc.http, q, 'metadata')) as { queues: Record<string, { metadata: Record<string, number> }> };
    for (const [key, { metadata }] of Object.entries(meta.queues)) {
      expect(Object.keys(metadata).sort(), `${where}: ${key} has no offloaded range`).toStrictEqual(['count', 'head_segment', 'tail_segment']);
      // Every middle segment is still in the actor's state.
      expect(await stateKey(svc.http, q, `queue_${key.slice(6)}_seg_${metadata.head_segment + 5}`), `${where}: ${key} middle segment`).toHaveLength(SIZE);
      expect(await stateKey(svc.http, q, `offloaded_queue_${key.slice(6)}_seg_${metadata.head_segment + 5}_${q}`), where).toBeUndefined();
    }
    expect(stats.segmentsOffloaded - before.segmentsOffloaded, `${where}: nothing offloaded`).toBe(0);
    expect(stats.offloadFailures - before.offloadFailures, `${where}: failures counted`).toBeGreaterThanOrEqual(12);
    expect(faults.failures.save, where).toBeGreaterThanOrEqual(12);

    while (model.count() > 0) {
      const depth = rnd.int(1, 100);
      const res = await svc.http.post(`/queue/${q}/pop?depth=${depth}`);
      expect(res.status, `${where}: ${JSON.stringify(res.body)}`).toBe(200);
      const expected = model.pop(depth);
      expect(res.body, `${where}: pop depth ${depth}`).toStrictEqual({ items: expected, count: expected.length });
    }
    expect((await svc.http.post(`/queue/${q}/pop?depth=100`)).body).toStrictEqual({ items: [], count: 0 });
    expect(stats.segmentsLoaded - before.segmentsLoaded, `${where}: nothing to load`).toBe(0);
  });

  it('loads that always fail: a pop returns what it can reach, then 503 STORE_UNAVAILABLE until the store works; nothing lost', async () => {
    const q = uniqueQueueId('load-down');
    const res = await svc.http.post(`/queue/${q}/push/batch`).send({ items: range(100).map((n) => ({ item: { n } })) });
    expect(res.status).toBe(200);
    expect((await inspectQueue(svc.http, q)).priorities['0']).toMatchObject({
      head_segment: 0,
      tail_segment: 9,
      head_offloaded_segment: 2,
      tail_offloaded_segment: 8,
    });
    const before = { ...stats };
    faults = injectStoreFaults(store, ['load'], () => true);
    const ns = (body: { items: { n: number }[] }): number[] => body.items.map((i) => i.n);

    // Segment 2 cannot come into the buffer, but the head (0, then 1) is in the actor's state.
    const first = await svc.http.post(`/queue/${q}/pop?depth=15`);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(ns(first.body)).toStrictEqual(range(15));
    // The rest of segment 1, then the head moves to 2, which is offloaded: the pop stops short.
    const second = await svc.http.post(`/queue/${q}/pop?depth=100`);
    expect(second.status, JSON.stringify(second.body)).toBe(200);
    expect(ns(second.body), 'stops at the segment it cannot load, does not skip it').toStrictEqual(range(5).map((i) => 15 + i));
    expect((await inspectQueue(svc.http, q)).priorities['0']).toMatchObject({
      count: 80,
      head_segment: 2,
      head_offloaded_segment: 2,
      tail_offloaded_segment: 8,
    });
    for (let i = 0; i < 3; i++) {
      const blocked = await svc.http.post(`/queue/${q}/pop?depth=1`);
      expect(blocked.status, JSON.stringify(blocked.body)).toBe(503);
      expect(blocked.body).toMatchObject({ statusCode: 503, error_code: 'STORE_UNAVAILABLE' });
      expect(typeof blocked.body.message).toBe('string');
      expect(blocked.headers['retry-after']).toBeDefined();
    }
    expect((await inspectQueue(svc.http, q)).count, 'a 503 pop removes nothing').toBe(80);
    expect(stats.loadFailures - before.loadFailures).toBeGreaterThanOrEqual(4);
    expect(stats.segmentsLoaded - before.segmentsLoaded).toBe(0);
    // Pushes still succeed meanwhile.
    const push = await svc.http.post(`/queue/${q}/push`).send({ item: { n: 100 } });
    expect(push.status, JSON.stringify(push.body)).toBe(200);
    faults.restore();
    faults = undefined;

    const drained = (await drain<{ n: number }>(svc.http, q)).map((i) => i.n);
    expect(drained.join(','), 'everything from segment 2 on, in order').toBe(
      range(81)
        .map((i) => 20 + i)
        .join(','),
    );
    expect(await storedRows(svc.app, q)).toStrictEqual({ items: 0, offloaded: 0 });
  });

  /**
   * Seed 003: `_return_items_to_queue()` loads segments back before it prepends. When that
   * load fails, the head segment itself can be in the offload store while a lock's items are
   * returned in front of it; once the store works again, the returned items must still come
   * first and none may be lost.
   */
  it('a lock released while its head segment could not be loaded back: the items come back first once the store works', async () => {
    const q = uniqueQueueId('ack-offloaded-head');
    const item = (n: number): Record<string, unknown> => ({ n });
    const res = await svc.http.post(`/queue/${q}/push/batch`).send({ items: range(100).map((n) => ({ item: item(n) })) });
    expect(res.status).toBe(200);
    expect((await inspectQueue(svc.http, q)).priorities['0']).toMatchObject({
      head_segment: 0,
      tail_segment: 9,
      head_offloaded_segment: 2,
      tail_offloaded_segment: 8,
    });

    faults = injectStoreFaults(store, ['load'], () => true);
    // Takes segments 0 and 1; the head moves to 2, which cannot be loaded back.
    const lock = await lockItems(svc.http, q, { depth: 20 });
    expect(lock.items).toStrictEqual(range(20).map(item));
    const degraded = (await inspectQueue(svc.http, q)).priorities['0'];
    expect(degraded, 'the head segment itself is still offloaded').toMatchObject({ count: 80, head_segment: 2, head_offloaded_segment: 2 });
    // While the head cannot be loaded, a pop must not pass it.
    const blocked = await svc.http.post(`/queue/${q}/pop?depth=5`);
    expect(blocked.status, JSON.stringify(blocked.body)).toBe(423); // the lock still holds the queue

    const released = await release(svc.http, q, lock.lockId);
    expect(released.status, JSON.stringify(released.body)).toBe(200);
    expect(released.body).toMatchObject({ success: true, items_returned: 20 });
    expect((await inspectQueue(svc.http, q)).count).toBe(100);
    const unavailable = await svc.http.post(`/queue/${q}/pop?depth=5`);
    expect(unavailable.status, `head still not loadable: ${JSON.stringify(unavailable.body)}`).toBe(503);
    faults.restore();
    faults = undefined;

    const drained = (await drain<{ n: number }>(svc.http, q)).map((i) => i.n);
    expect(drained.join(','), 'the returned items first, then the rest, nothing lost').toBe(range(100).join(','));
  });
});
