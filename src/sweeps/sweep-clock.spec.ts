import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Clock } from '../common/clock.js';
import type { DatabaseProvider } from '../database/database.provider.js';
import type { DueQuestion, DueWork, SweepProbeRepository } from '../storage/sweep-probe.repository.js';
import { SweepClock, type Sweep } from './sweep-clock.js';

/** A probe whose answers the test sets: the works in `due` are due; each statement is recorded. */
class FakeProbe {
  readonly statements: { at: number; questions: DueQuestion[] }[] = [];
  due = new Set<DueWork>();
  failing = false;

  due_(questions: readonly DueQuestion[]): Promise<boolean[]> {
    this.statements.push({ at: performance.now(), questions: [...questions] });
    if (this.failing) return Promise.reject(new Error('connection refused'));
    return Promise.resolve(questions.map((q) => this.due.has(q.work)));
  }
}

function setUp(): { clock: SweepClock; probe: FakeProbe; open(): Promise<void> } {
  const probe = new FakeProbe();
  let open!: () => void;
  const ready = new Promise<void>((resolve) => (open = resolve));
  const db = { ready } as unknown as DatabaseProvider;
  const repository = { due: (q: readonly DueQuestion[]) => probe.due_(q) } as unknown as SweepProbeRepository;
  const clock = new SweepClock(db, repository, new Clock());
  clock.onApplicationBootstrap();
  return {
    clock,
    probe,
    open: async () => {
      open();
      await vi.advanceTimersByTimeAsync(0);
    },
  };
}

/** A sweep of `work` every `intervalMs`, counting its runs; `left` runs report work left behind. */
function sweep(work: DueWork, intervalMs: number, left = 0): Sweep & { runs: number; left: number } {
  const s = {
    what: work,
    runs: 0,
    left,
    question: (now: number): DueQuestion => ({ work, at: now }),
    intervalMs: () => intervalMs,
    sweep: async (): Promise<boolean> => {
      s.runs += 1;
      return s.left-- > 0;
    },
  };
  return s;
}

describe('SweepClock', () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] }));
  afterEach(() => vi.useRealTimers());

  it('asks nothing before the database is open, then every sweep at once in one statement', async () => {
    const { clock, probe, open } = setUp();
    clock.register(sweep('schedulesDue', 500));
    clock.register(sweep('locksDue', 1000));
    clock.register(sweep('delaysDue', 1000));
    await vi.advanceTimersByTimeAsync(5000);
    expect(probe.statements).toEqual([]);
    await open();
    expect(probe.statements.map((s) => s.questions.map((q) => q.work))).toEqual([['schedulesDue', 'locksDue', 'delaysDue']]);
  });

  it('with nothing due, one statement per shortest interval for all the sweeps, each asked within its interval', async () => {
    const { clock, probe, open } = setUp();
    const intervals: Record<string, number> = { schedulesDue: 500, locksDue: 1000, delaysDue: 1000, dedupIdsExpired: 10_000, locksToForget: 60_000 };
    for (const [work, ms] of Object.entries(intervals)) clock.register(sweep(work as DueWork, ms));
    await open();
    await vi.advanceTimersByTimeAsync(60_000);
    // 60 s at one statement per 500 ms, and the first.
    expect(probe.statements.length).toBe(121);
    for (const [work, ms] of Object.entries(intervals)) {
      const times = probe.statements.filter((s) => s.questions.some((q) => q.work === work)).map((s) => s.at);
      const gaps = times.slice(1).map((t, i) => t - times[i]);
      expect(Math.max(...gaps), work).toBeLessThanOrEqual(ms);
      expect(times.length, work).toBeGreaterThanOrEqual(Math.floor(60_000 / ms));
    }
  });

  it('runs a sweep only when its answer is yes, again at once while it leaves work behind, and asks again an interval after it ends', async () => {
    const { clock, probe, open } = setUp();
    const locks = sweep('locksDue', 1000, 2);
    const delays = sweep('delaysDue', 1000);
    clock.register(locks);
    clock.register(delays);
    probe.due.add('locksDue');
    await open();
    expect(locks.runs).toBe(3);
    expect(delays.runs).toBe(0);
    probe.due.clear();
    await vi.advanceTimersByTimeAsync(1000);
    expect(probe.statements.length).toBe(2);
    expect(locks.runs).toBe(3);
  });

  it('a stopped sweep is asked no more; with every sweep stopped nothing is sent', async () => {
    const { clock, probe, open } = setUp();
    const a = clock.register(sweep('schedulesDue', 500));
    const b = clock.register(sweep('locksDue', 1000));
    await open();
    await a.stop();
    await vi.advanceTimersByTimeAsync(2000);
    expect(a.stopped).toBe(true);
    expect(probe.statements.slice(1).every((s) => s.questions.every((q) => q.work === 'locksDue'))).toBe(true);
    await b.stop();
    const sent = probe.statements.length;
    await vi.advanceTimersByTimeAsync(10_000);
    expect(probe.statements.length).toBe(sent);
  });

  it('a failed statement is retried at the next interval, and the sweeps run once it answers', async () => {
    const { clock, probe, open } = setUp();
    const locks = sweep('locksDue', 1000);
    clock.register(locks);
    probe.failing = true;
    probe.due.add('locksDue');
    await open();
    await vi.advanceTimersByTimeAsync(3000);
    expect(probe.statements.length).toBe(4);
    expect(locks.runs).toBe(0);
    probe.failing = false;
    await vi.advanceTimersByTimeAsync(1000);
    expect(locks.runs).toBe(1);
  });

  it('at shutdown it waits for a sweep in progress and asks nothing more', async () => {
    const { clock, probe, open } = setUp();
    let finish!: () => void;
    let ended = false;
    clock.register({
      what: 'slow',
      question: (now) => ({ work: 'schedulesDue', at: now }),
      intervalMs: () => 500,
      sweep: () => new Promise<boolean>((resolve) => (finish = () => resolve(false))).finally(() => (ended = true)),
    });
    probe.due.add('schedulesDue');
    await open();
    const closing = clock.onModuleDestroy();
    await vi.advanceTimersByTimeAsync(0);
    finish();
    await closing;
    expect(ended).toBe(true);
    const sent = probe.statements.length;
    await vi.advanceTimersByTimeAsync(5000);
    expect(probe.statements.length).toBe(sent);
  });
});
