import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { LockExtender } from './lock-extender.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A lock that records when it was extended (ms after the test began). */
function lockAt(t0: number) {
  const at: number[] = [];
  return { at, extend: () => void at.push(performance.now() - t0) };
}

describe('LockExtender', () => {
  it('extends each lock every period from when it was added, as a timer per lock would, until it is deleted', async () => {
    const t0 = performance.now();
    const extender = new LockExtender(40);
    const first = lockAt(t0);
    const second = lockAt(t0);
    extender.add(first);
    await sleep(20);
    extender.add(second);
    await sleep(120);
    extender.delete(first);
    await sleep(60);
    extender.delete(second);
    // first: 40, 80, 120 (deleted at 140); second: 60, 100, 140, 180 (deleted at 200).
    expect(first.at).toHaveLength(3);
    expect(second.at).toHaveLength(4);
    first.at.forEach((t, i) => expect(t).toBeGreaterThanOrEqual(40 * (i + 1) - 2));
    second.at.forEach((t, i) => expect(t).toBeGreaterThanOrEqual(20 + 40 * (i + 1) - 2));
    // Each period is measured from the lock's own last extension, not from the other lock's.
    for (const at of [first.at, second.at]) for (let i = 1; i < at.length; i++) expect(at[i] - at[i - 1]).toBeGreaterThanOrEqual(38);
    expect(extender.size).toBe(0);
  });

  it('holds no timer once the last lock left, so an idle consumer does not keep the process alive', async () => {
    const extender = new LockExtender(30);
    const lock = lockAt(performance.now());
    extender.add(lock);
    extender.delete(lock);
    expect((extender as unknown as { timer?: unknown }).timer).toBeUndefined();
    await sleep(50);
    expect(lock.at).toEqual([]);
  });

  it('a lock added with an earlier start (its handler ran before it returned a promise) is due a period after that start', async () => {
    const t0 = performance.now();
    const extender = new LockExtender(40);
    const lock = lockAt(t0);
    await sleep(20);
    extender.add(lock, t0);
    await sleep(40);
    extender.delete(lock);
    // Due at 40 and 80, deleted at 60.
    expect(lock.at).toHaveLength(1);
    expect(lock.at[0]).toBeLessThan(60);
  });
});
