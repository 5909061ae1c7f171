/**
 * A queue's settings in the console (`GET /queue/{id}` `config`, `PUT /queue/{id}/settings`)
 * and what its shared locks and releases read as: pure functions, no React and no `window`,
 * unit-tested in test/browser/console-logic.test.ts.
 */
import type { QueueSettings, QueueSettingsRequest, ReleaseResponse, SharedLocksInfo } from '@pushpop/api-client';
import { count, oneDecimal, plural } from './format';

export type LockMode = QueueSettings['lock_mode'];
export type RetryBackoff = QueueSettings['retry_backoff'];

/** The settings form as typed: text fields, as the inputs hold them. */
export interface SettingsForm {
  segment_size: string;
  buffer_segments: string;
  lock_mode: LockMode;
  max_deliveries: string;
  dead_letter_queue: string;
  retry_delay_seconds: string;
  retry_backoff: RetryBackoff;
  retry_delay_max_seconds: string;
  max_in_flight: string;
  max_pops_per_second: string;
}

export type SettingsField = keyof SettingsForm;

/**
 * The form filled with the queue's settings; `null` (a queue that does not exist yet) leaves
 * the segment layout blank: the service's defaults, kept unless a number is typed.
 */
export function settingsForm(current: QueueSettings | null): SettingsForm {
  return {
    segment_size: current ? String(current.segment_size) : '',
    buffer_segments: current ? String(current.buffer_segments) : '',
    lock_mode: current?.lock_mode ?? 'exclusive',
    max_deliveries: current?.max_deliveries == null ? '' : String(current.max_deliveries),
    dead_letter_queue: current?.dead_letter_queue ?? '',
    retry_delay_seconds: String(current?.retry_delay_seconds ?? 0),
    retry_backoff: current?.retry_backoff ?? 'exponential',
    retry_delay_max_seconds: String(current?.retry_delay_max_seconds ?? 900),
    max_in_flight: current?.max_in_flight == null ? '' : String(current.max_in_flight),
    max_pops_per_second: current?.max_pops_per_second == null ? '' : String(current.max_pops_per_second),
  };
}

const RANGES = {
  segment_size: [1, 10_000],
  buffer_segments: [1, 1000],
  max_deliveries: [1, 1000],
  retry_delay_seconds: [0, 900],
  retry_delay_max_seconds: [1, 900],
  max_in_flight: [1, 100_000],
} as const;

function wholeNumber(text: string, [min, max]: readonly [number, number]): number | undefined {
  if (!/^\d+$/.test(text)) return undefined;
  const n = Number(text);
  return n >= min && n <= max ? n : undefined;
}

export type SettingsCheck = { patch: QueueSettingsRequest } | { field: SettingsField; problem: string };

/**
 * The `PUT /queue/{id}/settings` body for what the form changed against `current` (the fields
 * left as they are stay out of it, so an unchanged segment layout never meets the "queue not
 * empty" rule). Ranges are checked here, before anything is sent, as the push form does; the
 * rules that need the queue (a layout change while it holds items, `max_deliveries` without a
 * dead-letter queue, the queue as its own dead-letter queue) are the service's to answer.
 * Blank `max_deliveries` and `dead_letter_queue` mean none (null); a blank segment layout of a
 * queue that does not exist yet means the service's default.
 */
