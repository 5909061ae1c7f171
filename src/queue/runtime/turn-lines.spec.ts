import { AsyncLocalStorage } from 'node:async_hooks';
import { KeyedMutex } from '@pushpop/keyed-mutex';
import { describe, expect, it, vi } from 'vitest';
import { QueueLineFull, TurnLines, type Pending } from './turn-lines.js';
import type { TurnOp } from './turn-op.js';

/** A turn that waits until released, recording the batches it was given and how many ran at once per queue. */
function harness(maxPending = 100) {
  const turns = new KeyedMutex({ reentrant: false });
  const batches: { queueId: string; ops: string[] }[] = [];
  const running = new Map<string, number>();
  let mostAtOnce = 0;
  const gates: (() => void)[] = [];
  const failures: unknown[] = [];
  let fail: Error | undefined;
  const lines = new TurnLines(
    maxPending,
    turns,
    async (queueId, batch) => {
      running.set(queueId, (running.get(queueId) ?? 0) + 1);
      mostAtOnce = Math.max(mostAtOnce, running.get(queueId)!);
      batches.push({ queueId, ops: batch.map((p) => (p.op as unknown as { name: string }).name) });
      await new Promise<void>((resolve) => gates.push(resolve));
      running.set(queueId, running.get(queueId)! - 1);
      if (fail !== undefined) {
        const error = fail;
        fail = undefined;
        throw error;
      }
      batch.forEach((p) => p.resolve((p.op as unknown as { name: string }).name));
    },
    (_queueId, error) => failures.push(error),
  );
  const outcomes = new Map<string, unknown>();
  const add = (queueId: string, name: string, op: Partial<TurnOp> = {}): Promise<unknown> =>
    new Promise((resolve, reject) => {
      const pending: Pending = { op: { kind: 'none', ...op, name } as unknown as TurnOp, resolve, reject };
      lines.add(queueId, pending);
    }).then(
      (v) => outcomes.set(name, v),
      (e: unknown) => outcomes.set(name, e),
    );
  /** Lets the oldest waiting turn finish, then lets the drain take its next batch. */
  const release = async (): Promise<void> => {
    gates.shift()!();
    await new Promise((resolve) => setImmediate(resolve));
  };
  return {
    lines,
    turns,
    batches,
    add,
    release,
    outcomes,
    failures,
    failNext: (e: Error) => (fail = e),
    mostAtOnce: () => mostAtOnce,
  };
}

describe('TurnLines: one line per queue, one drain at a time', () => {
  it('runs the first operation at once, and those arriving during a turn together in the next one (group commit)', async () => {
    const h = harness();
    void h.add('q', 'a');
    expect(h.batches).toEqual([{ queueId: 'q', ops: ['a'] }]);
    void h.add('q', 'b');
    void h.add('q', 'c');
    expect(h.lines.waiting).toBe(2);
    await h.release();
    expect(h.batches.at(-1)).toEqual({ queueId: 'q', ops: ['b', 'c'] });
    expect(h.lines.waiting).toBe(0);
    await h.release();
    await vi.waitFor(() => expect([...h.outcomes.keys()].sort()).toEqual(['a', 'b', 'c']));
    expect(h.outcomes.get('b')).toBe('b');
    expect(h.mostAtOnce(), 'never two turns of a queue at once').toBe(1);
  });

  it('takes one pass of the queue’s mutex for a whole drain, holding it while the drain lasts', async () => {
    const h = harness();
    const passes = vi.spyOn(h.turns, 'run');
    void h.add('q', 'a');
    void h.add('q', 'b');
    void h.add('q', 'c');
    expect(h.turns.isHeld('q')).toBe(true);
    await h.release();
    void h.add('q', 'd');
    await h.release();
    await h.release();
    await vi.waitFor(() => expect(h.outcomes.size).toBe(4));
    expect(passes).toHaveBeenCalledTimes(1);
    await vi.waitFor(() => expect(h.turns.isHeld('q')).toBe(false));
    // A later operation starts a new drain: its own pass.
    void h.add('q', 'e');
    expect(passes).toHaveBeenCalledTimes(2);
    await h.release();
    await vi.waitFor(() => expect(h.outcomes.get('e')).toBe('e'));
  });

  it('runs different queues side by side', async () => {
    const h = harness();
    void h.add('q1', 'a');
    void h.add('q2', 'b');
    expect(h.batches.map((b) => b.queueId)).toEqual(['q1', 'q2']);
    await h.release();
    await h.release();
    await vi.waitFor(() => expect(h.outcomes.size).toBe(2));
  });

  it('bounds a turn by weight and ends it after an operation that ends turns', async () => {
    const h = harness();
    void h.add('q', 'first');
    void h.add('q', 'heavy', { weight: 600 });
    void h.add('q', 'heavier', { weight: 500 });
    void h.add('q', 'ends', { endsTurn: true });
    void h.add('q', 'after');
    await h.release();
    expect(h.batches.at(-1)!.ops).toEqual(['heavy']);
    await h.release();
    expect(h.batches.at(-1)!.ops).toEqual(['heavier', 'ends']);
    await h.release();
    expect(h.batches.at(-1)!.ops).toEqual(['after']);
    await h.release();
    await vi.waitFor(() => expect(h.outcomes.size).toBe(5));
  });

  it('refuses an operation when the line is full, counting only those waiting (not the turn under way)', async () => {
    const h = harness(2);
    void h.add('q', 'running');
    void h.add('q', 'a');
    expect(h.lines.isFull('q')).toBe(false);
    void h.add('q', 'b');
    expect(h.lines.isFull('q')).toBe(true);
    await h.add('q', 'refused');
    expect(h.outcomes.get('refused')).toBeInstanceOf(QueueLineFull);
    expect(h.lines.isFull('other')).toBe(false);
    await h.release();
    expect(h.lines.isFull('q')).toBe(false);
    await h.release();
    await vi.waitFor(() => expect(h.outcomes.size).toBe(4));
  });

  it('a turn that throws fails its own operations only; the drain goes on with the rest', async () => {
    const h = harness();
    void h.add('q', 'a');
    void h.add('q', 'b');
    const broken = new Error('broken turn');
    h.failNext(broken);
    await h.release();
    await vi.waitFor(() => expect(h.outcomes.get('a')).toBe(broken));
    expect(h.failures).toEqual([broken]);
    expect(h.batches.at(-1)!.ops).toEqual(['b']);
    await h.release();
    await vi.waitFor(() => expect(h.outcomes.get('b')).toBe('b'));
    expect(h.lines.waiting).toBe(0);
  });

  it("a turn led by an operation that joined a drain under way runs in that operation's async context, as one it started would", async () => {
    const caller = new AsyncLocalStorage<string>();
    const seen: (string | undefined)[] = [];
    const gates: (() => void)[] = [];
    const lines = new TurnLines(
      10,
      new KeyedMutex({ reentrant: false }),
      async (_queueId, batch) => {
        seen.push(caller.getStore());
        await new Promise<void>((resolve) => gates.push(resolve));
        batch.forEach((p) => p.resolve(undefined));
      },
      () => undefined,
    );
    const add = (): Promise<unknown> => new Promise((resolve, reject) => lines.add('q', { op: { kind: 'none' }, resolve, reject }));
    const first = caller.run('first', add);
    await vi.waitFor(() => expect(gates).toHaveLength(1));
    const second = caller.run('second', add);
    gates.shift()!();
    await first;
    await vi.waitFor(() => expect(gates).toHaveLength(1));
    gates.shift()!();
    await second;
    expect(seen).toEqual(['first', 'second']);
  });
});
