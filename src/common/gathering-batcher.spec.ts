import { describe, expect, it } from 'vitest';
import { GatheringBatcher } from './gathering-batcher.js';

/** A send whose batches are recorded and answered by hand. */
function manualSend<O>() {
  const sent: { batch: Map<string, O>; answer(resultOf: (key: string) => string): void; fail(error: Error): void }[] = [];
  const send = (batch: ReadonlyMap<string, O>): Promise<(key: string) => string> =>
    new Promise((resolve, reject) => sent.push({ batch: new Map(batch), answer: resolve, fail: reject }));
  return { sent, send };
}

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('GatheringBatcher', () => {
  it('sends a request alone at once when nothing is in flight', async () => {
    const { sent, send } = manualSend<number>();
    const batcher = new GatheringBatcher(send, 10);
    const answer = batcher.request('a', 1);
    await tick();
    expect(sent.map((s) => [...s.batch])).toEqual([[['a', 1]]]);
    sent[0].answer((key) => `${key}!`);
    await expect(answer).resolves.toBe('a!');
    expect(batcher.batches).toBe(1);
  });

  it('gathers the requests asked for while a batch is in flight into the next one, in arrival order', async () => {
    const { sent, send } = manualSend<number>();
    const batcher = new GatheringBatcher(send, 10);
    const first = batcher.request('a', 1);
    await tick();
    const later = ['b', 'c', 'd'].map((key, i) => batcher.request(key, i));
    await tick();
    expect(sent).toHaveLength(1);
    sent[0].answer((key) => key.toUpperCase());
    await expect(first).resolves.toBe('A');
    await tick();
    expect(sent).toHaveLength(2);
    expect([...sent[1].batch.keys()]).toEqual(['b', 'c', 'd']);
    sent[1].answer((key) => key.toUpperCase());
    await expect(Promise.all(later)).resolves.toEqual(['B', 'C', 'D']);
  });

  it('requests for a key already waiting share its entry, their options merged, and its answer', async () => {
    const { sent, send } = manualSend<boolean>();
    const batcher = new GatheringBatcher(send, 10, (a, b) => a || b);
    const blocker = batcher.request('x', false);
    await tick();
    const both = [batcher.request('q', false), batcher.request('q', true), batcher.request('q', false)];
    sent[0].answer(() => 'x');
    await blocker;
    await tick();
    expect([...sent[1].batch]).toEqual([['q', true]]);
    sent[1].answer((key) => `${key}-loaded`);
    await expect(Promise.all(both)).resolves.toEqual(['q-loaded', 'q-loaded', 'q-loaded']);
  });

  it('sends at most maxBatch keys at a time; the rest go in the batches after', async () => {
    const { sent, send } = manualSend<number>();
    const batcher = new GatheringBatcher(send, 3);
    const blocker = batcher.request('first', 0);
    await tick();
    const rest = Array.from({ length: 7 }, (_, i) => batcher.request(`k${i}`, i));
    sent[0].answer(String);
    await blocker;
    for (let round = 1; round <= 3; round++) {
      await tick();
      expect(sent).toHaveLength(round + 1);
      sent[round].answer(String);
    }
    expect(sent.slice(1).map((s) => [...s.batch.keys()])).toEqual([['k0', 'k1', 'k2'], ['k3', 'k4', 'k5'], ['k6']]);
    await expect(Promise.all(rest)).resolves.toEqual(Array.from({ length: 7 }, (_, i) => `k${i}`));
  });

  it('a failed batch rejects every request in it, and the next batch still goes', async () => {
    const { sent, send } = manualSend<number>();
    const batcher = new GatheringBatcher(send, 10);
    const failing = [batcher.request('a', 0)];
    await tick();
    failing.push(batcher.request('b', 0));
    const error = new Error('database away');
    sent[0].fail(error);
    await expect(failing[0]).rejects.toBe(error);
    await tick();
    sent[1].fail(error);
    await expect(failing[1]).rejects.toBe(error);
    const after = batcher.request('c', 0);
    await tick();
    sent[2].answer(() => 'ok');
    await expect(after).resolves.toBe('ok');
  });

  it('a send that throws at once rejects its batch like one that fails later', async () => {
    const error = new Error('bad statement');
    let calls = 0;
    const batcher = new GatheringBatcher<string, number, string>((): Promise<(key: string) => string> => {
      calls += 1;
      if (calls === 1) throw error;
      return Promise.resolve(() => 'fine');
    }, 10);
    await expect(batcher.request('a', 0)).rejects.toBe(error);
    await expect(batcher.request('b', 0)).resolves.toBe('fine');
  });
});
