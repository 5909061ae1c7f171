import { createHash } from 'node:crypto';
import { Cron } from 'croner';

/**
 * A firing pushed more than this long after its time was missed (no process ran, or none could
 * reach the database): it stands for every firing missed up to now, and the schedule goes on
 * from the first firing after now. Later than any sweep of a running service.
 */
export const MADE_UP_AFTER_MS = 5_000;

/** How a cron expression and time zone read, or why they were refused. */
export type CronCheck = { readonly ok: true; readonly rule: ScheduleRule } | { readonly ok: false; readonly problem: string };

/** When one due firing pushes, and where its schedule goes next. */
export interface FiringPlan {
  /** The firing time the push stands for (the schedule's stored `next_run_at`); names the push's dedup id. */
  readonly firingAt: number;
  /** The schedule's next firing after this one, null when the expression fires no more. */
  readonly nextRunAt: number | null;
  /** Whether the firing was missed and is made up late, standing for every firing missed up to now. */
  readonly madeUp: boolean;
}

/**
 * A schedule's cron expression in its time zone, read by `croner`: 5 fields (minute first) or 6
 * (seconds first). Daylight-saving time is as croner defines it: a local time that does not
 * exist (the hour skipped in spring) fires at the first local time after the gap; a local time
 * that occurs twice (the hour repeated in autumn) fires once, at its first occurrence.
 * Pure: time is passed in (ms since the epoch).
 */
export class ScheduleRule {
  private constructor(private readonly cron: Cron) {}

  /** Reads an expression and a time zone; refuses anything but 5 or 6 fields, an unknown zone, and an expression that never fires. */
  static check(expression: string, timezone: string, now: number): CronCheck {
    const fields = expression.trim().split(/\s+/);
    if (fields.length !== 5 && fields.length !== 6) return { ok: false, problem: `cron must have 5 fields, or 6 with seconds first (it has ${fields.length})` };
    try {
      new Intl.DateTimeFormat('en-US', { timeZone: timezone });
    } catch {
      return { ok: false, problem: `timezone ${JSON.stringify(timezone)} is not an IANA time zone` };
    }
    let cron: Cron;
    try {
      cron = new Cron(fields.join(' '), { timezone, paused: true });
    } catch (error) {
      return { ok: false, problem: `cron ${JSON.stringify(expression)} is invalid: ${error instanceof Error ? error.message : String(error)}` };
    }
    const rule = new ScheduleRule(cron);
    if (rule.nextAfter(now) === null) return { ok: false, problem: `cron ${JSON.stringify(expression)} never fires` };
    return { ok: true, rule };
  }

  /** Reads an expression stored by a successful {@link check}. */
  static of(expression: string, timezone: string): ScheduleRule {
    return new ScheduleRule(new Cron(expression.trim().split(/\s+/).join(' '), { timezone, paused: true }));
  }

  /** The first firing strictly after `time`, or null when there is none. */
  nextAfter(time: number): number | null {
    return this.cron.nextRun(new Date(time))?.getTime() ?? null;
  }

  /** The next `n` firings strictly after `time`. */
  nextRuns(n: number, time: number): number[] {
    return this.cron.nextRuns(n, new Date(time)).map((d) => d.getTime());
  }

  /**
   * The firing due at `firingAt` (≤ `now`), pushed at `now`. On time (at most
   * {@link MADE_UP_AFTER_MS} late) the schedule goes on with the firing after it, even if that is
   * due too: a running service pushes every firing. Later than that it was missed, and this one
   * push makes up for every firing missed up to `now`: the schedule goes on after `now`.
   */
  plan(firingAt: number, now: number): FiringPlan {
    const madeUp = now - firingAt > MADE_UP_AFTER_MS;
    return { firingAt, nextRunAt: this.nextAfter(madeUp ? Math.max(now, firingAt) : firingAt), madeUp };
  }
}

/**
 * The dedup id of a schedule's firing: the schedule id and the firing time (ms), so that every
 * process pushing the same firing pushes the same id and the queue enqueues it once. Ids up to
 * 100 characters are kept readable; longer ones are hashed to stay within the 128 characters of
 * a dedup id.
 */
export function firingDedupId(scheduleId: string, firingAt: number): string {
  if (scheduleId.length <= 100) return `schedule:${scheduleId}@${firingAt}`;
  return `schedule-sha256:${createHash('sha256').update(scheduleId).digest('base64url')}@${firingAt}`;
}
