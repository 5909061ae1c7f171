import type { LockMode, QueueSettings, SettingsPatch, SettingsProblem } from './types.js';

/** What a change of settings depends on besides the settings. */
export interface SettingsState {
  /** Items, delayed items, locks or priority entries: the segment layout is in use. */
  readonly holdsAnything: boolean;
  /** An exclusive lock is active, or a shared lock lives. */
  readonly lockLives: boolean;
}

/** A queue's lock mode (absent: exclusive, as the seeds). */
export const lockModeOf = (settings: QueueSettings): LockMode => settings.lockMode ?? 'exclusive';

/**
 * The settings after a change, or why it is refused: the segment layout changes only while the
 * queue holds nothing, the lock mode only while no lock lives. Absent fields stay as they are;
 * the result names every field (null: no delivery limit, no dead-letter queue).
 */
export function changeSettings(current: QueueSettings, patch: SettingsPatch, { holdsAnything, lockLives }: SettingsState): QueueSettings | SettingsProblem {
  const layout =
    (patch.segmentSize !== undefined && patch.segmentSize !== current.segmentSize) ||
    (patch.bufferSegments !== undefined && patch.bufferSegments !== current.bufferSegments);
  if (layout && (holdsAnything || lockLives)) return 'QUEUE_NOT_EMPTY';
  const mode = lockModeOf(current);
  if (patch.lockMode !== undefined && patch.lockMode !== mode && lockLives) return 'QUEUE_LOCKED';
  return {
    segmentSize: patch.segmentSize ?? current.segmentSize,
    bufferSegments: patch.bufferSegments ?? current.bufferSegments,
    lockMode: patch.lockMode ?? mode,
    maxDeliveries: patch.maxDeliveries !== undefined ? patch.maxDeliveries : (current.maxDeliveries ?? null),
    deadLetterQueue: patch.deadLetterQueue !== undefined ? patch.deadLetterQueue : (current.deadLetterQueue ?? null),
  };
}
