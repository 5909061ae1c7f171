import { describe, expect, it } from 'vitest';
import { keepLast, levels, perSecond, throughput, type Sample } from '../../apps/admin/src/samples.js';

// The console charts' samples, without a browser: the bounded window, levels and rates, and
// what they read from /metrics.

describe('keepLast', () => {
  it('keeps at most `capacity` samples, the newest, oldest first, without changing its input', () => {
    let window: Sample<number>[] = [];
    for (let i = 0; i < 10; i++) {
      const before = window;
      window = keepLast(window, { at: i * 1000, value: i }, 4);
      expect(before.length).toBe(Math.min(i, 4));
    }
    expect(window.map((s) => s.value)).toEqual([6, 7, 8, 9]);
    expect(keepLast([], { at: 0, value: 1 }, 1)).toEqual([{ at: 0, value: 1 }]);
  });
});

describe('levels and perSecond', () => {
  const samples: Sample<{ n: number; m?: number }>[] = [
    { at: 0, value: { n: 10, m: 1 } },
    { at: 2000, value: { n: 30 } },
    { at: 4000, value: { n: 50, m: 3 } },
    { at: 6000, value: { n: 4, m: 3 } },
  ];

  it('levels: the field where it is known', () => {
    expect(levels(samples, (v) => v.m)).toEqual([
      { at: 0, value: 1 },
      { at: 4000, value: 3 },
      { at: 6000, value: 3 },
    ]);
  });

  it('a counter: its rate per second, no point across a reset', () => {
    expect(perSecond(samples, (v) => v.n)).toEqual([
      { at: 2000, value: 10 },
      { at: 4000, value: 10 },
    ]);
  });

  it('signed: any change per second, negative when the level goes down', () => {
    expect(perSecond(samples, (v) => v.n, true).map((p) => p.value)).toEqual([10, 10, -23]);
    expect(perSecond(samples, (v) => v.m, true)).toEqual([{ at: 6000, value: 0 }]);
  });
});

describe('throughput', () => {
  it('reads items pushed and popped, queued items and live locks from the exposition', () => {
    const text = [
      '# TYPE pushpop_items_pushed_total counter',
      'pushpop_items_pushed_total 120',
      'pushpop_items_popped_total 80',
      'pushpop_queued_items 40',
      'pushpop_live_locks 2',
      'pushpop_operations_total{operation="push",outcome="ok"} 7',
    ].join('\n');
    expect(throughput(text)).toEqual({ pushed: 120, popped: 80, queued: 40, liveLocks: 2 });
    expect(throughput('pushpop_items_pushed_total 1')).toEqual({ pushed: 1, popped: 0, queued: undefined, liveLocks: undefined });
  });
});
