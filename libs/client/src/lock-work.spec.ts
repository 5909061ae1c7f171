import { performance } from 'node:perf_hooks';
import { describe, expect, it, vi } from 'vitest';
import type { ConsumerStats, Handler, Message } from './consumer-types.js';
import { PushpopError } from './errors.js';
import { DEFAULT_QUEUE_POLICY } from './failure-policy.js';
import type { HeldLock, LockSource } from './lock-source.js';
import { LockExtender } from './lock-extender.js';
import { LockWork, type LockWorkContext } from './lock-work.js';

type Item = { n: number };

const lockOf = (...ns: number[]): HeldLock<Item> => ({
  lockId: 'lock-1',
  queueId: 'q',
  deliveries: ns.map((n) => ({ item: { n }, deliveryCount: 1, headers: {} })),
});

/** A LockWork on a fake source that records its calls, and the events and `done` calls it reports. */
function workOn(lock: HeldLock<Item>, handler: Handler<Item>, source: Partial<LockSource<Item>> = {}, maxProcessingSeconds?: number) {
  const calls: string[] = [];
  const events: [string, unknown][] = [];
  const fake: LockSource<Item> = {
    take: () => Promise.resolve({ stopped: true }),
    acknowledge: async () => void calls.push('acknowledge'),
    release: async (_lock, how) => (calls.push(`release ${JSON.stringify(how)}`), { success: true, items_returned: lock.deliveries.length }),
    extend: async () => void calls.push('extend'),
    close: async () => undefined,
    ...source,
  };
  const stats: ConsumerStats = { completed: 0, retrying: 0, failed: 0, deadLettered: 0, lockLost: 0, released: 0 };
  const context: LockWorkContext<Item> = {
    source: fake,
    handler,
    extender: new LockExtender(20),
    maxProcessingSeconds,
    stats,
    rules: async () => ({
      maxAttempts: 5,
      backoff: { type: 'fixed', delaySeconds: 3, maxDelaySeconds: 3 },
      policy: DEFAULT_QUEUE_POLICY,
      deadLetterRelease: true,
    }),
    emit: (event, ...args) => void events.push([event, args[0]]),
    report: (error) => calls.push(`report ${String(error)}`),
  };
  const done = vi.fn();
  return { work: new LockWork(lock, context, done), calls, events, stats, done, extender: context.extender };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('LockWork', () => {
  it('acknowledges a lock whose handlers all succeed, once, and emits completed per item', async () => {
    const { work, calls, events, stats, done } = workOn(lockOf(1, 2), () => undefined);
    await work.run();
    expect(calls.filter((c) => c !== 'extend')).toEqual(['acknowledge']);
    expect(events.map(([e]) => e)).toEqual(['completed', 'completed']);
    expect(stats.completed).toBe(2);
    expect(done).toHaveBeenCalledTimes(1);
  });

  it('gives a lock back as a whole when one handler fails: the failed item retries, the other counts as released', async () => {
    const { work, calls, events, stats } = workOn(lockOf(1, 2), ({ item }) => {
      if (item.n === 2) throw new Error('boom');
    });
    await work.run();
    expect(calls).toEqual(['release {"delaySeconds":3}']);
    expect(events).toEqual([['retrying', expect.objectContaining({ item: { n: 2 }, delaySeconds: 3 })]]);
    expect(stats).toMatchObject({ retrying: 1, released: 1, completed: 0 });
  });

  it('at shutdown: aborts the handler, gives the items back without delay, and settles nothing when the handler ends later', async () => {
    let signal: AbortSignal | undefined;
    let finish = () => {};
    const { work, calls, stats, done } = workOn(lockOf(1), (message) => {
      signal = message.signal;
      return new Promise<void>((resolve) => (finish = resolve));
    });
    const running = work.run();
    await sleep(5);
    await work.giveUp('shutdown');
    await running;
    expect(signal?.reason).toBe('shutdown');
    expect(calls.filter((c) => c !== 'extend')).toEqual(['release {"delaySeconds":0}']);
    expect(stats.released).toBe(1);
    finish();
    await sleep(5);
    expect(calls.filter((c) => c !== 'extend')).toEqual(['release {"delaySeconds":0}']);
    expect(done).toHaveBeenCalledTimes(1);
  });

  it('a lock found expired on extend: lockLost once, the handler aborted, and the lock neither acknowledged nor released', async () => {
    let signal: AbortSignal | undefined;
    const expired = new PushpopError('expired', 409, 'LOCK_EXPIRED');
    const { work, calls, events, stats, done } = workOn(
      lockOf(1),
      (message) => {
        signal = message.signal;
        return new Promise<void>((resolve) => message.signal.addEventListener('abort', () => resolve()));
      },
      { extend: () => Promise.reject(expired) },
    );
    await work.run();
    expect(signal?.reason).toBe('lock-lost');
    expect(events).toEqual([['lockLost', { lockId: 'lock-1', queueId: 'q', items: [{ n: 1 }], error: expired }]]);
    expect(stats.lockLost).toBe(1);
    expect(calls).toEqual([]);
    expect(done).toHaveBeenCalledTimes(1);
  });

  it('past maxProcessingSeconds: a failed attempt, given back by the failure rules with a HandlerTimeoutError', async () => {
    const { work, calls, events } = workOn(lockOf(1), () => new Promise(() => {}), {}, 0.03);
    await work.run();
    expect(calls.filter((c) => c !== 'extend')).toEqual(['release {"delaySeconds":3}']);
    expect(events).toEqual([['retrying', expect.objectContaining({ error: expect.objectContaining({ name: 'HandlerTimeoutError' }) })]]);
  });

  it('of a source that settles ahead: returns while the acknowledgement is under way, and is done when it completes', async () => {
    let acknowledged = () => {};
    const { work, done } = workOn(lockOf(1), () => undefined, {
      settlesAhead: true,
      acknowledge: () => new Promise<void>((resolve) => (acknowledged = resolve)),
    });
    await work.run();
    expect(done).not.toHaveBeenCalled();
    acknowledged();
    await vi.waitFor(() => expect(done).toHaveBeenCalledTimes(1));
  });

  it('a handler that reads its signal only after the give-up gets it aborted, with the reason', async () => {
    let readLate: () => AbortSignal = () => new AbortController().signal;
    let finish = () => {};
    const { work } = workOn(lockOf(1), (message) => {
      readLate = () => message.signal;
      return new Promise<void>((resolve) => (finish = resolve));
    });
    const running = work.run();
    await sleep(5);
    await work.giveUp('timeout');
    await running;
    const signal = readLate();
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBe('timeout');
    expect(readLate(), 'one signal per lock').toBe(signal);
    finish();
  });

  it("extends the lock while a handler's promise runs, every period, and not after; a handler that returned at once holds no timer", async () => {
    const slow = workOn(lockOf(1), () => sleep(100));
    const started = performance.now();
    const running = slow.work.run();
    expect(slow.extender.size).toBe(1);
    await running;
    const elapsed = performance.now() - started;
    expect(slow.extender.size).toBe(0);
    const extensions = slow.calls.filter((c) => c === 'extend').length;
    // Due every 20 ms while the 100 ms handler runs (later ones when timers run late; up to 2 ms early counts as due).
    expect(extensions).toBeGreaterThanOrEqual(2);
    expect(extensions).toBeLessThanOrEqual(Math.floor((elapsed + 3) / 20));
    await sleep(50);
    expect(slow.calls.filter((c) => c === 'extend')).toHaveLength(extensions);

    const quick = workOn(lockOf(1), () => 'done at once');
    const ran = quick.work.run();
    expect(quick.extender.size).toBe(0);
    await ran;
    expect(quick.calls).toEqual(['acknowledge']);
  });

  it('a handler that throws at once fails its item as one that rejects does', async () => {
    for (const handler of [
      () => {
        throw new Error('at once');
      },
      () => Promise.reject(new Error('later')),
    ]) {
      const { work, calls, events } = workOn(lockOf(1), handler);
      await work.run();
      expect(calls).toEqual(['release {"delaySeconds":3}']);
      expect(events).toEqual([['retrying', expect.objectContaining({ error: expect.any(Error), delaySeconds: 3 })]]);
    }
  });

  it("a message's signal is an own enumerable property, as of an object literal: a spread copy carries it", async () => {
    let message: Message<Item> | undefined;
    const { work } = workOn(lockOf(7), (m) => void (message = m));
    await work.run();
    expect(Object.keys(message!)).toEqual(['item', 'deliveryCount', 'headers', 'queueId', 'lockId', 'signal']);
    const copy = { ...message! };
    expect(copy.signal).toBeInstanceOf(AbortSignal);
    expect(copy.signal).toBe(message!.signal);
    expect(copy).toMatchObject({ item: { n: 7 }, deliveryCount: 1, queueId: 'q', lockId: 'lock-1' });
  });
});
