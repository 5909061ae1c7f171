import type { LockMode, QueueSettings, SettingsPatch, SettingsProblem } from './types.js';

/** What a change of settings depends on besides the settings. */
export interface SettingsState {
  /** Items, delayed items, locks or priority entries: the segment layout is in use. */
  readonly holdsAnything: boolean;
  /** An exclusive lock is active, or a shared lock lives. */
  readonly lockLives: boolean;
  /** When the lock that lives expires (the active exclusive one, or the earliest shared one). Absent: unknown (null). */
  readonly lockExpiresAt?: number | null;
}

/** A queue's lock mode (absent: exclusive, as the seeds). */
export const lockModeOf = (settings: QueueSettings): LockMode => settings.lockMode ?? 'exclusive';

/**
 * The settings after a change, or why it is refused (see {@link SettingsProblem}, in its order):
 * `maxDeliveries` needs a dead-letter queue, the segment layout changes only while the queue
 * holds nothing, the lock mode only while no lock lives, and the retry delay stays within its
 * maximum. Absent fields stay as they are; the result names every field (null: no delivery
 * limit, no dead-letter queue).
 */
export function changeSettings(
  current: QueueSettings,
  patch: SettingsPatch,
  { holdsAnything, lockLives, lockExpiresAt = null }: SettingsState,
): QueueSettings | SettingsProblem {
  const mode = lockModeOf(current);
  const now = withControlDefaults(current);
  const next: QueueSettings = {
    segmentSize: patch.segmentSize ?? current.segmentSize,
    bufferSegments: patch.bufferSegments ?? current.bufferSegments,
    lockMode: patch.lockMode ?? mode,
    maxDeliveries: patch.maxDeliveries !== undefined ? patch.maxDeliveries : (current.maxDeliveries ?? null),
    deadLetterQueue: patch.deadLetterQueue !== undefined ? patch.deadLetterQueue : (current.deadLetterQueue ?? null),
    paused: patch.paused ?? now.paused,
    retryDelaySeconds: patch.retryDelaySeconds ?? now.retryDelaySeconds,
    retryBackoff: patch.retryBackoff ?? now.retryBackoff,
    retryDelayMaxSeconds: patch.retryDelayMaxSeconds ?? now.retryDelayMaxSeconds,
    maxInFlight: patch.maxInFlight !== undefined ? patch.maxInFlight : now.maxInFlight,
    maxPopsPerSecond: patch.maxPopsPerSecond !== undefined ? patch.maxPopsPerSecond : now.maxPopsPerSecond,
  };
  // Judged by the settings the change leaves, not by the fields it names.
  if (next.maxDeliveries != null && !next.deadLetterQueue) return { refused: 'NEEDS_DEAD_LETTER_QUEUE' };
  const layout = next.segmentSize !== current.segmentSize || next.bufferSegments !== current.bufferSegments;
  if (layout && (holdsAnything || lockLives)) return { refused: 'QUEUE_NOT_EMPTY' };
  if (next.lockMode !== mode && lockLives) return { refused: 'QUEUE_LOCKED', lockExpiresAt };
  if (next.retryDelaySeconds! > next.retryDelayMaxSeconds!)
    return { refused: 'RETRY_DELAY_ABOVE_MAX', delay: next.retryDelaySeconds!, max: next.retryDelayMaxSeconds! };
  return next;
}

/** The control settings' defaults (not paused, no retry delay, exponential up to 900 s, no delivery limits). */
export const CONTROL_DEFAULTS = {
  paused: false,
  retryDelaySeconds: 0,
  retryBackoff: 'exponential',
  retryDelayMaxSeconds: 900,
  maxInFlight: null,
  maxPopsPerSecond: null,
} as const satisfies Partial<QueueSettings>;

/** Settings with every control named (absent ones at their defaults). */
export function withControlDefaults(settings: QueueSettings): Required<QueueSettings> {
  return {
    lockMode: lockModeOf(settings),
    maxDeliveries: settings.maxDeliveries ?? null,
    deadLetterQueue: settings.deadLetterQueue ?? null,
    ...settings,
    paused: settings.paused ?? CONTROL_DEFAULTS.paused,
    retryDelaySeconds: settings.retryDelaySeconds ?? CONTROL_DEFAULTS.retryDelaySeconds,
    retryBackoff: settings.retryBackoff ?? CONTROL_DEFAULTS.retryBackoff,
    retryDelayMaxSeconds: settings.retryDelayMaxSeconds ?? CONTROL_DEFAULTS.retryDelayMaxSeconds,
    maxInFlight: settings.maxInFlight ?? null,
    maxPopsPerSecond: settings.maxPopsPerSecond ?? null,
  };
}

/**
 * The retry delay (ms) of an item given back after `deliveries` deliveries: `fixed` →
 * `retryDelaySeconds`; `exponential` → `min(retryDelayMaxSeconds, retryDelaySeconds × 2^(d−1))`.
 * 0: back at once.
 */
export function retryDelayMs(settings: QueueSettings, deliveries: number): number {
  const base = settings.retryDelaySeconds ?? 0;
  if (base <= 0) return 0;
  if ((settings.retryBackoff ?? 'exponential') === 'fixed') return base * 1000;
  const max = settings.retryDelayMaxSeconds ?? CONTROL_DEFAULTS.retryDelayMaxSeconds;
  const exponent = Math.max(0, deliveries - 1);
  // 2^10 × 1 s already passes the 900 s ceiling: no overflow for large delivery counts.
  return Math.min(max, exponent >= 10 ? max : base * 2 ** exponent) * 1000;
}
