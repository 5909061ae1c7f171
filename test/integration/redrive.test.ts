import type TestAgent from 'supertest/lib/agent.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildService, startChildService, type ChildService, type ServiceBuild } from '../support/child-service.js';
import { answer, range } from '../support/queue-helpers.js';
import { databaseKind, makeDataDir, removeDataDir, startService, uniqueQueueId, type TestService } from '../support/service.js';

/**
 * Redrive at scale and across a crash (CONTRACT.md, "Redrive"): every item moves exactly once,
 * never lost and never in both queues, also when the process dies in the middle of a redrive;
 * 100,000 items go in batches, in order, with bounded memory.
 */
type Item = { n: number };

/** Pushes items `{n}` for n in `from..from+count-1`, priority `n % priorities`, in batches of 1000. */
async function pushNumbered(http: TestAgent, q: string, count: number, priorities = 1): Promise<void> {
  for (let start = 0; start < count; start += 1000) {
    const items = range(Math.min(1000, count - start)).map((i) => ({ item: { n: start + i }, priority: (start + i) % priorities }));
    const res = await answer(http.post(`/queue/${q}/push/batch`).send({ items }), 30_000);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  }
}

/** Pops a queue empty with depth 100; the items' numbers in pop order. */
async function popAllNumbers(http: TestAgent, q: string): Promise<number[]> {
  const out: number[] = [];
  for (;;) {
    const res = await answer(http.post(`/queue/${q}/pop?depth=100`), 30_000);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    if (res.body.count === 0) return out;
    out.push(...(res.body.items as Item[]).map((i) => i.n));
  }
}

/** Items waiting on a queue as the listing shows them (no turn of the queue). */
async function listedCount(http: TestAgent, q: string): Promise<number> {
  const res = await answer(http.get(`/queues?prefix=${encodeURIComponent(q)}`));
  const row = (res.body.queues as { queue_id: string; count: number }[] | undefined)?.find((r) => r.queue_id === q);
  return row?.count ?? 0;
}

describe(`redrive: 100,000 items, and a SIGKILL in the middle (${databaseKind})`, () => {
  describe('100,000 items in one redrive', () => {
    let svc: TestService;
    beforeAll(async () => {
      svc = await startService({ env: { SEGMENT_SIZE: '50', BUFFER_SEGMENTS: '1' } });
    }, 60_000);
    afterAll(async () => {
      await svc?.close();
      if (svc) removeDataDir(svc.dataDir);
    });

    it('moves them all, in priority and push order, with memory bounded by the batches', async () => {
      const [source, target] = [uniqueQueueId('rd-100k'), uniqueQueueId('rd-100k-to')];
      const total = 100_000;
      await pushNumbered(svc.http, source, total, 2);
      expect((await answer(svc.http.get(`/queue/${source}`))).body.count).toBe(total);

      // Items held in memory over all actors, sampled while the redrive runs.
      let largest = 0;
      let running = true;
      const sampling = (async () => {
        while (running) {
          const text = (await svc.http.get('/metrics')).text;
          const line = text.split('\n').find((l) => l.startsWith('pushpop_items_in_memory '));
          largest = Math.max(largest, Number(line?.split(' ')[1] ?? 0));
          await new Promise((r) => setTimeout(r, 20));
        }
      })();
      const res = await answer(svc.http.post(`/queue/${source}/redrive`).send({ destination: target, max_items: 100000 }), 300_000);
      running = false;
      await sampling;
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body).toEqual({ success: true, items_moved: total, items_left: 0 });
      // A batch of 1000 and each queue's window of segments, far from the 100,000 items moved.
      expect(largest).toBeLessThan(5_000);

      const numbers = await popAllNumbers(svc.http, target);
      const expected = [...range(total).filter((n) => n % 2 === 0), ...range(total).filter((n) => n % 2 === 1)];
      expect(numbers.length).toBe(total);
      expect(numbers).toEqual(expected);
      expect(await popAllNumbers(svc.http, source)).toEqual([]);
    }, 600_000);
  });

  describe('SIGKILL of the built service in the middle of a redrive', () => {
    const dataDir = makeDataDir();
    let build: ServiceBuild | undefined;
    const children: ChildService[] = [];
    const start = async (): Promise<ChildService> => {
      const child = await startChildService({ build: build!, dataDir, env: { SEGMENT_SIZE: '50', BUFFER_SEGMENTS: '1' } });
      children.push(child);
      return child;
    };

    beforeAll(async () => {
      build = await buildService();
    }, 240_000);
    afterAll(async () => {
      for (const child of children) await child.kill('SIGKILL');
      build?.remove();
      removeDataDir(dataDir);
    });

    it('nothing is lost and nothing doubled: the batches committed are on the destination, the rest still on the queue, each in order', async () => {
      const [source, target] = [uniqueQueueId('rd-kill'), uniqueQueueId('rd-kill-to')];
      const total = 30_000;
      let svc = await start();
      await pushNumbered(svc.http, source, total);

      const redrive = answer(svc.http.post(`/queue/${source}/redrive`).send({ destination: target, max_items: 100000 }), 300_000);
      // Killed once some batches committed and before the last did.
      let waiting = total;
      const deadline = Date.now() + 60_000;
      while (waiting === total && Date.now() < deadline) waiting = await listedCount(svc.http, source);
      expect(waiting, 'the redrive was seen under way, before its end').toBeGreaterThan(0);
      expect(waiting).toBeLessThan(total);
      expect(await svc.kill('SIGKILL')).toEqual({ code: null, signal: 'SIGKILL' });
      const interrupted = await redrive;
      expect(interrupted.status, 'the interrupted request got no answer').not.toBe(200);

      svc = await start();
      const moved = await popAllNumbers(svc.http, target);
      const left = await popAllNumbers(svc.http, source);
      expect(moved.length, 'some batches committed').toBeGreaterThan(0);
      expect(left.length, 'the redrive did not finish').toBeGreaterThan(0);
      expect(moved.length % 1000, 'whole batches').toBe(0);
      expect([...moved, ...left]).toEqual(range(total));
    }, 600_000);
  });
});
