import { describe, expect, it } from 'vitest';
import type { AppConfig } from '../config/app-config.js';
import type { QueueCore } from '../queue/core/queue-core.js';
import { applyOp } from '../queue/core/queue-ops.js';
import type { NewItem } from '../queue/core/types.js';
import { QueueStats } from '../queue/runtime/queue-stats.js';
import { QueueLineFull, TurnRunner, type TurnOp } from '../queue/runtime/turn-runner.js';
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

/**
 * Firings against a runner that applies each operation to a core recording its pushes (a
 * duplicate: a dedup id pushed before); `lineFull`: the queue's line refuses operations.
 */
function setUp({ lineFull = false, maxItemBytes = 1000, maxPriority = 255 } = {}) {
  const schedules = new FakeSchedules();
  const pushes: { queueId: string; items: readonly NewItem[]; dedupIds?: readonly string[]; weight?: number; windowMs: number }[] = [];
  const accepted = new Set<string>();
  let queueId = '';
  let op: TurnOp | undefined;
  const core = {
    push: (items: readonly NewItem[], _now: number, windowMs: number) => {
      pushes.push({ queueId, items, dedupIds: op?.dedupIds, weight: op?.weight ?? 1, windowMs });
      const fresh = items.filter((i) => i.dedupId === undefined || !accepted.has(i.dedupId));
      for (const i of fresh) if (i.dedupId !== undefined) accepted.add(i.dedupId);
      return { enqueued: fresh.length, duplicates: items.length - fresh.length };
    },
  } as unknown as QueueCore;
  const queueStats = new QueueStats();
  // The runner's own push (its operation, window and counting) over this fake line.
  const runner = {
    dedupWindowMs: 600_000,
    stats: queueStats,
    push(id: string, items: readonly NewItem[]) {
      return TurnRunner.prototype.push.call(this as unknown as TurnRunner, id, items);
    },
    run: async (id: string, operation: TurnOp): Promise<unknown> => {
      schedules.log.push(`push ${operation.dedupIds?.join(',')}`);
      if (lineFull) throw new QueueLineFull(id);
      queueId = id;
      op = operation;
      return applyOp(core, operation, now);
    },
  };
  let now = T;
  const clock = { now: () => now };
  const stats = new ScheduleStats();
  const service = new ScheduleService(
    { env: { MAX_PRIORITY: maxPriority, MAX_ITEM_BYTES: maxItemBytes, DEDUP_WINDOW_SECONDS: 600 } } as AppConfig,
    schedules as unknown as ScheduleRepository,
    runner as unknown as TurnRunner,
    clock,
    stats,
  );
  const add = (id: string, cron: string, nextRunAt: number, priority = 0) =>
    schedules.rows.set(id, { scheduleId: id, queueId: 'q', cron, timezone: 'UTC', item: '{"n":1}', priority, paused: false, nextRunAt, lastRunAt: null });
  return { schedules, pushes, service, stats, queueStats, add, at: (ms: number) => void (now = ms) };
}

describe('ScheduleService.fireDue', () => {
  it('pushes a due firing with its dedup id, as a client’s push in a turn of the queue, then claims it and moves on to the next firing', async () => {
    const { schedules, pushes, service, stats, queueStats, add, at } = setUp();
    add('s', '* * * * *', T);
    at(T + 300);
    expect(await service.fireDue(10)).toBe(1);
    expect(schedules.log).toEqual([`push schedule:s@${T}`, `claim ${T}`]);
    expect(pushes).toEqual([
      {
        queueId: 'q',
        items: [{ priority: 0, json: '{"n":1}', delayMs: 0, dedupId: `schedule:s@${T}` }],
        dedupIds: [`schedule:s@${T}`],
        weight: 1,
        windowMs: 600_000,
      },
    ]);
    expect(schedules.rows.get('s')).toMatchObject({ nextRunAt: T + 60_000, lastRunAt: T });
    expect({ firings: stats.firings, madeUp: stats.firingsMadeUp }).toEqual({ firings: 1, madeUp: 0 });
    expect({ pushed: queueStats.itemsPushed, duplicates: queueStats.duplicatesSkipped }, 'counted as any push').toEqual({ pushed: 1, duplicates: 0 });
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
    const busy = setUp({ lineFull: true });
    busy.add('s', '* * * * *', T);
    busy.at(T + 100);
    await busy.service.fireDue(10);
    expect(busy.schedules.rows.get('s')?.nextRunAt).toBe(T);
    expect(busy.schedules.log).toEqual([`push schedule:s@${T}`]);

    const tooLarge = setUp({ maxItemBytes: 5 });
    tooLarge.add('s', '* * * * *', T);
    tooLarge.at(T + 100);
    await tooLarge.service.fireDue(10);
    expect(tooLarge.pushes).toEqual([]);
    expect(tooLarge.schedules.rows.get('s')).toMatchObject({ nextRunAt: T + 60_000, lastRunAt: T });

    const priorityLowered = setUp({ maxPriority: 3 });
    priorityLowered.add('s', '* * * * *', T, 9);
    priorityLowered.at(T + 100);
    await priorityLowered.service.fireDue(10);
    expect(priorityLowered.pushes).toEqual([]);
    expect(priorityLowered.schedules.rows.get('s')).toMatchObject({ nextRunAt: T + 60_000, lastRunAt: T });
  });

  it('a firing pushed again (its claim was lost) is a duplicate, counted as one', async () => {
    const { service, queueStats, schedules, add, at } = setUp();
    add('s', '* * * * *', T);
    at(T + 100);
    const due = await schedules.findDue(T + 100, 10);
    schedules.claim = async () => false;
    await service.fireDue(10);
    schedules.findDue = async () => due;
    await service.fireDue(10);
    expect({ pushed: queueStats.itemsPushed, duplicates: queueStats.duplicatesSkipped }).toEqual({ pushed: 1, duplicates: 1 });
  });

  it('after missed firings: one push for the first missed one, counted as made up, and on to the first firing after now', async () => {
    const { pushes, schedules, service, stats, add, at } = setUp();
    add('s', '* * * * *', T);
    at(T + 30 * 60_000 + 5_000);
    await service.fireDue(10);
    await service.fireDue(10);
    expect(pushes.flatMap((p) => p.items.map((i) => i.dedupId))).toEqual([`schedule:s@${T}`]);
    expect(schedules.rows.get('s')).toMatchObject({ nextRunAt: T + 31 * 60_000, lastRunAt: T });
    expect({ firings: stats.firings, madeUp: stats.firingsMadeUp }).toEqual({ firings: 1, madeUp: 1 });
  });
});
