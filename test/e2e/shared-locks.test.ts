import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acknowledge, popAck, pushAll, release } from '../support/lock-helpers.js';
import { databaseKind, makeDataDir, removeDataDir, startService, type TestService, uniqueQueueId } from '../support/service.js';

/**
 * Queue settings, shared lock mode, delivery counts and dead letters over HTTP (CONTRACT.md,
 * "Queue settings", "Shared lock mode", "Deliveries and dead letters").
 */
type Item = { id: string };
const ids = (items: Item[]): string[] => items.map((i) => i.id);
const entries = (priority: number, ...names: string[]): { item: Item; priority: number }[] => names.map((id) => ({ item: { id }, priority }));

describe(`shared locks and dead letters (${databaseKind})`, () => {
  let svc: TestService;
  let dataDir: string;

  beforeAll(async () => {
    dataDir = makeDataDir();
    svc = await startService({ dataDir });
  });

  afterAll(async () => {
    await svc?.close();
    removeDataDir(dataDir);
  });

  const settings = (q: string, body: Record<string, unknown>) => svc.http.put(`/queue/${q}/settings`).send(body);

  it('competing consumers each take the next items under a lock of their own; given-back items return in push order', async () => {
    const q = uniqueQueueId('shared');
    expect((await settings(q, { lock_mode: 'shared' })).body).toMatchObject({ lock_mode: 'shared', max_deliveries: null, dead_letter_queue: null });
    await pushAll(svc.http, q, entries(0, 'a0', 'a1', 'a2', 'a3', 'a4', 'a5'));
    const first = await popAck(svc.http, q, { depth: 2, ttl: 30 });
    const second = await popAck(svc.http, q, { depth: 2, ttl: 30 });
    expect(first.status).toBe(200);
    expect(second.status).toBe(200);
    expect(ids(first.body.items)).toEqual(['a0', 'a1']);
    expect(ids(second.body.items)).toEqual(['a2', 'a3']);
    expect(first.body.delivery_counts).toEqual([1, 1]);
    const info = await svc.http.get(`/queue/${q}`);
    expect(info.body).toMatchObject({ count: 2, locks: { count: 2, item_count: 4 } });
    expect(info.body.lock).toBeUndefined();
    // The second lock ends first: its items go back behind the first lock's, ahead of a4.
    expect((await release(svc.http, q, second.body.lock_id)).body).toMatchObject({ success: true, items_returned: 2 });
    expect((await release(svc.http, q, first.body.lock_id)).body).toMatchObject({ success: true, items_returned: 2 });
    const again = await popAck(svc.http, q, { depth: 5, ttl: 30 });
    expect(ids(again.body.items)).toEqual(['a0', 'a1', 'a2', 'a3', 'a4']);
    expect(again.body.delivery_counts).toEqual([2, 2, 2, 2, 1]);
    expect((await acknowledge(svc.http, q, again.body.lock_id)).body).toMatchObject({ items_acknowledged: 5 });
    expect((await acknowledge(svc.http, q, again.body.lock_id)).status).toBe(404);
  });

  it('an item that reached max_deliveries goes to the tail of the dead-letter queue when its lock is released', async () => {
    const q = uniqueQueueId('dl-src');
    const dlq = uniqueQueueId('dl-dst');
    expect((await settings(q, { lock_mode: 'shared', max_deliveries: 2, dead_letter_queue: dlq })).status).toBe(200);
    await pushAll(svc.http, q, entries(3, 'x0', 'x1'));
    for (let round = 1; round <= 2; round++) {
      const popped = await popAck(svc.http, q, { depth: 1, ttl: 30 });
      expect(ids(popped.body.items)).toEqual(['x0']);
      expect(popped.body.delivery_counts).toEqual([round]);
      const released = await release(svc.http, q, popped.body.lock_id);
      expect(released.body.items_returned).toBe(round === 2 ? 0 : 1);
    }
    const dead = await svc.http.post(`/queue/${dlq}/pop`).query({ depth: 10 });
    expect(dead.body.items).toEqual([{ id: 'x0' }]);
    const rest = await svc.http.post(`/queue/${q}/pop`).query({ depth: 10 });
    expect(ids(rest.body.items)).toEqual(['x1']);
  });
});
