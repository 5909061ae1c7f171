import type TestAgent from 'supertest/lib/agent.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeWithin, lockItems, popAck, pushAll, release } from '../support/lock-helpers.js';
import { drain, range } from '../support/queue-helpers.js';
import { databaseKind, removeDataDir, sharedDatabase, startService, type TestService, uniqueQueueId } from '../support/service.js';

/**
 * Redrive over HTTP (CONTRACT.md, "Redrive"): dead letters remember the queue they came from,
 * through the dead-letter queue's segments, offloading and locks, and a redrive moves them back
 * (or to a destination), from the front, to the tails of their priorities, delivery counts
 * starting again at 0.
 *
 * Items are `{ id }`; dead letters are made by releasing a lock on a queue with `max_deliveries: 1`.
 */
type Item = { id: string };
const ids = (items: Item[]): string[] => items.map((i) => i.id);

async function settle(http: TestAgent, q: string, body: object): Promise<void> {
  const res = await http.put(`/queue/${q}/settings`).send(body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
}

/** Sends these items of `source` to its dead-letter queue `dlq`: pushed, popped under a lock, released past `max_deliveries: 1`. */
async function deadLetter(http: TestAgent, source: string, dlq: string, entries: { id: string; priority?: number }[]): Promise<void> {
  await settle(http, source, { max_deliveries: 1, dead_letter_queue: dlq });
  await pushAll(
    http,
    source,
    entries.map((e) => ({ item: { id: e.id }, priority: e.priority ?? 0 })),
  );
  const lock = await lockItems<Item>(http, source, { depth: 100 });
  expect(lock.items).toHaveLength(entries.length);
  const res = await release(http, source, lock.lockId);
  expect(res.body).toMatchObject({ success: true, items_dead_lettered: entries.length });
}

const redrive = (http: TestAgent, q: string, body: object = {}) => http.post(`/queue/${q}/redrive`).send(body);

describe(`redrive (${databaseKind})`, () => {
  /** SEGMENT_SIZE 5, BUFFER_SEGMENTS 1: a few dozen items fill middle segments that go to the offload store. */
  let svc: TestService;

  beforeAll(async () => {
    svc = await startService({ env: { SEGMENT_SIZE: '5', BUFFER_SEGMENTS: '1' } });
  });
  afterAll(async () => {
    if (svc) await closeWithin(() => svc.close());
    if (svc) removeDataDir(svc.dataDir);
  });

  it('sends dead letters back to the queues they came from, to their tails, in order, delivery counts at 0, and leaves items never dead-lettered', async () => {
    const [a, b, dlq] = [uniqueQueueId('rd-a'), uniqueQueueId('rd-b'), uniqueQueueId('rd-dlq')];
    await deadLetter(svc.http, a, dlq, [{ id: 'a1' }, { id: 'a2', priority: 1 }]);
    await pushAll(svc.http, dlq, [{ item: { id: 'plain' } }]);
    await deadLetter(svc.http, b, dlq, [{ id: 'b1' }]);
    await pushAll(svc.http, a, [{ item: { id: 'a-new' } }]);

    const res = await redrive(svc.http, dlq);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ success: true, items_moved: 3, items_left: 1 });

    expect(ids(await drain<Item>(svc.http, dlq))).toEqual(['plain']);
    // To the tails: after what a held meanwhile; priority 0 first.
    const back = await popAck(svc.http, a, { depth: 10 });
    expect(ids(back.body.items)).toEqual(['a-new', 'a1', 'a2']);
    expect(back.body.delivery_counts).toEqual([1, 1, 1]);
    expect(ids(await drain<Item>(svc.http, b))).toEqual(['b1']);
  });

  it('looks past more items never dead-lettered than one batch takes, which stay in their order', async () => {
    const [a, dlq] = [uniqueQueueId('rd-past'), uniqueQueueId('rd-past-dlq')];
    const plain = range(1500).map((i) => ({ item: { id: `p${i}` } }));
    // A batch takes at most 32 segments' worth: with segments of 100, 3200 items.
    await settle(svc.http, dlq, { segment_size: 100 });
    await pushAll(svc.http, dlq, plain.slice(0, 1000));
    await pushAll(svc.http, dlq, plain.slice(1000));
    await deadLetter(svc.http, a, dlq, [{ id: 'd1' }, { id: 'd2' }]);
    expect((await redrive(svc.http, dlq)).body).toEqual({ success: true, items_moved: 2, items_left: 1500 });
    expect(ids(await drain<Item>(svc.http, a))).toEqual(['d1', 'd2']);
    expect(ids(await drain<Item>(svc.http, dlq))).toEqual(plain.map((p) => p.item.id));
  });

  it('a queue of small segments is redriven in smaller batches; items left are looked past up to 32 segments', async () => {
    // SEGMENT_SIZE 5 here: a batch takes at most 160 items, most of its segments from the offload store.
    const [a, dlq] = [uniqueQueueId('rd-small'), uniqueQueueId('rd-small-dlq')];
    const names = range(400).map((i) => `s${i}`);
    // A pop takes 100 items at most: four rounds of dead letters.
    for (let k = 0; k < 400; k += 100)
      await deadLetter(
        svc.http,
        a,
        dlq,
        names.slice(k, k + 100).map((id) => ({ id })),
      );
    expect((await redrive(svc.http, dlq, { max_items: 100000 })).body).toEqual({ success: true, items_moved: 400, items_left: 0 });
    expect(ids(await drain<Item>(svc.http, a))).toEqual(names);
    // 200 items never dead-lettered in front of a dead letter: more than 160, so it stays.
    await pushAll(
      svc.http,
      dlq,
      range(200).map((i) => ({ item: { id: `p${i}` } })),
    );
    await deadLetter(svc.http, a, dlq, [{ id: 'late' }]);
    expect((await redrive(svc.http, dlq)).body).toEqual({ success: true, items_moved: 0, items_left: 201 });
    expect((await redrive(svc.http, dlq, { destination: a, max_items: 201 })).body).toEqual({ success: true, items_moved: 201, items_left: 0 });
  });

  it('moves everything to a destination given, at most max_items from the front, lowest priority first', async () => {
    const [dlq, target] = [uniqueQueueId('rd-dst-src'), uniqueQueueId('rd-dst')];
    await pushAll(svc.http, dlq, [
      { item: { id: 'p2-1' }, priority: 2 },
      { item: { id: 'p0-1' }, priority: 0 },
      { item: { id: 'p0-2' }, priority: 0 },
      { item: { id: 'p2-2' }, priority: 2 },
    ]);
    expect((await redrive(svc.http, dlq, { destination: target, max_items: 3 })).body).toEqual({ success: true, items_moved: 3, items_left: 1 });
    expect(ids(await drain<Item>(svc.http, target))).toEqual(['p0-1', 'p0-2', 'p2-1']);
    expect(ids(await drain<Item>(svc.http, dlq))).toEqual(['p2-2']);
    expect((await redrive(svc.http, dlq, { destination: target })).body).toEqual({ success: true, items_moved: 0, items_left: 0 });
  });

  it('keeps where each item came from through offloaded segments of the dead-letter queue', async () => {
    const [a, dlq] = [uniqueQueueId('rd-off'), uniqueQueueId('rd-off-dlq')];
    const names = range(40).map((i) => `x${i}`);
    await deadLetter(
      svc.http,
      a,
      dlq,
      names.map((id) => ({ id })),
    );
    // Dead letters join the dead-letter queue's tail at its next turn, which then moves its middle segments to the store.
    expect((await svc.http.get(`/queue/${dlq}`)).body.count).toBe(40);
    const info = await svc.http.get(`/queue/${dlq}`);
    expect(info.body.priorities['0'].head_offloaded_segment).not.toBeNull();
    const res = await redrive(svc.http, dlq, { max_items: 100000 });
    expect(res.body).toEqual({ success: true, items_moved: 40, items_left: 0 });
    expect(ids(await drain<Item>(svc.http, a))).toEqual(names);
    expect((await svc.http.get(`/queue/${dlq}`)).body.count).toBe(0);
  });

  it('leaves items held by a live lock; items_left does not count them', async () => {
    const [a, dlq] = [uniqueQueueId('rd-lock'), uniqueQueueId('rd-lock-dlq')];
    await deadLetter(svc.http, a, dlq, [{ id: 'l1' }, { id: 'l2' }, { id: 'l3' }]);
    const lock = await lockItems<Item>(svc.http, dlq, { depth: 1 });
    expect(ids(lock.items)).toEqual(['l1']);
    expect((await redrive(svc.http, dlq)).body).toEqual({ success: true, items_moved: 2, items_left: 0 });
    expect(ids(await drain<Item>(svc.http, a))).toEqual(['l2', 'l3']);
    // Released, the held item is still a dead letter of `a`, and goes back there too.
    expect((await release(svc.http, dlq, lock.lockId)).status).toBe(200);
    expect((await redrive(svc.http, dlq)).body).toEqual({ success: true, items_moved: 1, items_left: 0 });
    expect(ids(await drain<Item>(svc.http, a))).toEqual(['l1']);
  });

  it('keeps where items came from through a shared lock given back', async () => {
    const [a, dlq] = [uniqueQueueId('rd-sh'), uniqueQueueId('rd-sh-dlq')];
    await deadLetter(svc.http, a, dlq, [{ id: 's1' }, { id: 's2' }]);
    await settle(svc.http, dlq, { lock_mode: 'shared' });
    const lock = await lockItems<Item>(svc.http, dlq, { depth: 1 });
    expect((await release(svc.http, dlq, lock.lockId)).status).toBe(200);
    expect((await redrive(svc.http, dlq)).body).toEqual({ success: true, items_moved: 2, items_left: 0 });
    expect(ids(await drain<Item>(svc.http, a))).toEqual(['s1', 's2']);
  });

  it('answers 404 QUEUE_NOT_FOUND for a queue that does not exist, and 400 VALIDATION_FAILED for a bad body or the queue itself as destination', async () => {
    const q = uniqueQueueId('rd-none');
    const missing = await redrive(svc.http, q);
    expect(missing.status).toBe(404);
    expect(missing.body.error_code).toBe('QUEUE_NOT_FOUND');
    await pushAll(svc.http, q, [{ item: { id: 'stay' } }]);
    for (const body of [
      { destination: q },
      { max_items: 0 },
      { max_items: 100001 },
      { max_items: 2.5 },
      { destination: 'bad id' },
      { destination: null },
      { other: 1 },
    ]) {
      const res = await redrive(svc.http, q, body);
      expect({ status: res.status, code: res.body.error_code }, JSON.stringify(body)).toEqual({ status: 400, code: 'VALIDATION_FAILED' });
    }
    expect(ids(await drain<Item>(svc.http, q))).toEqual(['stay']);
  });

  it('another process holding both queues in memory sees the redrive: nothing popped twice, nothing missed', async () => {
    const other = await startService({ env: { SEGMENT_SIZE: '5', BUFFER_SEGMENTS: '1', ...sharedDatabase(svc) } });
    try {
      const [a, dlq] = [uniqueQueueId('rd-2p'), uniqueQueueId('rd-2p-dlq')];
      await deadLetter(svc.http, a, dlq, [{ id: 'p1' }, { id: 'p2' }, { id: 'p3' }]);
      // The other process activates both queues: the dead-letter queue with its items, the source empty.
      expect((await other.http.get(`/queue/${dlq}`)).body.count).toBe(3);
      expect((await other.http.post(`/queue/${a}/pop`)).body.count).toBe(0);

      expect((await redrive(svc.http, dlq, { max_items: 2 })).body).toEqual({ success: true, items_moved: 2, items_left: 1 });
      // Its cached actors are outdated now; their version checks make them read the queues again.
      expect(ids(await drain<Item>(other.http, dlq))).toEqual(['p3']);
      expect(ids(await drain<Item>(other.http, a))).toEqual(['p1', 'p2']);
      expect(ids(await drain<Item>(svc.http, dlq))).toEqual([]);
    } finally {
      await closeWithin(() => other.close());
      removeDataDir(other.dataDir);
    }
  });

  it('counts the items moved in pushpop_items_redriven_total', async () => {
    const metric = async (): Promise<number> => {
      const text = (await svc.http.get('/metrics')).text;
      const line = text.split('\n').find((l) => l.startsWith('pushpop_items_redriven_total '));
      return line === undefined ? NaN : Number(line.split(' ')[1]);
    };
    const before = await metric();
    const q = uniqueQueueId('rd-metric');
    await pushAll(svc.http, q, [{ item: { id: 'm1' } }, { item: { id: 'm2' } }]);
    expect((await redrive(svc.http, q, { destination: uniqueQueueId('rd-metric-to') })).body.items_moved).toBe(2);
    expect((await metric()) - before).toBe(2);
  });
});
