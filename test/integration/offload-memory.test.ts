import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OffloadStats } from '../../src/offload/offload-stats.js';
import { ActorRegistry } from '../../src/queue/runtime/actor-registry.js';
import { QueueService } from '../../src/queue/queue.service.js';
import { expectOffloadInvariant, inspectQueue } from '../support/offload-helpers.js';
import { range } from '../support/queue-helpers.js';
import { databaseKind, removeDataDir, startService, TestService, uniqueQueueId } from '../support/service.js';

/**
 * Memory stays bounded with offloading (seed 003: "Memory ≈ (buffer_segments + 2) ×
 * segment_size items"; CONTRACT.md "Segments and offloading"). With the default SEGMENT_SIZE
 * 100 and BUFFER_SEGMENTS 1 a priority keeps at most its head, one buffer segment and its tail
 * in memory: 300 items, whatever the queue's length. While a priority is popped, the next
 * READ_AHEAD_SEGMENTS offloaded segments are read ahead of the pops (SegmentReadAhead), and are
 * counted too: 500 items with the default 2.
 *
 * The numbers observed (items in memory, heap, timings) are logged once at the end.
 */

const SIZE = 100;
const BUFFER = 1;
const PER_PRIORITY_BOUND = (BUFFER + 2) * SIZE;
const READ_AHEAD = 2;
/** A priority being popped, with the segments read ahead for it. */
const POPPED_PRIORITY_BOUND = PER_PRIORITY_BOUND + READ_AHEAD * SIZE;
const BATCH = 1000;
/** HTTP by default (100 batches of 1000 take a few seconds); PUSH_VIA=service calls QueueService.pushBatch directly. */
const pushVia = process.env.PUSH_VIA === 'service' ? 'service' : 'http';

