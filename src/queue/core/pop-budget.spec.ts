import { describe, expect, it } from 'vitest';
import { budgetCapacity, drawn, msUntilToken, popsAllowed, tokensAt } from './pop-budget.js';

describe('pop budget (a token bucket stored with the queue row)', () => {
  it('holds one second of pops, at least 1; absent it is full', () => {
    expect(budgetCapacity(50)).toBe(50);
    expect(budgetCapacity(0.1)).toBe(1);
    expect(tokensAt(undefined, 50, 123)).toBe(50);
    expect(popsAllowed(undefined, 0.5, 0)).toBe(1);
  });

  it('refills at the rate, up to the capacity; time going backwards refills nothing', () => {
    const empty = { tokens: 0, at: 1000 };
    expect(tokensAt(empty, 10, 1000)).toBe(0);
    expect(tokensAt(empty, 10, 1100)).toBeCloseTo(1);
    expect(tokensAt(empty, 10, 1550)).toBeCloseTo(5.5);
    expect(tokensAt(empty, 10, 60_000)).toBe(10);
    expect(tokensAt(empty, 10, 500)).toBe(0);
    expect(popsAllowed(empty, 10, 1550)).toBe(5);
  });

  it('a pop draws what it took and stamps the time', () => {
    expect(drawn(undefined, 5, 2000, 3)).toEqual({ tokens: 2, at: 2000 });
    expect(drawn({ tokens: 2, at: 2000 }, 5, 2200, 3)).toEqual({ tokens: 0, at: 2200 });
  });

  it('the next whole token: when it comes, 0 when there is one', () => {
    expect(msUntilToken({ tokens: 0, at: 0 }, 10, 0)).toBe(100);
    expect(msUntilToken({ tokens: 0, at: 0 }, 10, 50)).toBe(50);
    expect(msUntilToken({ tokens: 0, at: 0 }, 0.1, 0)).toBe(10_000);
    expect(msUntilToken({ tokens: 1, at: 0 }, 10, 0)).toBe(0);
    // A refill landing a hair under a whole token (floating point) counts as one.
    expect(popsAllowed({ tokens: 0.7, at: 0 }, 3, 100)).toBe(1);
  });

  it('over a long run, pops average the rate: bursts of at most one second, then the rate', () => {
    let budget: { tokens: number; at: number } | undefined;
    let taken = 0;
    for (let now = 0; now <= 10_000; now += 10) {
      const n = Math.min(100, popsAllowed(budget, 20, now));
      if (n > 0) {
        budget = drawn(budget, 20, now, n);
        taken += n;
      }
    }
    // 20 at once, then 20 a second for 10 s.
    expect(taken).toBeGreaterThanOrEqual(219);
    expect(taken).toBeLessThanOrEqual(221);
  });
});
