import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeDataDir, startService, TestService, uniqueQueueId } from '../support/service.js';

describe('push and pop order', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startService();
  });
  afterAll(async () => {
    await svc.close();
    removeDataDir(svc.dataDir);
  });

  it('pops FIFO within a priority and lower priority numbers first, depth spilling over', async () => {
    const q = uniqueQueueId();
    const pushes: [number, number][] = [
      [2, 1],
      [0, 2],
      [1, 3],
      [0, 4],
      [2, 5],
      [1, 6],
    ];
    for (const [priority, id] of pushes) {
      const res = await svc.http.post(`/queue/${q}/push`).send({ item: { id }, priority });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ success: true, message: `Item pushed to queue ${q} at priority ${priority}` });
    }
    const first = await svc.http.post(`/queue/${q}/pop?depth=3`);
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ items: [{ id: 2 }, { id: 4 }, { id: 3 }], count: 3 });
    const rest = await svc.http.post(`/queue/${q}/pop?depth=100`);
    expect(rest.body).toEqual({ items: [{ id: 6 }, { id: 1 }, { id: 5 }], count: 3 });
    const empty = await svc.http.post(`/queue/${q}/pop`);
    expect(empty.body).toEqual({ items: [], count: 0 });
  });

  it('keeps 350 items over 4 segments in order and creates and removes segment keys', async () => {
    const q = uniqueQueueId();
    const items = Array.from({ length: 350 }, (_, i) => ({ item: { n: i } }));
    for (let i = 0; i < items.length; i += 100) {
      const res = await svc.http.post(`/queue/${q}/push/batch`).send({ items: items.slice(i, i + 100) });
      expect(res.status).toBe(200);
    }
    const meta = await svc.http.get(`/queue/${q}/state/metadata`);
    expect(meta.body.queues.queue_0.metadata).toMatchObject({ count: 350, head_segment: 0, tail_segment: 3 });
    const seg3 = await svc.http.get(`/queue/${q}/state/queue_0_seg_3`);
    expect(seg3.body).toHaveLength(50);
    expect(seg3.body[0]).toEqual({ n: 300 });

    const popped: number[] = [];
    for (;;) {
      const res = await svc.http.post(`/queue/${q}/pop?depth=100`);
      if (res.body.count === 0) break;
      popped.push(...res.body.items.map((i: { n: number }) => i.n));
      if (popped.length === 100) {
        expect((await svc.http.get(`/queue/${q}/state/queue_0_seg_0`)).status).toBe(404);
        const m = await svc.http.get(`/queue/${q}/state/metadata`);
        expect(m.body.queues.queue_0.metadata).toMatchObject({ count: 250, head_segment: 1, tail_segment: 3 });
      }
    }
    expect(popped).toEqual(items.map((_, i) => i));
    const after = await svc.http.get(`/queue/${q}/state/metadata`);
    expect(after.body.queues).toEqual({});
    expect((await svc.http.get(`/queue/${q}/state/queue_0_seg_3`)).status).toBe(404);
  });
});
