import pg from 'pg';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppConfig } from '../../src/config/app-config.js';
import { PREVIOUS_RELEASE_CONNECTIONS } from '../../src/database/database.options.js';
import { DatabaseProvider } from '../../src/database/database.provider.js';
import { UnitOfWork } from '../../src/database/unit-of-work.js';
import { OffloadStore } from '../../src/offload/offload-store.js';
import { ActorRegistry } from '../../src/queue/runtime/actor-registry.js';
import { PackingGate } from '../../src/storage/packing-gate.js';
import { inspectQueue, stateKey, storedRows } from '../support/offload-helpers.js';
import { drain, range } from '../support/queue-helpers.js';
import type { Item } from '../support/queue-model.js';
import { removeDataDir, startService, TestService, uniqueQueueId } from '../support/service.js';

/**
 * A segment brought back from the offload store for the head is in the actor's state (seed 003:
 * `queue_<p>_seg_<n>`, not `offloaded_…`) but stored packed: one row holding its items, written
 * once, never rewritten by pops, deleted when the head moves past it; not 100 item rows.
 */

const ids = (from: number, to: number): Item[] => range(to - from).map((i) => ({ id: from + i }));

/** What the tables hold of one segment: its item rows, and its packed row (items and the transaction that wrote it). */
async function segmentStorage(svc: TestService, q: string, segment: number): Promise<{ rows: number; packed: { items: number; xmin: string } | undefined }> {
  const db = svc.app.get(DataSource);
  const rows = await db.query<{ n: number }[]>(`SELECT count(*)::int AS n FROM segment_items WHERE queue_id = $1 AND priority = 0 AND segment = $2`, [
    q,
    segment,
  ]);
  const packed = await db.query<{ items: number; xmin: string }[]>(
    `SELECT cardinality(items) AS items, xmin::text AS xmin FROM offloaded_segments WHERE queue_id = $1 AND key = $2`,
    [q, `queue_0_seg_${segment}`],
  );
  return { rows: rows[0].n, packed: packed[0] };
}

