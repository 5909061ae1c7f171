import { describe, expect, it } from 'vitest';
import type { AppConfig } from '../config/app-config.js';
import { ItemTooLargeError, QueueBusyError } from '../common/errors.js';
import type { QueueService } from '../queue/queue.service.js';
import type { ScheduleRepository, StoredSchedule } from '../storage/schedule.repository.js';
import { ScheduleService } from './schedule.service.js';
import { ScheduleStats } from './schedule-stats.js';

const T = Date.parse('2026-05-01T12:00:00Z');

/** A schedule store in memory with the repository's claim rule (the firing must still be the next one). */
class FakeSchedules {
  rows = new Map<string, StoredSchedule>();
  log: string[] = [];
  async findDue(now: number, limit: number): Promise<StoredSchedule[]> {
    return [...this.rows.values()].filter((s) => !s.paused && s.nextRunAt !== null && s.nextRunAt <= now).slice(0, limit);
  }
  async claim(id: string, firingAt: number, nextRunAt: number | null): Promise<boolean> {
    const s = this.rows.get(id);
    this.log.push(`claim ${firingAt}`);
    if (!s || s.nextRunAt !== firingAt) return false;
    this.rows.set(id, { ...s, nextRunAt, lastRunAt: firingAt });
    return true;
  }
}

function setUp(failWith?: () => Error) {
  const schedules = new FakeSchedules();
  const pushes: { queueId: string; item: unknown; dedupId?: string }[] = [];
  const queues = {
    push: async (queueId: string, item: unknown, _priority: number, options: { dedupId?: string }) => {
      schedules.log.push(`push ${options.dedupId}`);
      if (failWith) throw failWith();
      pushes.push({ queueId, item, dedupId: options.dedupId });
      return { success: true, message: '' };
    },
  };
  let now = T;
  const clock = { now: () => now };
  const stats = new ScheduleStats();
  const service = new ScheduleService(
    { env: { MAX_PRIORITY: 255, MAX_ITEM_BYTES: 1000 } } as AppConfig,
    schedules as unknown as ScheduleRepository,
    queues as unknown as QueueService,
    clock,
    stats,
  );
  const add = (id: string, cron: string, nextRunAt: number) =>
    schedules.rows.set(id, { scheduleId: id, queueId: 'q', cron, timezone: 'UTC', item: '{"n":1}', priority: 0, paused: false, nextRunAt, lastRunAt: null });
  return { schedules, pushes, service, stats, add, at: (ms: number) => void (now = ms) };
}

describe('ScheduleService.fireDue', () => {
  it('pushes a due firing with its dedup id, then claims it and moves on to the next firing', async () => {
    const { schedules, pushes, service, stats, add, at } = setUp();
    add('s', '* * * * *', T);
    at(T + 300);
    expect(await service.fireDue(10)).toBe(1);
    expect(schedules.log).toEqual([`push schedule:s@${T}`, `claim ${T}`]);
    expect(pushes).toEqual([{ queueId: 'q', item: { n: 1 }, dedupId: `schedule:s@${T}` }]);
    expect(schedules.rows.get('s')).toMatchObject({ nextRunAt: T + 60_000, lastRunAt: T });
    expect({ firings: stats.firings, madeUp: stats.firingsMadeUp }).toEqual({ firings: 1, madeUp: 0 });
    expect(await service.fireDue(10), 'nothing more due').toBe(0);
  });

  it('a firing claimed by another process meanwhile is not counted here (its push was a duplicate of the other one)', async () => {
    const { schedules, service, stats, add, at } = setUp();
    add('s', '* * * * *', T);
    at(T + 100);
    const due = await schedules.findDue(T + 100, 10);
    await schedules.claim('s', T, T + 60_000); // the other process
    schedules.findDue = async () => due;
    await service.fireDue(10);
    expect(stats.firings).toBe(0);
  });

  it('a busy queue leaves the firing due (retried by the next sweep); a push refused for good skips the firing', async () => {
    const busy = setUp(() => new QueueBusyError('q'));
    busy.add('s', '* * * * *', T);
    busy.at(T + 100);
    await busy.service.fireDue(10);
    expect(busy.schedules.rows.get('s')?.nextRunAt).toBe(T);
    expect(busy.schedules.log).toEqual([`push schedule:s@${T}`]);

    const refused = setUp(() => new ItemTooLargeError(2000, 1000));
    refused.add('s', '* * * * *', T);
    refused.at(T + 100);
    await refused.service.fireDue(10);
    expect(refused.schedules.rows.get('s')).toMatchObject({ nextRunAt: T + 60_000, lastRunAt: T });
  });

  it('after missed firings: one push for the first missed one, counted as made up, and on to the first firing after now', async () => {
    const { pushes, schedules, service, stats, add, at } = setUp();
    add('s', '* * * * *', T);
    at(T + 30 * 60_000 + 5_000);
    await service.fireDue(10);
    await service.fireDue(10);
    expect(pushes.map((p) => p.dedupId)).toEqual([`schedule:s@${T}`]);
    expect(schedules.rows.get('s')).toMatchObject({ nextRunAt: T + 31 * 60_000, lastRunAt: T });
    expect({ firings: stats.firings, madeUp: stats.firingsMadeUp }).toEqual({ firings: 1, madeUp: 1 });
  });
});
