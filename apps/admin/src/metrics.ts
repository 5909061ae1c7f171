/**
 * The few numbers the header shows, read from the Prometheus text exposition of `/metrics`:
 * each is the sum of every sample of one metric name (over all label sets).
 */
export interface Headline {
  operations: number;
  itemsInMemory: number;
  offloadedSegments: number;
  activeActors: number;
  /** Items enqueued from SQL (`pushpop_enqueue`), committed, not yet carried into their queues. */
  enqueueWaiting: number;
  /** Seconds since the oldest of those committed (0: none waits). */
  enqueueOldestAgeSeconds: number;
}

export const METRIC_NAMES = {
  operations: 'pushpop_operations_total',
  itemsInMemory: 'pushpop_items_in_memory',
  offloadedSegments: 'pushpop_offloaded_segments',
  activeActors: 'pushpop_active_actors',
  enqueueWaiting: 'pushpop_enqueue_waiting_items',
  enqueueOldestAgeSeconds: 'pushpop_enqueue_oldest_age_seconds',
} as const;

/** Sums the samples of each metric name in a text exposition (`name{labels} value [timestamp]`). */
export function sumSamples(text: string): Map<string, number> {
  const sums = new Map<string, number>();
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const brace = line.indexOf('{');
    const space = line.indexOf(' ');
    let name: string;
    let rest: string;
    if (brace >= 0 && (space < 0 || brace < space)) {
      name = line.slice(0, brace);
      rest = line.slice(line.lastIndexOf('}') + 1);
    } else {
      name = line.slice(0, space);
      rest = line.slice(space);
    }
    const value = Number(rest.trim().split(/\s+/)[0]);
    if (!name || !Number.isFinite(value)) continue;
    sums.set(name, (sums.get(name) ?? 0) + value);
  }
  return sums;
}

export function headline(text: string): Headline {
  const sums = sumSamples(text);
  return {
    operations: sums.get(METRIC_NAMES.operations) ?? 0,
    itemsInMemory: sums.get(METRIC_NAMES.itemsInMemory) ?? 0,
    offloadedSegments: sums.get(METRIC_NAMES.offloadedSegments) ?? 0,
    activeActors: sums.get(METRIC_NAMES.activeActors) ?? 0,
    enqueueWaiting: sums.get(METRIC_NAMES.enqueueWaiting) ?? 0,
    enqueueOldestAgeSeconds: sums.get(METRIC_NAMES.enqueueOldestAgeSeconds) ?? 0,
  };
}

/** Operations per second between two scrapes; undefined after a counter reset (a restart). */
export function rate(previous: { value: number; at: number } | undefined, value: number, at: number): number | undefined {
  if (!previous || at <= previous.at || value < previous.value) return undefined;
  return (value - previous.value) / ((at - previous.at) / 1000);
}
