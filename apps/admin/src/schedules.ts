import { Cron } from 'croner';

/** Firings shown before a schedule is saved. */
export const PREVIEW_FIRINGS = 5;

export type Preview = { times: number[] } | { problem: string };

/**
 * The next firings of a cron expression in a time zone after `now` (ms), computed in the
 * browser with croner, the library the service reads schedules with, under the service's rules:
 * 5 fields, or 6 with seconds first, and an IANA time zone. Pure: no React, no `window`.
 */
export function previewFirings(expression: string, timezone: string, now: number, n = PREVIEW_FIRINGS): Preview {
  const fields = expression.trim().split(/\s+/).filter(Boolean);
  if (fields.length !== 5 && fields.length !== 6)
    return { problem: `A cron expression has 5 fields, or 6 with seconds first (this one has ${fields.length}).` };
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
  } catch {
    return { problem: `“${timezone}” is not an IANA time zone (e.g. UTC, Europe/Berlin).` };
  }
  try {
    const times = new Cron(fields.join(' '), { timezone, paused: true }).nextRuns(n, new Date(now)).map((d) => d.getTime());
    if (times.length === 0) return { problem: 'This expression never fires.' };
    return { times };
  } catch (error) {
    return { problem: error instanceof Error ? error.message : String(error) };
  }
}

/** A firing time as the form shows it: in the schedule's zone, and in the browser's when that differs. */
export function firingLabel(ms: number, timezone: string): string {
  const format = (zone?: string) =>
    new Intl.DateTimeFormat('en-CA', {
      ...(zone ? { timeZone: zone } : {}),
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      weekday: 'short',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
      hour12: false,
      timeZoneName: 'short',
    }).format(new Date(ms));
  const there = format(timezone);
  const here = format();
  return there === here ? there : `${there} (${here})`;
}
