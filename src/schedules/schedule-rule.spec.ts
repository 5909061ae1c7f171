import { describe, expect, it } from 'vitest';
import { DEDUP_ID_PATTERN } from '../queue/dto/push-item.dto.js';
import { firingDedupId, MADE_UP_AFTER_MS, ScheduleRule } from './schedule-rule.js';

const at = (iso: string): number => Date.parse(iso);
const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

function rule(expression: string, timezone = 'UTC', now = at('2026-01-01T00:00:00Z')): ScheduleRule {
  const checked = ScheduleRule.check(expression, timezone, now);
  if (!checked.ok) throw new Error(checked.problem);
  return checked.rule;
}

/**
 * Runs a schedule as the sweep does on a simulated clock: every `sweepMs` from `start` to
 * `end`, pushing each due firing (several per sweep while they are due) and moving on by its
 * plan. `down` is a span in which no process runs. Returns the firing times pushed, with
 * whether each was made up.
 */
function simulate(r: ScheduleRule, start: number, end: number, sweepMs: number, down?: { from: number; to: number }) {
  const pushed: { at: string; madeUp: boolean; pushedAt: number }[] = [];
  let next = r.nextAfter(start);
  for (let now = start; now <= end; now += sweepMs) {
    if (down && now >= down.from && now < down.to) continue;
    while (next !== null && next <= now) {
      const plan = r.plan(next, now);
      pushed.push({ at: iso(plan.firingAt)!, madeUp: plan.madeUp, pushedAt: now });
      next = plan.nextRunAt;
    }
  }
  return pushed;
}

