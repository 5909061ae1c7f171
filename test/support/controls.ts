/** The control settings of a queue that never set them (CONTRACT.md, "More queue settings"), as the API shows them. */
export const DEFAULT_CONTROLS = {
  paused: false,
  retry_delay_seconds: 0,
  retry_backoff: 'exponential',
  retry_delay_max_seconds: 900,
  max_in_flight: null,
  max_pops_per_second: null,
} as const;

/** A settings answer without the controls, checked to be at their defaults. */
export function withoutDefaultControls<T extends Record<string, unknown>>(settings: T): Omit<T, keyof typeof DEFAULT_CONTROLS> {
  const rest: Record<string, unknown> = { ...settings };
  const controls: Record<string, unknown> = {};
  for (const key of Object.keys(DEFAULT_CONTROLS)) {
    controls[key] = rest[key];
    delete rest[key];
  }
  if (JSON.stringify(controls) !== JSON.stringify(DEFAULT_CONTROLS)) throw new Error(`controls not at their defaults: ${JSON.stringify(controls)}`);
  return rest as Omit<T, keyof typeof DEFAULT_CONTROLS>;
}