describe('memory stays bounded with offloading (SEGMENT_SIZE 100, BUFFER_SEGMENTS 1, READ_AHEAD_SEGMENTS 2)', () => {
  let svc: TestService;
  let registry: ActorRegistry;
  const observed: Record<string, number | string> = {};
  beforeAll(async () => {
    svc = await startService({ env: { SEGMENT_SIZE: String(SIZE), BUFFER_SEGMENTS: String(BUFFER), READ_AHEAD_SEGMENTS: String(READ_AHEAD) } });
    registry = svc.app.get(ActorRegistry);
  });
  afterAll(async () => {
    console.log(`[offload memory ${databaseKind}, push via ${pushVia}] ${JSON.stringify(observed)}`);
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  const pushBatch = async (q: string, entries: { item: Record<string, unknown>; priority: number }[]): Promise<void> => {
    if (pushVia === 'http') {
      const res = await svc.http.post(`/queue/${q}/push/batch`).send({ items: entries });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    } else {
      expect(await svc.app.get(QueueService).pushBatch(q, entries)).toBe(entries.length);
    }
  };

  /** Pops `n` items with depth 100, checking order and the memory bound after every pop. */
  const popChecked = async (q: string, n: number, bound: number, expectedAt: (i: number) => Record<string, unknown>, offset: number): Promise<number> => {
    let max = 0;
    for (let done = 0; done < n; done += 100) {
      const res = await svc.http.post(`/queue/${q}/pop?depth=100`);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.count).toBe(100);
      expect(res.body.items[0], `pop at ${offset + done}`).toStrictEqual(expectedAt(offset + done));
      expect(res.body.items[99], `pop at ${offset + done}`).toStrictEqual(expectedAt(offset + done + 99));
      const inMemory = registry.itemsInMemory;
      max = Math.max(max, inMemory);
      expect(inMemory, `items in memory after popping ${offset + done + 100}`).toBeLessThanOrEqual(bound);
    }
    return max;
  };

  it('100,000 items at priority 0: at most 300 items in memory after every batch, and 500 while draining', { timeout: 300_000 }, async () => {
    const q = uniqueQueueId('mem');
    const stats = svc.app.get(OffloadStats);
    const offloadedBefore = stats.segmentsOffloaded;
    global.gc?.();
    const heapBefore = process.memoryUsage().heapUsed;
    let maxAfterPush = 0;
    const started = Date.now();
    for (let b = 0; b < 100; b++) {
      await pushBatch(
        q,
        range(BATCH).map((i) => ({ item: { n: b * BATCH + i, pad: 'x'.repeat(32) }, priority: 0 })),
      );
      const inMemory = registry.itemsInMemory;
      maxAfterPush = Math.max(maxAfterPush, inMemory);
      expect(inMemory, `items in memory after batch ${b}`).toBeLessThanOrEqual(PER_PRIORITY_BOUND);
    }
    const pushMs = Date.now() - started;
    const heapAfterPush = process.memoryUsage().heapUsed;

    const info = await inspectQueue(svc.http, q);
    expect(info.priorities['0']).toStrictEqual({
      count: 100_000,
      head_segment: 0,
      tail_segment: 999,
      head_offloaded_segment: 2,
      tail_offloaded_segment: 998,
      head_segment_count: 100,
      tail_segment_count: 100,
    });
    expect(stats.segmentsOffloaded - offloadedBefore).toBe(997);
    // The actor's own count agrees with the registry's total (only this queue is active).
    expect(registry.peek(q)?.itemsInMemory).toBe(registry.itemsInMemory);

    const drainStarted = Date.now();
    const maxDraining = await popChecked(q, 20_000, POPPED_PRIORITY_BOUND, (i) => ({ n: i, pad: 'x'.repeat(32) }), 0);
    const drainMs = Date.now() - drainStarted;
    expect(maxDraining, 'the segments read ahead are counted').toBeGreaterThan(PER_PRIORITY_BOUND);
    const after = await inspectQueue(svc.http, q);
    expect(after.priorities['0']).toMatchObject({ count: 80_000, head_segment: 200, head_offloaded_segment: 202, tail_offloaded_segment: 998 });
    expectOffloadInvariant(after, 'at-rest', 'after draining 20,000');
    global.gc?.();
    const heapAfter = process.memoryUsage().heapUsed;

    const del = await svc.http.delete(`/queue/${q}`);
    expect(del.body).toStrictEqual({ success: true, items_deleted: 80_000 });
    expect(registry.itemsInMemory, 'nothing in memory once the queue is deleted').toBe(0);
    Object.assign(observed, {
      single_max_items_after_push: maxAfterPush,
      single_max_items_while_draining: maxDraining,
      single_push_100k_ms: pushMs,
      single_drain_20k_ms: drainMs,
      single_heap_before_mb: +(heapBefore / 2 ** 20).toFixed(1),
      single_heap_after_push_mb: +(heapAfterPush / 2 ** 20).toFixed(1),
      single_heap_after_drain_mb: +(heapAfter / 2 ** 20).toFixed(1),
      rss_mb: +(process.memoryUsage().rss / 2 ** 20).toFixed(1),
    });
  });

  it('3 priorities: at most 3 × 300 items in memory, and the segments read ahead for the one popped', { timeout: 300_000 }, async () => {
    const q = uniqueQueueId('mem3');
    const perPriority = 10_000;
    const bound = 3 * PER_PRIORITY_BOUND;
    const heapBefore = process.memoryUsage().heapUsed;
    let maxAfterPush = 0;
    const started = Date.now();
    // Every batch holds all three priorities, interleaved.
    for (let b = 0; b < (3 * perPriority) / BATCH; b++) {
      const entries = range(BATCH).map((i) => {
        const k = b * BATCH + i;
        const priority = k % 3;
        return { item: { p: priority, n: Math.floor(k / 3) }, priority };
      });
      await pushBatch(q, entries);
      const inMemory = registry.itemsInMemory;
      maxAfterPush = Math.max(maxAfterPush, inMemory);
      expect(inMemory, `items in memory after batch ${b}`).toBeLessThanOrEqual(bound);
    }
    const pushMs = Date.now() - started;
    const info = await inspectQueue(svc.http, q);
    for (const p of ['0', '1', '2']) {
      expect(info.priorities[p], `priority ${p}`).toStrictEqual({
        count: perPriority,
        head_segment: 0,
        tail_segment: 99,
        head_offloaded_segment: 2,
        tail_offloaded_segment: 98,
        head_segment_count: 100,
        tail_segment_count: 100,
      });
    }
    // Drain all of priority 0 and 2,000 of priority 1 (crossing from one priority into the next).
    const maxDraining = await popChecked(
      q,
      perPriority + 2000,
      bound + READ_AHEAD * SIZE,
      (i) => (i < perPriority ? { p: 0, n: i } : { p: 1, n: i - perPriority }),
      0,
    );
    const after = await inspectQueue(svc.http, q);
    expect(Object.keys(after.priorities)).toStrictEqual(['1', '2']);
    expect(after.priorities['1']).toMatchObject({ count: perPriority - 2000, head_segment: 20, head_offloaded_segment: 22 });
    expectOffloadInvariant(after, 'at-rest', 'after draining');
    const heapAfter = process.memoryUsage().heapUsed;
    const del = await svc.http.delete(`/queue/${q}`);
    expect(del.body).toStrictEqual({ success: true, items_deleted: 2 * perPriority - 2000 });
    Object.assign(observed, {
      three_max_items_after_push: maxAfterPush,
      three_max_items_while_draining: maxDraining,
      three_push_30k_ms: pushMs,
      three_heap_before_mb: +(heapBefore / 2 ** 20).toFixed(1),
      three_heap_after_mb: +(heapAfter / 2 ** 20).toFixed(1),
    });
  });

  /**
   * The actor keeps its window of segments in memory between turns (ActorRegistry: the cached
   * actor is reused when its version equals the queue row's), so a turn does not re-read the
   * head, buffer and tail segments from the database.
   */
  it('the actor and its segments stay in memory between turns', async () => {
    const q = uniqueQueueId('mem-reuse');
    await pushBatch(
      q,
      range(500).map((n) => ({ item: { n }, priority: 0 })),
    );
    const actor = registry.peek(q);
    expect(actor, 'active after the push').toBeDefined();
    expect(Number.isSafeInteger(actor!.version), 'the committed version of the queue row').toBe(true);
    const info = await inspectQueue(svc.http, q);
    expect(info.priorities['0']).toMatchObject({ head_segment: 0, tail_segment: 4, head_offloaded_segment: 2, tail_offloaded_segment: 3 });
    expect(registry.peek(q), 'the same actor serves the next turn').toBe(actor);
    expect(actor!.cachedSegments(0), 'head, buffer and tail segments in memory').toStrictEqual([0, 1, 4]);
    expect(actor!.itemsInMemory).toBe(PER_PRIORITY_BOUND);
    const pop = await svc.http.post(`/queue/${q}/pop?depth=100`);
    expect(pop.body.items[0]).toStrictEqual({ n: 0 });
    expect(registry.peek(q), 'the same actor after a pop').toBe(actor);
    expect(actor!.cachedSegments(0), 'segment 2 loaded back into the window').toStrictEqual([1, 2, 4]);
    await svc.http.delete(`/queue/${q}`);
  });
});
