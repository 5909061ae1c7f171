import { describe, expect, it } from 'vitest';

import { KeyedMutex, KeyedMutexBusyError } from './index.js';

interface Deferred<T = void> {
  promise: Promise<T>;
  resolve: (value: T) => void;
}

function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** Rejects if `p` has not settled within `ms`: turns deadlocks into failures. */
async function withTimeout<T>(p: Promise<T>, ms = 1000, what = 'deadlock'): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Lets all pending microtasks and one macrotask turn run. */
const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('KeyedMutex', () => {
  it('1. never runs two fns for the same key at the same time', async () => {
    const mutex = new KeyedMutex();
    let inside = 0;
    let maxInside = 0;
    let completed = 0;

    await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        mutex.run('q', async () => {
          inside++;
          maxInside = Math.max(maxInside, inside);
          await Promise.resolve();
          if (i % 3 === 0) await tick();
          await Promise.resolve();
          inside--;
          completed++;
        }),
      ),
    );

    expect(completed).toBe(50);
    expect(maxInside).toBe(1);
    expect(mutex.size).toBe(0);
  });

  it('2. runs waiters in FIFO (call) order', async () => {
    const mutex = new KeyedMutex();
    const order: number[] = [];
    const gate = deferred();

    const holder = mutex.run('q', () => gate.promise);
    const callers = Array.from({ length: 100 }, (_, i) =>
      mutex.run('q', async () => {
        // Vary durations so a non-FIFO handover would show up.
        if (i % 7 === 0) await tick();
        order.push(i);
      }),
    );
    expect(mutex.waiting('q')).toBe(100);

    gate.resolve();
    await Promise.all([holder, ...callers]);

    expect(order).toEqual(Array.from({ length: 100 }, (_, i) => i));
    expect(mutex.size).toBe(0);
  });

  it('3. runs different keys in parallel', async () => {
    const mutex = new KeyedMutex();
    const bReached = deferred();

    // A can only finish once B has run: deadlocks if keys were serialised.
    const a = mutex.run('A', async () => {
      await bReached.promise;
      return 'a';
    });
    const b = mutex.run('B', () => {
      bReached.resolve();
      return 'b';
    });

    await expect(withTimeout(Promise.all([a, b]))).resolves.toEqual(['a', 'b']);
    expect(mutex.size).toBe(0);
  });

  it('4. releases the turn when fn rejects; error reaches the caller', async () => {
    const mutex = new KeyedMutex();
    const boom = new Error('boom');
    const gate = deferred();

    const failing = mutex.run('q', async () => {
      await gate.promise;
      throw boom;
    });
    const next = mutex.run('q', () => 'next ran');
    expect(mutex.waiting('q')).toBe(1);

    gate.resolve();
    await expect(failing).rejects.toBe(boom);
    await expect(withTimeout(next)).resolves.toBe('next ran');
    expect(mutex.size).toBe(0);
    expect(mutex.isHeld('q')).toBe(false);
  });

  it('5. deletes entries of idle keys (10,000 distinct keys)', async () => {
    const mutex = new KeyedMutex();
    const n = 10_000;

    const gate = deferred();
    const concurrent = Array.from({ length: n }, (_, i) => mutex.run(`c${i}`, () => gate.promise));
    expect(mutex.size).toBe(n);
    gate.resolve();
    await Promise.all(concurrent);
    expect(mutex.size).toBe(0);

    for (let i = 0; i < n; i++) {
      await mutex.run(`s${i}`, async () => {
        await Promise.resolve();
      });
    }
    expect(mutex.size).toBe(0);
    expect(mutex.isHeld('c0')).toBe(false);
    expect(mutex.waiting('s0')).toBe(0);
  });

  it('6. rejects immediately beyond maxWaitersPerKey and recovers after draining', async () => {
    const mutex = new KeyedMutex({ maxWaitersPerKey: 2 });
    const gate = deferred();
    const ran: string[] = [];

    const holder = mutex.run('q', async () => {
      await gate.promise;
      ran.push('holder');
    });
    const w1 = mutex.run('q', () => void ran.push('w1'));
    const w2 = mutex.run('q', () => void ran.push('w2'));
    expect(mutex.waiting('q')).toBe(2);

    let fourthRan = false;
    const fourth = mutex.run('q', () => {
      fourthRan = true;
    });
    // Rejected immediately: while the holder is still blocked on the gate.
    const err = await withTimeout(
      fourth.then(
        () => undefined,
        (e: unknown) => e,
      ),
    );
    expect(err).toBeInstanceOf(KeyedMutexBusyError);
    expect(err).toBeInstanceOf(Error);
    expect((err as KeyedMutexBusyError).key).toBe('q');
    expect((err as KeyedMutexBusyError).maxWaiters).toBe(2);
    expect((err as KeyedMutexBusyError).name).toBe('KeyedMutexBusyError');
    expect(mutex.waiting('q')).toBe(2);
    expect(mutex.isHeld('q')).toBe(true);

    // The bound is per key: another key is unaffected.
    await expect(mutex.run('other', () => 'ok')).resolves.toBe('ok');

    gate.resolve();
    await Promise.all([holder, w1, w2]);
    expect(ran).toEqual(['holder', 'w1', 'w2']);
    expect(fourthRan).toBe(false);
    expect(mutex.size).toBe(0);

    // After draining, new calls are accepted again (up to the bound).
    const gate2 = deferred();
    const again = [mutex.run('q', () => gate2.promise), mutex.run('q', () => 1), mutex.run('q', () => 2)];
    expect(mutex.waiting('q')).toBe(2);
    gate2.resolve();
    await expect(Promise.all(again)).resolves.toEqual([undefined, 1, 2]);
    expect(mutex.size).toBe(0);
  });

  it('6b. maxWaitersPerKey 0 allows only the holder; invalid bounds are refused', async () => {
    const mutex = new KeyedMutex({ maxWaitersPerKey: 0 });
    const gate = deferred();
    const holder = mutex.run('q', () => gate.promise);
    await expect(withTimeout(mutex.run('q', () => 1))).rejects.toBeInstanceOf(KeyedMutexBusyError);
    gate.resolve();
    await holder;
    await expect(mutex.run('q', () => 2)).resolves.toBe(2);

    expect(() => new KeyedMutex({ maxWaitersPerKey: -1 })).toThrow(RangeError);
    expect(() => new KeyedMutex({ maxWaitersPerKey: 1.5 })).toThrow(RangeError);
    expect(() => new KeyedMutex({ maxWaitersPerKey: Number.NaN })).toThrow(RangeError);
  });

  describe('7. re-entrancy', () => {
    it('a nested run on the same key runs inside the turn (directly and after await)', async () => {
      // Bound 0 also proves re-entrant calls are not counted as waiters.
      const mutex = new KeyedMutex({ maxWaitersPerKey: 0 });
      const steps: string[] = [];

      const result = mutex.run('q', async () => {
        steps.push('outer');
        const direct = await mutex.run('q', () => {
          steps.push('direct');
          return 1;
        });
        await tick();
        const afterAwait = await mutex.run('q', async () => {
          await Promise.resolve();
          steps.push('afterAwait');
          // Deeper nesting also re-enters.
          return mutex.run('q', () => 2);
        });
        expect(mutex.waiting('q')).toBe(0);
        return direct + afterAwait;
      });

      await expect(withTimeout(result)).resolves.toBe(3);
      expect(steps).toEqual(['outer', 'direct', 'afterAwait']);
      expect(mutex.size).toBe(0);
    });

    it('a nested run on a different key queues normally', async () => {
      const mutex = new KeyedMutex();
      const bGate = deferred();
      const bHolder = mutex.run('B', () => bGate.promise);
      const steps: string[] = [];

      const a = mutex.run('A', async () => {
        const inner = mutex.run('B', () => void steps.push('B from A'));
        await tick();
        steps.push('A waited');
        expect(mutex.waiting('B')).toBe(1);
        bGate.resolve();
        await inner;
      });

      await withTimeout(Promise.all([a, bHolder]));
      expect(steps).toEqual(['A waited', 'B from A']);
      expect(mutex.size).toBe(0);
    });

    it('a run from a timer that fires after the turn ended is not re-entrant', async () => {
      const mutex = new KeyedMutex();
      const events: string[] = [];
      const timerFired = deferred();
      let late: Promise<void> | undefined;

      await mutex.run('q', () => {
        setTimeout(() => {
          // Same async context as the (now finished) turn.
          late = mutex.run('q', () => {
            events.push('late');
          });
          timerFired.resolve();
        }, 5);
      });
      expect(mutex.isHeld('q')).toBe(false);

      // A later holder takes the key and keeps it until we release it.
      const release = deferred();
      const holder = mutex.run('q', async () => {
        events.push('holder start');
        await release.promise;
        events.push('holder end');
      });

      await timerFired.promise;
      await tick();
      // If re-entrancy leaked, 'late' would already have run inside the holder's turn.
      expect(events).toEqual(['holder start']);
      expect(mutex.waiting('q')).toBe(1);

      release.resolve();
      await withTimeout(Promise.all([holder, late]));
      expect(events).toEqual(['holder start', 'holder end', 'late']);
      expect(mutex.size).toBe(0);
    });

    it('an un-awaited re-entrant call keeps the turn until it settles', async () => {
      const mutex = new KeyedMutex();
      const events: string[] = [];
      const nestedGate = deferred();
      let nested: Promise<void> | undefined;

      const outer = mutex.run('q', () => {
        nested = mutex.run('q', async () => {
          await nestedGate.promise;
          events.push('nested end');
        });
      });
      const next = mutex.run('q', () => void events.push('next'));

      await outer;
      await tick();
      expect(events).toEqual([]);
      expect(mutex.isHeld('q')).toBe(true);

      nestedGate.resolve();
      await withTimeout(Promise.all([nested, next]));
      expect(events).toEqual(['nested end', 'next']);
      expect(mutex.size).toBe(0);
    });
  });

  describe('7b. re-entrancy off ({ reentrant: false })', () => {
    it('exclusive and FIFO as ever; a nested run on the same key waits for the turn like any caller', async () => {
      const mutex = new KeyedMutex({ reentrant: false });
      const order: number[] = [];
      let inside = 0;
      let maxInside = 0;
      await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          mutex.run('q', async () => {
            inside++;
            maxInside = Math.max(maxInside, inside);
            await tick();
            order.push(i);
            inside--;
          }),
        ),
      );
      expect(maxInside).toBe(1);
      expect(order).toEqual(Array.from({ length: 30 }, (_, i) => i));

      const steps: string[] = [];
      let nested: Promise<void> | undefined;
      await mutex.run('q', async () => {
        nested = mutex.run('q', () => void steps.push('nested'));
        await tick();
        expect(mutex.waiting('q'), 'the nested call waits').toBe(1);
        steps.push('outer done');
      });
      await withTimeout(nested!);
      expect(steps).toEqual(['outer done', 'nested']);
      expect(mutex.size).toBe(0);
    });
  });

  it('8. supports synchronous fns, including synchronous throws', async () => {
    const mutex = new KeyedMutex();

    await expect(mutex.run('q', () => 42)).resolves.toBe(42);
    expect(mutex.size).toBe(0);

    const boom = new Error('sync boom');
    const gate = deferred();
    const holder = mutex.run('q', () => gate.promise);
    const throwing = mutex.run('q', () => {
      throw boom;
    });
    const after = mutex.run('q', () => 'after');
    gate.resolve();

    await expect(throwing).rejects.toBe(boom);
    await expect(withTimeout(after)).resolves.toBe('after');
    await holder;

    // A synchronous throw on a free key is a rejection, not a synchronous throw.
    let p: Promise<never> | undefined;
    expect(() => {
      p = mutex.run('r', () => {
        throw boom;
      });
    }).not.toThrow();
    await expect(p).rejects.toBe(boom);
    expect(mutex.size).toBe(0);
  });
});

describe('totalWaiting', () => {
  it('counts waiters over all keys and returns to 0', async () => {
    const mutex = new KeyedMutex();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const held = [mutex.run('a', () => gate), mutex.run('b', () => gate)];
    const waiters = [mutex.run('a', () => 1), mutex.run('a', () => 2), mutex.run('b', () => 3)];
    expect(mutex.totalWaiting).toBe(3);
    release();
    await Promise.all([...held, ...waiters]);
    expect(mutex.totalWaiting).toBe(0);
  });
});