describe('segments brought back from the offload store are kept packed (SEGMENT_SIZE 100, BUFFER_SEGMENTS 1)', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startService({ env: { SEGMENT_SIZE: '100', BUFFER_SEGMENTS: '1' } });
    // The gate looks once the database is open; waited for here so that the first load-back packs.
    expect(await svc.app.get(PackingGate).look(), 'no connection of the previous release').toBe(true);
  });
  afterAll(async () => {
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  const pushIds = async (q: string, from: number, to: number): Promise<void> => {
    for (let i = from; i < to; i += 100) {
      const res = await svc.http.post(`/queue/${q}/push/batch`).send({ items: ids(i, Math.min(i + 100, to)).map((item) => ({ item })) });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    }
  };
  const pop = async (q: string, depth: number, query = ''): Promise<{ items: Item[]; lock_id?: string }> => {
    const res = await svc.http.post(`/queue/${q}/pop?depth=${depth}${query}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body as { items: Item[]; lock_id?: string };
  };

  it('writes a loaded-back segment as one row, shows it as queue_0_seg_<n>, never rewrites it on pops, and deletes it when the head passes', async () => {
    const q = uniqueQueueId('packed');
    await pushIds(q, 0, 500); // segments 0..4; 2 and 3 offloaded
    expect(await segmentStorage(svc, q, 2)).toStrictEqual({ rows: 0, packed: undefined });

    // The head moves to segment 1: segment 2 comes back into the actor's state, packed.
    const store = svc.app.get(OffloadStore);
    const offloadedBefore = await store.countSegments();
    expect((await pop(q, 100)).items).toStrictEqual(ids(0, 100));
    expect(await store.countSegments(), 'the offload store counts one segment less: a packed one is not offloaded').toBe(offloadedBefore - 1);
    const loaded = await segmentStorage(svc, q, 2);
    expect(loaded.rows, 'no item rows written for the segment brought back').toBe(0);
    expect(loaded.packed?.items, 'one packed row with its 100 items').toBe(100);
    expect(await stateKey(svc.http, q, 'metadata')).toStrictEqual({
      config: { segment_size: 100, buffer_segments: 1 },
      queues: { queue_0: { metadata: { count: 400, head_segment: 1, tail_segment: 4, head_offloaded_segment: 3, tail_offloaded_segment: 3 } } },
    });
    expect(await stateKey(svc.http, q, 'queue_0_seg_2'), 'in the state as an unpacked segment').toStrictEqual(ids(200, 300));
    expect(await stateKey(svc.http, q, `offloaded_queue_0_seg_2_${q}`), 'no longer in the offload store').toBeUndefined();

    // Pops from the packed head leave its row as it was written.
    expect((await pop(q, 100)).items).toStrictEqual(ids(100, 200));
    expect((await pop(q, 30)).items).toStrictEqual(ids(200, 230));
    expect(await segmentStorage(svc, q, 2), 'the packed head is not rewritten by pops').toStrictEqual(loaded);
    expect(await stateKey(svc.http, q, 'queue_0_seg_2')).toStrictEqual(ids(230, 300));
    expect((await inspectQueue(svc.http, q)).priorities['0']).toMatchObject({ count: 270, head_segment: 2, head_segment_count: 70 });

    // Read back from the tables by a fresh actor: the popped items stay popped.
    svc.app.get(ActorRegistry).deactivate(q);
    expect(await stateKey(svc.http, q, 'queue_0_seg_2'), 'after a reload').toStrictEqual(ids(230, 300));
    svc.app.get(ActorRegistry).deactivate(q);
    expect((await pop(q, 5)).items, 'a pop of a freshly loaded queue').toStrictEqual(ids(230, 235));

    // Items given back into the packed head go in front of it, as rows where packed items were popped.
    const locked = await pop(q, 5, '&require_ack=true');
    expect(locked.items).toStrictEqual(ids(235, 240));
    const release = await svc.http.post(`/queue/${q}/release`).send({ lock_id: locked.lock_id });
    expect(release.status, JSON.stringify(release.body)).toBe(200);
    expect(await stateKey(svc.http, q, 'queue_0_seg_2')).toStrictEqual(ids(235, 300));
    svc.app.get(ActorRegistry).deactivate(q);
    expect(await stateKey(svc.http, q, 'queue_0_seg_2'), 'given-back rows and packed items, after a reload').toStrictEqual(ids(235, 300));
    expect((await segmentStorage(svc, q, 2)).packed, 'still the row written at the load').toStrictEqual(loaded.packed);

    // The head moves past segment 2: its packed row goes; segment 3 came back packed meanwhile.
    expect((await pop(q, 65)).items).toStrictEqual(ids(235, 300));
    expect(await segmentStorage(svc, q, 2)).toStrictEqual({ rows: 0, packed: undefined });
    expect((await segmentStorage(svc, q, 3)).packed?.items).toBe(100);
    expect(await drain(svc.http, q)).toStrictEqual(ids(300, 500));
    expect(await storedRows(svc.app, q), 'a drained queue leaves nothing in either table').toStrictEqual({ items: 0, offloaded: 0 });
  });

  it('a segment a pop reaches in the offload store is packed whole, its items popped in that turn left out by the head position', async () => {
    const q = uniqueQueueId('packed-deep-pop');
    expect((await svc.http.put(`/queue/${q}/settings`).send({ segment_size: 10 })).status).toBe(200);
    await pushIds(q, 0, 200); // segments 0..19 of 10; 2..18 offloaded
    // One pop takes segments 0 and 1 and 5 items of segment 2, which it loads back itself.
    expect((await pop(q, 25)).items).toStrictEqual(ids(0, 25));
    expect(await segmentStorage(svc, q, 2)).toMatchObject({ rows: 0, packed: { items: 10 } });
    expect(await stateKey(svc.http, q, 'queue_0_seg_2')).toStrictEqual(ids(25, 30));
    expect((await segmentStorage(svc, q, 3)).packed?.items).toBe(10);
    svc.app.get(ActorRegistry).deactivate(q);
    expect(await stateKey(svc.http, q, 'queue_0_seg_2'), 'after a reload').toStrictEqual(ids(25, 30));
    expect(await drain(svc.http, q)).toStrictEqual(ids(25, 200));
    expect(await storedRows(svc.app, q)).toStrictEqual({ items: 0, offloaded: 0 });
  });

  it('items of any text come back exactly through the offload store and a packed segment', async () => {
    const q = uniqueQueueId('packed-text');
    expect((await svc.http.put(`/queue/${q}/settings`).send({ segment_size: 4 })).status).toBe(200);
    const texts = [
      'quote " and \\ backslash',
      'nul \u0000 inside',
      'emoji 🦀 and é',
      '{"json": [1, "x"]}',
      'tab\t newline\n',
      '\u2028 separator',
      "'single'",
      '',
    ];
    const items = range(40).map((i) => ({ i, text: texts[i % texts.length], nested: { deep: [texts[(i + 3) % texts.length]] } }));
    const res = await svc.http.post(`/queue/${q}/push/batch`).send({ items: items.map((item) => ({ item })) });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const info = await inspectQueue(svc.http, q);
    expect(info.priorities['0'].head_offloaded_segment, 'segments were offloaded').toBe(2);
    expect(await drain(svc.http, q)).toStrictEqual(items);
  });

  it('a deleted queue leaves no packed segment behind', async () => {
    const q = uniqueQueueId('packed-delete');
    await pushIds(q, 0, 500);
    expect((await pop(q, 100)).items).toStrictEqual(ids(0, 100));
    expect((await pop(q, 50)).items).toStrictEqual(ids(100, 150));
    expect((await segmentStorage(svc, q, 2)).packed?.items).toBe(100);
    const del = await svc.http.delete(`/queue/${q}`);
    expect(del.body).toStrictEqual({ success: true, items_deleted: 350 });
    expect(await storedRows(svc.app, q)).toStrictEqual({ items: 0, offloaded: 0 });
  });
});

describe('PACKED_SEGMENTS=false: a segment brought back is written as rows', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startService({ env: { SEGMENT_SIZE: '100', BUFFER_SEGMENTS: '1', PACKED_SEGMENTS: 'false' } });
  });
  afterAll(async () => {
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  it('writes the rows not popped in the same turn, and pops in order', async () => {
    const q = uniqueQueueId('unpacked');
    expect((await svc.http.put(`/queue/${q}/settings`).send({ segment_size: 10 })).status).toBe(200);
    const res = await svc.http.post(`/queue/${q}/push/batch`).send({ items: ids(0, 200).map((item) => ({ item })) });
    expect(res.status).toBe(200);
    // One pop takes segments 0 and 1 and 5 items of segment 2, which it loads back itself.
    expect((await svc.http.post(`/queue/${q}/pop?depth=25`)).body.items).toStrictEqual(ids(0, 25));
    expect(await segmentStorage(svc, q, 2), 'the 5 items left').toStrictEqual({ rows: 5, packed: undefined });
    expect(await segmentStorage(svc, q, 3)).toStrictEqual({ rows: 10, packed: undefined });
    expect(await stateKey(svc.http, q, 'queue_0_seg_2')).toStrictEqual(ids(25, 30));
    expect(await drain(svc.http, q)).toStrictEqual(ids(25, 200));
    expect(await storedRows(svc.app, q)).toStrictEqual({ items: 0, offloaded: 0 });
  });
});

describe('the packing gate: shut while a process of the previous release is connected', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startService();
  });
  afterAll(async () => {
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  it('stays shut while a connection named as that release names its own is open, and opens once it is gone', async () => {
    const db = svc.app.get(DatabaseProvider);
    // Held as briefly as the test allows: the database may be shared with other tests' services.
    const old = new pg.Client(db.clientConfig(PREVIOUS_RELEASE_CONNECTIONS[0]));
    await old.connect();
    // A gate as a process starting now makes it (the service's own opened when it started).
    const gate = new PackingGate(svc.app.get(AppConfig), db, svc.app.get(UnitOfWork));
    try {
      expect(await gate.look(), 'shut: a process of the previous release would not read packed segments').toBe(false);
      expect(gate.packing).toBe(false);
    } finally {
      await old.end();
    }
    expect(await gate.look(), 'open once it is gone').toBe(true);
    expect(gate.packing).toBe(true);
    gate.onApplicationShutdown();
  });
});
