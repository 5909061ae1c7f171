import { describe, expect, it } from 'vitest';
import { DEFAULT_MAX_BUCKETS, TokenBuckets, type TokenBucketOptions } from './token-buckets.js';

/** Buckets on a clock the test moves by hand. */
function buckets(options: Omit<TokenBucketOptions, 'now'>): { store: TokenBuckets; advance: (ms: number) => void } {
  let now = 1_000_000;
  return { store: new TokenBuckets({ ...options, now: () => now }), advance: (ms) => (now += ms) };
}

describe('TokenBuckets', () => {
  it('lets a burst through at once, then refuses until a token has come back', () => {
    const { store, advance } = buckets({ ratePerSecond: 2, burst: 4 });
    expect([1, 2, 3, 4].map(() => store.take('a'))).toEqual([
      { allowed: true, remaining: 3, resetSeconds: 1, retryAfterSeconds: 1 },
      { allowed: true, remaining: 2, resetSeconds: 1, retryAfterSeconds: 1 },
      { allowed: true, remaining: 1, resetSeconds: 2, retryAfterSeconds: 1 },
      { allowed: true, remaining: 0, resetSeconds: 2, retryAfterSeconds: 1 },
    ]);
    expect(store.take('a')).toEqual({ allowed: false, remaining: 0, resetSeconds: 2, retryAfterSeconds: 1 });
    // Half a second later (2 per second): one token, taken at once.
    advance(499);
    expect(store.take('a').allowed).toBe(false);
    advance(1);
    expect(store.take('a')).toMatchObject({ allowed: true, remaining: 0 });
    expect(store.take('a').allowed).toBe(false);
  });

  it('refills continuously, never past the burst', () => {
    const { store, advance } = buckets({ ratePerSecond: 10, burst: 5 });
    for (let i = 0; i < 5; i++) store.take('a');
    advance(350); // 3.5 tokens
    expect(store.take('a')).toMatchObject({ allowed: true, remaining: 2 });
    advance(60_000);
    expect(store.take('a')).toEqual({ allowed: true, remaining: 4, resetSeconds: 1, retryAfterSeconds: 1 });
  });

  it('a refused request takes nothing: a client that keeps knocking is served at the rate', () => {
    const { store, advance } = buckets({ ratePerSecond: 1, burst: 1 });
    let served = 0;
    // 10 requests a second for 10 seconds.
    for (let i = 0; i < 100; i++) {
      if (store.take('a').allowed) served++;
      advance(100);
    }
    expect(served).toBe(10);
  });

  it('Retry-After and Reset in whole seconds for slow rates', () => {
    const { store, advance } = buckets({ ratePerSecond: 0.05, burst: 3 }); // one token per 20 s
    expect(store.take('a')).toMatchObject({ allowed: true, remaining: 2, resetSeconds: 20 });
    store.take('a');
    expect(store.take('a')).toMatchObject({ allowed: true, remaining: 0, resetSeconds: 60 });
    expect(store.take('a')).toEqual({ allowed: false, remaining: 0, resetSeconds: 60, retryAfterSeconds: 20 });
    advance(15_500); // 0.775 of a token: 4.5 s to go, rounded up
    expect(store.take('a')).toEqual({ allowed: false, remaining: 0, resetSeconds: 45, retryAfterSeconds: 5 });
    advance(4_500);
    expect(store.take('a')).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('keeps one bucket per key', () => {
    const { store } = buckets({ ratePerSecond: 1, burst: 1 });
    expect(store.take('key:billing').allowed).toBe(true);
    expect(store.take('key:billing').allowed).toBe(false);
    expect(store.take('key:ops').allowed).toBe(true);
    expect(store.take('ip:127.0.0.1').allowed).toBe(true);
  });

  it('frees the buckets of idle clients: a bucket unused long enough to refill is dropped', () => {
    const { store, advance } = buckets({ ratePerSecond: 10, burst: 20 }); // an empty bucket refills in 2 s
    for (let i = 0; i < 10_000; i++) store.take(`ip:10.0.${i >> 8}.${i & 255}`);
    expect(store.size).toBe(10_000);
    advance(1_999);
    store.take('ip:192.0.2.1');
    expect(store.size).toBe(10_001); // not yet full: kept
    advance(1);
    store.take('ip:192.0.2.2');
    // Every bucket of the first wave was full again, and only 192.0.2.1 (1 ms old) is kept.
    expect(store.size).toBe(2);
    advance(2_000);
    store.take('ip:192.0.2.3');
    expect(store.size).toBe(1);
  });

  it('a dropped bucket comes back full, as if it had been kept', () => {
    const { store, advance } = buckets({ ratePerSecond: 1, burst: 2 });
    store.take('a');
    store.take('a');
    expect(store.take('a').allowed).toBe(false);
    advance(2_000);
    store.take('b'); // drops a, which is full by now
    expect(store.size).toBe(1);
    expect(store.take('a')).toMatchObject({ allowed: true, remaining: 1 });
    expect(store.take('a')).toMatchObject({ allowed: true, remaining: 0 });
    expect(store.take('a').allowed).toBe(false);
  });

  it('a client in use is kept while idle ones around it are dropped', () => {
    const { store, advance } = buckets({ ratePerSecond: 1, burst: 1 });
    store.take('busy');
    for (let i = 0; i < 1_000; i++) store.take(`idle-${i}`);
    for (let s = 0; s < 5; s++) {
      advance(900);
      store.take('busy');
    }
    advance(100);
    store.take('newcomer');
    expect(store.size).toBe(2); // busy and newcomer
  });

  it('never holds more than maxBuckets: past it the least recently used goes', () => {
    const { store, advance } = buckets({ ratePerSecond: 1, burst: 1, maxBuckets: 100 });
    store.take('first');
    for (let i = 0; i < 1_000; i++) {
      store.take(`ip:${i}`);
      advance(1);
      expect(store.size).toBeLessThanOrEqual(100);
    }
    expect(store.size).toBe(100);
    // The oldest went first: "first" starts over with a full bucket; the most recent ones are kept.
    expect(store.take('first').allowed).toBe(true);
    expect(store.take('ip:999').allowed).toBe(false);
  });

  it('caps at DEFAULT_MAX_BUCKETS unless told otherwise', () => {
    const { store } = buckets({ ratePerSecond: 1, burst: 1 });
    for (let i = 0; i < DEFAULT_MAX_BUCKETS + 500; i++) store.take(`k${i}`);
    expect(store.size).toBe(DEFAULT_MAX_BUCKETS);
  });

  it('refuses a rate of 0 or a burst under 1', () => {
    expect(() => new TokenBuckets({ ratePerSecond: 0, burst: 1 })).toThrow(RangeError);
    expect(() => new TokenBuckets({ ratePerSecond: 1, burst: 0 })).toThrow(RangeError);
  });
});
