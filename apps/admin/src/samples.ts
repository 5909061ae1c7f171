import { rate, sumSamples } from './metrics';

/** One reading of a poll, with the time it arrived (ms). */
export interface Sample<T> {
  at: number;
  value: T;
}

/** One point of a chart. */
export interface Point {
  at: number;
  value: number;
}

/** How often the charts sample, and how many samples they keep: the last five minutes. */
export const SAMPLE_INTERVAL_MS = 2000;
export const SAMPLE_CAPACITY = 150;

/** `samples` with `sample` added at the end, the oldest dropped past `capacity`: the window never grows past it. */
export function keepLast<T>(samples: readonly Sample<T>[], sample: Sample<T>, capacity: number): Sample<T>[] {
  const kept = samples.length >= capacity ? samples.slice(samples.length - capacity + 1) : samples.slice();
  kept.push(sample);
  return kept;
}

/** The values of one field over the samples. */
export function levels<T>(samples: readonly Sample<T>[], pick: (value: T) => number | undefined): Point[] {
  const points: Point[] = [];
  for (const s of samples) {
    const value = pick(s.value);
    if (value !== undefined) points.push({ at: s.at, value });
  }
  return points;
}

/**
 * Per-second change of one field between consecutive samples: for a counter, its rate (no
 * point across a reset, which a restart causes); with `signed`, any change (a level going down
 * gives a negative rate).
 */
export function perSecond<T>(samples: readonly Sample<T>[], pick: (value: T) => number | undefined, signed = false): Point[] {
  const points: Point[] = [];
  for (let i = 1; i < samples.length; i++) {
    const [a, b] = [samples[i - 1], samples[i]];
    const [va, vb] = [pick(a.value), pick(b.value)];
    if (va === undefined || vb === undefined || b.at <= a.at) continue;
    const value = signed ? (vb - va) / ((b.at - a.at) / 1000) : rate({ value: va, at: a.at }, vb, b.at);
    if (value !== undefined) points.push({ at: b.at, value });
  }
  return points;
}

/** What the charts read from /metrics: items pushed and popped (counters), items queued and locks held (gauges). */
export interface Throughput {
  pushed: number;
  popped: number;
  queued: number | undefined;
  liveLocks: number | undefined;
}

export const THROUGHPUT_METRICS = {
  pushed: 'pushpop_items_pushed_total',
  popped: 'pushpop_items_popped_total',
  queued: 'pushpop_queued_items',
  liveLocks: 'pushpop_live_locks',
} as const;

export function throughput(text: string): Throughput {
  const sums = sumSamples(text);
  return {
    pushed: sums.get(THROUGHPUT_METRICS.pushed) ?? 0,
    popped: sums.get(THROUGHPUT_METRICS.popped) ?? 0,
    queued: sums.get(THROUGHPUT_METRICS.queued),
    liveLocks: sums.get(THROUGHPUT_METRICS.liveLocks),
  };
}
