import { Injectable } from '@nestjs/common';
import { UnitOfWork } from '../database/unit-of-work.js';

/** A schedule as stored; times in ms since the epoch. */
export interface StoredSchedule {
  readonly scheduleId: string;
  readonly queueId: string;
  readonly cron: string;
  readonly timezone: string;
  /** The item's JSON text. */
  readonly item: string;
  readonly priority: number;
  readonly paused: boolean;
  readonly nextRunAt: number | null;
  readonly lastRunAt: number | null;
}

interface ScheduleRow {
  schedule_id: string;
  queue_id: string;
  cron: string;
  timezone: string;
  item: string;
  priority: number;
  paused: boolean;
  next_run_at: Date | null;
  last_run_at: Date | null;
}

const COLUMNS = 'schedule_id, queue_id, cron, timezone, item, priority, paused, next_run_at, last_run_at';

const ms = (d: Date | null): number | null => (d === null ? null : d.getTime());
const toTimestamp = (n: number | null): string | null => (n === null ? null : new Date(n).toISOString());

function fromRow(row: ScheduleRow): StoredSchedule {
  return {
    scheduleId: row.schedule_id,
    queueId: row.queue_id,
    cron: row.cron,
    timezone: row.timezone,
    item: row.item,
    priority: row.priority,
    paused: row.paused,
    nextRunAt: ms(row.next_run_at),
    lastRunAt: ms(row.last_run_at),
  };
}

/** Schedules due by `t` (an SQL timestamp), not paused: the partial index on `next_run_at`. */
const DUE_SCHEDULES = (t: string): string => `FROM schedules WHERE NOT paused AND next_run_at <= ${t}`;

/** The sweep probe's question about schedules (see SweepProbeRepository): one index probe when the answer is no. */
export const SCHEDULE_QUESTIONS = {
  /** Whether any schedule is due at `t`: what {@link ScheduleRepository.findDue} finds. */
  schedulesDue: (t: string): string => `EXISTS (SELECT 1 ${DUE_SCHEDULES(t)})`,
};

/**
 * The SQL of schedules: one row each, written by `PUT`/`DELETE /schedules/{id}` and by the
 * firing claims, read by id, by page, and by the sweep's probe for due ones.
 */
@Injectable()
export class ScheduleRepository {
  constructor(private readonly uow: UnitOfWork) {}

  /** Creates or replaces a schedule; `lastRunAt` of a replaced schedule is kept. Returns it as stored. */
  async put(s: Omit<StoredSchedule, 'lastRunAt'>): Promise<StoredSchedule> {
    const rows = await this.uow.autocommit.query<ScheduleRow>(
      `INSERT INTO schedules (schedule_id, queue_id, cron, timezone, item, priority, paused, next_run_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8::timestamptz, now())
       ON CONFLICT (schedule_id) DO UPDATE SET queue_id = EXCLUDED.queue_id, cron = EXCLUDED.cron, timezone = EXCLUDED.timezone,
         item = EXCLUDED.item, priority = EXCLUDED.priority, paused = EXCLUDED.paused, next_run_at = EXCLUDED.next_run_at, updated_at = now()
       RETURNING ${COLUMNS}`,
      [s.scheduleId, s.queueId, s.cron, s.timezone, s.item, s.priority, s.paused, toTimestamp(s.nextRunAt)],
    );
    return fromRow(rows[0]);
  }

  async get(scheduleId: string): Promise<StoredSchedule | undefined> {
    const rows = await this.uow.autocommit.query<ScheduleRow>(`SELECT ${COLUMNS} FROM schedules WHERE schedule_id = $1`, [scheduleId]);
    return rows[0] && fromRow(rows[0]);
  }

  /** Up to `limit` schedules in id order, after the id `after` (exclusive) when given. */
  async list(limit: number, after?: string): Promise<StoredSchedule[]> {
    const rows = await this.uow.autocommit.query<ScheduleRow>(
      `SELECT ${COLUMNS} FROM schedules WHERE $1::varchar IS NULL OR schedule_id > $1 ORDER BY schedule_id LIMIT $2`,
      [after ?? null, limit],
    );
    return rows.map(fromRow);
  }

  /** Deletes a schedule; whether it existed. */
  async delete(scheduleId: string): Promise<boolean> {
    const rows = await this.uow.autocommit.query(`DELETE FROM schedules WHERE schedule_id = $1 RETURNING 1`, [scheduleId]);
    return rows.length > 0;
  }

  /**
   * The schedules due at `now` (not paused, `next_run_at` passed), earliest first, at most
   * `limit`: one range read of the partial index on `next_run_at`, whatever the number of
   * schedules not due.
   */
  async findDue(now: number, limit: number): Promise<StoredSchedule[]> {
    const rows = await this.uow.autocommit.query<ScheduleRow>(
      `SELECT ${COLUMNS} ${DUE_SCHEDULES('to_timestamp($1 / 1000.0)')} ORDER BY next_run_at LIMIT $2`,
      [now, limit],
      'pushpop_due_schedules',
    );
    return rows.map(fromRow);
  }

  /**
   * Claims the firing at `firingAt`: moves the schedule on to `nextRunAt` and records the firing
   * as its last run, only if the firing is still the schedule's next one. Of any number of
   * processes claiming one firing, exactly one is answered true (the row lock serialises the
   * updates, and the others' condition no longer holds once it commits). Compared at the
   * millisecond, the precision the service reads times in.
   */
  async claim(scheduleId: string, firingAt: number, nextRunAt: number | null): Promise<boolean> {
    const rows = await this.uow.autocommit.query(
      `UPDATE schedules SET next_run_at = $3::timestamptz, last_run_at = $2::timestamptz
        WHERE schedule_id = $1 AND date_trunc('milliseconds', next_run_at) = $2::timestamptz RETURNING 1`,
      [scheduleId, toTimestamp(firingAt), toTimestamp(nextRunAt)],
      'pushpop_claim_schedule_firing',
    );
    return rows.length > 0;
  }

  /** How many schedules exist (the metric). */
  async count(): Promise<number> {
    const rows = await this.uow.autocommit.query<{ n: string }>(`SELECT count(*) AS n FROM schedules`);
    return Number(rows[0]?.n ?? 0);
  }
}