describe('ScheduleRule', () => {
  it('takes 5 fields, or 6 with seconds first; refuses other counts, nicknames, bad fields, unknown zones and expressions that never fire', () => {
    const now = at('2026-01-01T00:00:00Z');
    expect(ScheduleRule.check('*/5 * * * *', 'UTC', now).ok).toBe(true);
    expect(ScheduleRule.check('*/10 * * * * *', 'Europe/Berlin', now).ok).toBe(true);
    expect(ScheduleRule.check('  0  9 * * 1-5 ', 'America/New_York', now).ok).toBe(true);
    for (const [expression, timezone] of [
      ['* * * *', 'UTC'],
      ['0 0 0 * * * 2030', 'UTC'],
      ['@daily', 'UTC'],
      ['61 * * * *', 'UTC'],
      ['* * * * mon-funday', 'UTC'],
      ['', 'UTC'],
      ['* * * * *', 'Mars/Olympus'],
      ['* * * * *', ''],
      ['0 0 30 2 *', 'UTC'],
    ]) {
      const checked = ScheduleRule.check(expression, timezone, now);
      expect(checked.ok, `${expression} in ${timezone}`).toBe(false);
      if (!checked.ok) expect(checked.problem.length).toBeGreaterThan(0);
    }
  });

  it('every second: on a simulated clock swept every 250 ms, each firing is pushed once, within a sweep of its time, none made up', () => {
    const start = at('2026-05-01T12:00:00.100Z');
    const pushed = simulate(rule('* * * * * *'), start, start + 60_000, 250);
    expect(pushed).toHaveLength(60);
    expect(new Set(pushed.map((p) => p.at)).size).toBe(60);
    expect(pushed.every((p) => !p.madeUp && p.pushedAt - Date.parse(p.at) < 250)).toBe(true);
    expect(pushed[0].at).toBe('2026-05-01T12:00:01.000Z');
  });

  it('every minute: a sweep that falls behind (2 s late) still pushes every firing once, in order', () => {
    const start = at('2026-05-01T12:00:30Z');
    const pushed = simulate(rule('* * * * *'), start, start + 10 * 60_000, 2_000);
    expect(pushed.map((p) => p.at)).toEqual(Array.from({ length: 10 }, (_, i) => iso(at('2026-05-01T12:01:00Z') + i * 60_000)));
    expect(pushed.some((p) => p.madeUp)).toBe(false);
  });

  it('a restart after missed firings: one push makes up for all of them, then the schedule goes on from the next firing after the start', () => {
    const start = at('2026-05-01T12:00:00Z');
    // Every minute; no process from 12:02:30 to 12:10:20.
    const pushed = simulate(rule('* * * * *'), start, at('2026-05-01T12:13:00Z'), 500, { from: at('2026-05-01T12:02:30Z'), to: at('2026-05-01T12:10:20Z') });
    expect(pushed.map((p) => [p.at, p.madeUp])).toEqual([
      ['2026-05-01T12:01:00.000Z', false],
      ['2026-05-01T12:02:00.000Z', false],
      ['2026-05-01T12:03:00.000Z', true],
      ['2026-05-01T12:11:00.000Z', false],
      ['2026-05-01T12:12:00.000Z', false],
      ['2026-05-01T12:13:00.000Z', false],
    ]);
    // Every second, down for 30 s: one make-up push, not thirty.
    const s = at('2026-05-01T12:00:00Z');
    const everySecond = simulate(rule('* * * * * *'), s, s + 60_000, 200, { from: s + 10_000, to: s + 40_000 });
    expect(everySecond.filter((p) => p.madeUp)).toHaveLength(1);
    // 12:00:01-09 pushed; 12:00:10 (the first missed) pushed at the start, at 12:00:40; then 12:00:41-12:01:00.
    expect(everySecond).toHaveLength(9 + 1 + 20);
    expect(everySecond.find((p) => p.madeUp)).toEqual({ at: '2026-05-01T12:00:10.000Z', madeUp: true, pushedAt: s + 40_000 });
    expect(everySecond[10].at).toBe('2026-05-01T12:00:41.000Z');
  });

  it(`a firing up to ${MADE_UP_AFTER_MS} ms late is on time; later it is made up and the schedule skips to after now`, () => {
    const r = rule('* * * * * *');
    const t = at('2026-05-01T12:00:00Z');
    expect(r.plan(t, t + MADE_UP_AFTER_MS)).toEqual({ firingAt: t, nextRunAt: t + 1000, madeUp: false });
    expect(r.plan(t, t + MADE_UP_AFTER_MS + 1)).toEqual({ firingAt: t, nextRunAt: t + MADE_UP_AFTER_MS + 1000, madeUp: true });
  });

  it('DST in Europe/Berlin: 02:30 daily fires at 03:00 on the day the hour is skipped, and once on the day it repeats', () => {
    const r = rule('30 2 * * *', 'Europe/Berlin');
    // 29 March 2026: 02:00 CET becomes 03:00 CEST.
    expect(r.nextRuns(3, at('2026-03-28T12:00:00Z')).map(iso)).toEqual(['2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z', '2026-03-31T00:30:00.000Z']);
    // 25 October 2026: 03:00 CEST becomes 02:00 CET; 02:30 happens twice, fired at the first.
    expect(r.nextRuns(3, at('2026-10-24T12:00:00Z')).map(iso)).toEqual(['2026-10-25T00:30:00.000Z', '2026-10-26T01:30:00.000Z', '2026-10-27T01:30:00.000Z']);
    // Hourly: every real hour on both days, none skipped, none doubled.
    const hourly = rule('0 * * * *', 'Europe/Berlin');
    for (const day of ['2026-03-28T23:30:00Z', '2026-10-24T23:30:00Z']) {
      const runs = hourly.nextRuns(4, at(day));
      expect(runs.slice(1).map((t, i) => t - runs[i])).toEqual([3_600_000, 3_600_000, 3_600_000]);
    }
    // On a simulated clock across the autumn change, every 30 minutes: 02:00, 02:30 local once each, in UTC one hour apart from 03:00.
    const half = rule('0,30 * * * *', 'Europe/Berlin');
    const pushed = simulate(half, at('2026-10-24T23:45:00Z'), at('2026-10-25T02:05:00Z'), 1_000).map((p) => p.at);
    expect(new Set(pushed).size).toBe(pushed.length);
    expect(pushed[0]).toBe('2026-10-25T00:00:00.000Z');
    expect(pushed.every((t, i) => i === 0 || Date.parse(t) > Date.parse(pushed[i - 1]))).toBe(true);
  });

  it('dedup ids: the schedule id and the firing time, within the dedup id alphabet and length, distinct per schedule and firing', () => {
    const short = firingDedupId('nightly-report', 1767225600000);
    expect(short).toBe('schedule:nightly-report@1767225600000');
    const long = firingDedupId('x'.repeat(200), 1767225600000);
    expect(long).toMatch(DEDUP_ID_PATTERN);
    expect(short).toMatch(DEDUP_ID_PATTERN);
    expect(firingDedupId('x'.repeat(199) + 'y', 1767225600000)).not.toBe(long);
    expect(firingDedupId('a', 1)).not.toBe(firingDedupId('a', 2));
  });
});
