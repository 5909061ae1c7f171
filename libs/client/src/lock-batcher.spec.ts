import { describe, expect, it } from 'vitest';
import type { Queue } from './client.js';
import { LockBatcher } from './lock-batcher.js';
import type { BatchSettleResult } from './types.js';

/** A queue whose batch requests are answered when the test says so, each lock 200. */
function queueAnswering() {
  const requests: { lockIds: string[]; answer(): void }[] = [];
  const queue = {
    id: 'q',
    client: {
      call: (request: { body: { lock_ids: string[] } }) =>
        new Promise<BatchSettleResult>((resolve) => {
          const lockIds = request.body.lock_ids;
          requests.push({
            lockIds,
            answer: () =>
              resolve({
                success: true,
                items_acknowledged: lockIds.length,
                results: lockIds.map((id) => ({ lock_id: id, status: 200, items_acknowledged: 1 })),
              }),
          });
        }),
    },
  } as unknown as Queue<object>;
  return { queue, requests };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('LockBatcher', () => {
  it('with one request in flight at most: the locks settled meanwhile go out together once it is answered', async () => {
    const { queue, requests } = queueAnswering();
    const batcher = new LockBatcher(queue, '/queue/{queue_id}/acknowledge/batch');
    const settled = ['a', 'b', 'c'].map((id) => batcher.settle(id));
    expect(requests.map((r) => r.lockIds)).toEqual([['a']]);
    requests[0].answer();
    await tick();
    expect(requests.map((r) => r.lockIds)).toEqual([['a'], ['b', 'c']]);
    requests[1].answer();
    expect((await Promise.all(settled)).map((r) => r.lock_id)).toEqual(['a', 'b', 'c']);
    await batcher.idle();
    expect(batcher.busy).toBe(false);
  });

  it('with several: a lock goes out at once while fewer are in flight, then the others wait for the first answer', async () => {
    const { queue, requests } = queueAnswering();
    const batcher = new LockBatcher(queue, '/queue/{queue_id}/acknowledge/batch', {}, {}, 2);
    const settled = ['a', 'b', 'c', 'd'].map((id) => batcher.settle(id));
    expect(requests.map((r) => r.lockIds)).toEqual([['a'], ['b']]);
    // The second is answered first: the waiting locks go out together.
    requests[1].answer();
    await tick();
    expect(requests.map((r) => r.lockIds)).toEqual([['a'], ['b'], ['c', 'd']]);
    let idle = false;
    const idling = batcher.idle().then(() => (idle = true));
    requests[2].answer();
    await tick();
    // One is still in flight: not idle yet.
    expect(idle).toBe(false);
    expect(batcher.busy).toBe(true);
    requests[0].answer();
    await idling;
    expect((await Promise.all(settled)).map((r) => r.lock_id)).toEqual(['a', 'b', 'c', 'd']);
    expect(batcher.busy).toBe(false);
  });

  it('tells each request its own fields and answer, and a failed request too', async () => {
    const seen: [unknown, Record<string, unknown>][] = [];
    let n = 0;
    const failing = {
      id: 'q',
      client: { call: () => Promise.reject(new Error('connection refused')) },
    } as unknown as Queue<object>;
    const batcher = new LockBatcher(
      failing,
      '/queue/{queue_id}/acknowledge/batch',
      {},
      {
        fields: () => ({ next: { depth: ++n } }),
        answered: async (answer, sent) => void seen.push([answer, sent]),
      },
    );
    await expect(batcher.settle('a')).rejects.toThrow('connection refused');
    await batcher.idle();
    expect(seen).toEqual([[undefined, { next: { depth: 1 } }]]);
  });

  it('a hook that throws leaves every lock its result, and its error goes to failed', async () => {
    const { queue, requests } = queueAnswering();
    const failures: unknown[] = [];
    const batcher = new LockBatcher(
      queue,
      '/queue/{queue_id}/acknowledge/batch',
      {},
      {
        answered: async () => {
          throw new Error('a next the hook could not take');
        },
        failed: (error) => void failures.push(error),
      },
    );
    const settled = ['a', 'b'].map((id) => batcher.settle(id));
    requests[0].answer();
    await tick();
    requests[1].answer();
    expect((await Promise.all(settled)).map((r) => r.lock_id)).toEqual(['a', 'b']);
    await batcher.idle();
    expect(batcher.busy).toBe(false);
    expect(failures.map((e) => (e as Error).message)).toEqual(['a next the hook could not take', 'a next the hook could not take']);
  });
});
