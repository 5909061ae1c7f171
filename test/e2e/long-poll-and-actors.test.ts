import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ActorRegistry } from '../../src/queue/runtime/actor-registry.js';
import { pollsWaitingOn, removeDataDir, startService, TestService, uniqueQueueId } from '../support/service.js';

describe('long polling', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startService({ env: { ACTOR_IDLE_TIMEOUT_MS: '300' } });
  });
  afterAll(async () => {
    await svc.close();
    removeDataDir(svc.dataDir);
  });

  it('answers as soon as an item arrives, not at the end of the wait, without holding up pushes', async () => {
    const q = uniqueQueueId();
    const started = Date.now();
    const pop = svc.http.post(`/queue/${q}/pop?wait_seconds=10`).then((res) => ({ res, at: Date.now() }));
    await pollsWaitingOn(svc, q);
    const pushStarted = Date.now();
    const push = await svc.http.post(`/queue/${q}/push`).send({ item: { hello: 'world' } });
    const pushTook = Date.now() - pushStarted;
    expect(push.status).toBe(200);
    const { res, at } = await pop;
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ items: [{ hello: 'world' }], count: 1 });
    // Long before the 10 s wait is over, and the push did not wait for the poll.
    expect(at - started).toBeLessThan(5000);
    expect(pushTook).toBeLessThan(2000);
  });

  it('answers an empty list when nothing arrives within the wait', async () => {
    const q = uniqueQueueId();
    const started = Date.now();
    const res = await svc.http.post(`/queue/${q}/pop?wait_seconds=1`);
    expect(res.body).toEqual({ items: [], count: 0 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
  });

  it('wakes one waiting pop per pushed item; the other keeps waiting', async () => {
    const q = uniqueQueueId();
    // \`.then\` sends a supertest request; it is lazy until then.
    const a = svc.http.post(`/queue/${q}/pop?wait_seconds=3`).then((r) => r);
    const b = svc.http.post(`/queue/${q}/pop?wait_seconds=3`).then((r) => r);
    await pollsWaitingOn(svc, q, 2);
    await svc.http.post(`/queue/${q}/push`).send({ item: { n: 1 } });
    const [ra, rb] = await Promise.all([a, b]);
    const counts = [ra.body.count, rb.body.count].sort();
    expect(counts).toEqual([0, 1]);
  });
});

describe('actor lifecycle', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startService({ env: { ACTOR_IDLE_TIMEOUT_MS: '200' } });
  });
  afterAll(async () => {
    await svc.close();
    removeDataDir(svc.dataDir);
  });

  it('deactivates idle actors and reloads them from the database on the next use', async () => {
    const registry = svc.app.get(ActorRegistry);
    const q = uniqueQueueId();
    await svc.http.post(`/queue/${q}/push/batch`).send({ items: [{ item: { n: 1 } }, { item: { n: 2 } }, { item: { n: 3 } }] });
    expect(registry.peek(q)).toBeDefined();
    expect(registry.itemsInMemory).toBeGreaterThan(0);
    await vi.waitFor(() => expect(registry.peek(q), 'deactivated after 200 ms idle').toBeUndefined(), { timeout: 5000, interval: 20 });
    expect(registry.activeActors).toBe(0);
    expect(registry.itemsInMemory).toBe(0);
    const res = await svc.http.post(`/queue/${q}/pop?depth=2`);
    expect(res.body.items).toEqual([{ n: 1 }, { n: 2 }]);
    expect(registry.peek(q)).toBeDefined();
  });

  it('does not keep an actor for a queue that does not exist', async () => {
    const registry = svc.app.get(ActorRegistry);
    const q = uniqueQueueId();
    await svc.http.post(`/queue/${q}/pop`);
    await svc.http.get(`/queue/${q}`);
    expect(registry.peek(q)).toBeUndefined();
  });
});
