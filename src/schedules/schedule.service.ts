import { Injectable, Logger } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { Clock } from '../common/clock.js';
import { PushpopError, ScheduleNotFoundError, ValidationFailedError } from '../common/errors.js';
import { isQueueId } from '../queue/core/queue-id.js';
import { encodeItem } from '../queue/item-codec.js';
import { TurnRunner } from '../queue/runtime/turn-runner.js';
import { ScheduleRepository, type StoredSchedule } from '../storage/schedule.repository.js';
import type { DeleteScheduleResponseDto, PutScheduleDto, ScheduleDto, ScheduleListDto } from './dto/schedule.dto.js';
import { firingDedupId, ScheduleRule } from './schedule-rule.js';
import { ScheduleStats } from './schedule-stats.js';

const seconds = (ms: number | null): number | null => (ms === null ? null : ms / 1000);

function toDto(s: StoredSchedule): ScheduleDto {
  return {
    schedule_id: s.scheduleId,
    queue_id: s.queueId,
    cron: s.cron,
    timezone: s.timezone,
    item: JSON.parse(s.item) as Record<string, unknown>,
    priority: s.priority,
    paused: s.paused,
    next_run_at: seconds(s.nextRunAt),
    last_run_at: seconds(s.lastRunAt),
  };
}

/**
 * A push that can never succeed as it is (a client error: the item or its priority is over a
 * limit lowered since the schedule was put): retrying the firing would only repeat it. A full
 * line of the queue (the runtime's `QueueLineFull`) is no such error: the firing stays due.
 */
const isPermanent = (error: unknown): boolean => error instanceof PushpopError && error.status >= 400 && error.status < 500 && error.status !== 429;

/**
 * Schedules: recurring pushes by cron expression, stored in PostgreSQL. `PUT`/`GET`/`DELETE`
 * and the list, and the firing of due schedules for the sweep ({@link fireDue}), which pushes
 * in a turn of the queue's actor with the same push operation as a client's push
 * (`pushOp`), counted as one.
 */
@Injectable()
export class ScheduleService {
  private readonly logger = new Logger('Schedules');

  constructor(
    private readonly config: AppConfig,
    private readonly schedules: ScheduleRepository,
    private readonly runner: TurnRunner,
    private readonly clock: Clock,
    private readonly stats: ScheduleStats,
  ) {}

  /** A priority within `MAX_PRIORITY`, when the schedule is put and again when it fires (the limit may have been lowered). */
  private checkPriority(priority: number): number {
    if (priority > this.config.env.MAX_PRIORITY) throw new ValidationFailedError(`priority must not be greater than ${this.config.env.MAX_PRIORITY}`);
    return priority;
  }

  /** Creates or replaces a schedule; its next firing is the first after now (none while paused). */
  async put(scheduleId: string, body: PutScheduleDto): Promise<ScheduleDto> {
    if (!isQueueId(body.queue_id)) throw new ValidationFailedError('queue_id must be 1-200 characters of A-Z a-z 0-9 . _ : @ -, and not . or ..');
    const priority = this.checkPriority(body.priority ?? 0);
    const item = encodeItem(body.item, this.config.env.MAX_ITEM_BYTES);
    const timezone = body.timezone ?? 'UTC';
    const now = this.clock.now();
    const checked = ScheduleRule.check(body.cron, timezone, now);
    if (!checked.ok) throw new ValidationFailedError(checked.problem);
    const paused = body.paused ?? false;
    const stored = await this.schedules.put({
      scheduleId,
      queueId: body.queue_id,
      cron: body.cron.trim(),
      timezone,
      item,
      priority,
      paused,
      nextRunAt: paused ? null : checked.rule.nextAfter(now),
    });
    return toDto(stored);
  }

  async get(scheduleId: string): Promise<ScheduleDto> {
    const stored = await this.schedules.get(scheduleId);
    if (!stored) throw new ScheduleNotFoundError(scheduleId);
    return toDto(stored);
  }

  /** A page of schedules in id order; `cursor` is the last id of the previous page. */
  async list(limit: number, cursor?: string): Promise<ScheduleListDto> {
    const rows = await this.schedules.list(limit + 1, cursor);
    const page = rows.slice(0, limit);
    return { schedules: page.map(toDto), next_cursor: rows.length > limit ? page[page.length - 1].scheduleId : null };
  }

  async delete(scheduleId: string): Promise<DeleteScheduleResponseDto> {
    if (!(await this.schedules.delete(scheduleId))) throw new ScheduleNotFoundError(scheduleId);
    return { success: true };
  }

  /**
   * Pushes every firing due now, at most `limit` schedules (until `stopping`); returns how many schedules were due
   * (the sweep comes back at once while there were some: a firing's successor may be due too).
   *
   * Each firing pushes exactly once, however many processes sweep:
   * 1. the push carries a dedup id made of the schedule id and the firing time
   *    ({@link firingDedupId}): every process pushing the same firing pushes the same id, and the
   *    queue enqueues it once per `DEDUP_WINDOW_SECONDS`;
   * 2. then the firing is claimed by a conditional update of the schedule's row
   *    (`… WHERE next_run_at = <this firing>`): one process moves the schedule on.
   * The push is an ordinary push in a turn of the queue's actor, which commits its own
   * transaction (the queue's version check and group commit decide its write), so it cannot
   * share one with the claim. Pushing first and claiming second is the safe order: a process
   * that dies between the two leaves the firing due, and whoever takes it next pushes the same
   * dedup id (skipped as a duplicate) and claims it. The other order would lose the firing.
   * The one gap: a firing left unclaimed for longer than the dedup window (every process down
   * that long right after pushing it) is pushed a second time when made up.
   */
  async fireDue(limit: number, stopping: () => boolean = () => false): Promise<number> {
    const now = this.clock.now();
    const due = await this.schedules.findDue(now, limit);
    for (const schedule of due) {
      // At shutdown the rest stay due: the next process to run fires them.
      if (stopping()) break;
      try {
        await this.fire(schedule, now);
      } catch (error) {
        // Left due: the next sweep tries again (a busy queue, the database away).
        this.logger.warn(`Schedule ${schedule.scheduleId} could not fire: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    return due.length;
  }

  private async fire(schedule: StoredSchedule, now: number): Promise<void> {
    const firingAt = schedule.nextRunAt!;
    const plan = ScheduleRule.of(schedule.cron, schedule.timezone).plan(firingAt, now);
    try {
      // Checked again as a client's push would be: MAX_ITEM_BYTES or MAX_PRIORITY may have been lowered since the schedule was put.
      const item = {
        priority: this.checkPriority(schedule.priority),
        json: encodeItem(JSON.parse(schedule.item), this.config.env.MAX_ITEM_BYTES),
        delayMs: 0,
        dedupId: firingDedupId(schedule.scheduleId, firingAt),
      };
      await this.runner.push(schedule.queueId, [item]);
    } catch (error) {
      // Refused for good (e.g. MAX_ITEM_BYTES lowered below the item): skip this firing rather than retry it for ever.
      if (!isPermanent(error)) throw error;
      this.logger.warn(`Schedule ${schedule.scheduleId} skipped its firing: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (await this.schedules.claim(schedule.scheduleId, firingAt, plan.nextRunAt)) {
      this.stats.firings += 1;
      if (plan.madeUp) this.stats.firingsMadeUp += 1;
    }
  }
}