export function settingsPatch(form: SettingsForm, current: QueueSettings | null): SettingsCheck {
  const patch: QueueSettingsRequest = {};
  for (const field of ['segment_size', 'buffer_segments'] as const) {
    const text = form[field].trim();
    if (text === '' && current === null) continue;
    const n = wholeNumber(text, RANGES[field]);
    if (n === undefined) return { field, problem: `${field} must be a whole number from ${RANGES[field][0]} to ${count(RANGES[field][1])}.` };
    if (n !== current?.[field]) patch[field] = n;
  }
  if (form.lock_mode !== (current?.lock_mode ?? 'exclusive')) patch.lock_mode = form.lock_mode;
  const deliveriesText = form.max_deliveries.trim();
  const deliveries = deliveriesText === '' ? null : wholeNumber(deliveriesText, RANGES.max_deliveries);
  if (deliveries === undefined) return { field: 'max_deliveries', problem: 'max_deliveries must be a whole number from 1 to 1000, or blank for no limit.' };
  if (deliveries !== (current?.max_deliveries ?? null)) patch.max_deliveries = deliveries;
  const deadLetter = form.dead_letter_queue.trim() || null;
  if (deadLetter !== (current?.dead_letter_queue ?? null)) patch.dead_letter_queue = deadLetter;
  for (const field of ['retry_delay_seconds', 'retry_delay_max_seconds'] as const) {
    const n = wholeNumber(form[field].trim(), RANGES[field]);
    if (n === undefined) return { field, problem: `${field} must be a whole number from ${RANGES[field][0]} to ${RANGES[field][1]}.` };
    if (n !== (current?.[field] ?? (field === 'retry_delay_seconds' ? 0 : 900))) patch[field] = n;
  }
  if (Number(form.retry_delay_seconds) > Number(form.retry_delay_max_seconds)) {
    return { field: 'retry_delay_seconds', problem: 'retry_delay_seconds must not be greater than retry_delay_max_seconds.' };
  }
  if (form.retry_backoff !== (current?.retry_backoff ?? 'exponential')) patch.retry_backoff = form.retry_backoff;
  const inFlightText = form.max_in_flight.trim();
  const inFlight = inFlightText === '' ? null : wholeNumber(inFlightText, RANGES.max_in_flight);
  if (inFlight === undefined) return { field: 'max_in_flight', problem: 'max_in_flight must be a whole number from 1 to 100,000, or blank for no limit.' };
  if (inFlight !== (current?.max_in_flight ?? null)) patch.max_in_flight = inFlight;
  const rateText = form.max_pops_per_second.trim();
  const rate = rateText === '' ? null : /^\d+(\.\d+)?$/.test(rateText) ? Number(rateText) : NaN;
  if (rate !== null && !(rate >= 0.1 && rate <= 100_000)) {
    return { field: 'max_pops_per_second', problem: 'max_pops_per_second must be a number from 0.1 to 100,000, or blank for no limit.' };
  }
  if (rate !== (current?.max_pops_per_second ?? null)) patch.max_pops_per_second = rate;
  return { patch };
}

const FIELDS = [
  'segment_size',
  'buffer_segments',
  'lock_mode',
  'max_deliveries',
  'dead_letter_queue',
  'paused',
  'retry_delay_seconds',
  'retry_backoff',
  'retry_delay_max_seconds',
  'max_in_flight',
  'max_pops_per_second',
] as const;

/** "segment_size 100, buffer_segments 1, lock_mode shared, max_deliveries 5, dead_letter_queue orders.dead, paused false, …": all of them, for the result panel. */
export function describeSettings(settings: QueueSettings): string {
  return FIELDS.map((field) => `${field} ${settings[field] === null ? 'none' : String(settings[field])}`).join(', ');
}

/** Seconds left as the lock card shows them: "12.3 s", "4:05.0", "expired". */
export function remaining(seconds: number): string {
  if (seconds <= 0) return 'expired';
  if (seconds < 60) return `${oneDecimal(seconds)} s`;
  const m = Math.floor(seconds / 60);
  const s = seconds - m * 60;
  return `${m}:${s < 10 ? '0' : ''}${oneDecimal(s)}`;
}

/**
 * The next expiry of a shared queue's locks, at `nowSeconds`: a countdown, "expired" (given
 * back on the queue's next operation or sweep), or nothing when no lock lives.
 */
export function nextExpiry(locks: SharedLocksInfo, nowSeconds: number): { kind: 'none' } | { kind: 'due' } | { kind: 'in'; text: string } {
  if (locks.count === 0 || locks.next_expires_at === null) return { kind: 'none' };
  const left = locks.next_expires_at - nowSeconds;
  return left > 0 ? { kind: 'in', text: remaining(left) } : { kind: 'due' };
}

/** The result of a release: where the items went, in the words of the queue's lock mode. */
export function releaseMessage(answer: ReleaseResponse, mode: LockMode | undefined): string {
  const delayed = answer.items_delayed ?? 0;
  // items_returned counts the items waiting out a retry delay too.
  const returned = answer.items_returned - delayed;
  const dead = answer.items_dead_lettered ?? 0;
  const parts: string[] = [];
  if (returned > 0 || (dead === 0 && delayed === 0)) {
    parts.push(
      mode === 'shared'
        ? `${plural(returned, 'item')} back in the queue, in push order`
        : `${plural(returned, 'item')} back at the front of ${returned === 1 ? 'its priority' : 'their priorities'}`,
    );
  }
  if (delayed > 0) parts.push(`${plural(delayed, 'item')} back after the retry delay, in push order`);
  if (dead > 0) parts.push(`${plural(dead, 'item')} reached max_deliveries and went to the dead-letter queue`);
  return `Released: ${parts.join('; ')}.`;
}

/** How the retry delay reads: "none", "5 s fixed", "5 s doubling up to 300 s". */
export function describeRetry(settings: QueueSettings): string {
  if (settings.retry_delay_seconds === 0) return 'none: given back at once';
  if (settings.retry_backoff === 'fixed') return `${settings.retry_delay_seconds} s, fixed`;
  return `${settings.retry_delay_seconds} s, doubling up to ${settings.retry_delay_max_seconds} s`;
}
