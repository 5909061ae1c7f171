/** A metric as {@link METRICS} declares it: its name, help and (optionally) label names. */
export interface MetricDefinition {
  readonly name: string;
  readonly help: string;
  readonly labels?: readonly string[];
}

/** Records one observation of a histogram (seconds), with the values of its labels if it has any. */
export type Observe = (seconds: number, labels?: Readonly<Record<string, string>>) => void;

/**
 * The port through which each module publishes its own metrics on the app's registry: a module
 * injects it and registers its collectors once, at init (the metrics module provides it, globally,
 * so that no module imports the metrics module). Metrics only observe: a counter or gauge reads
 * the module's own numbers when `/metrics` is scraped, a histogram is told what happened, and
 * nothing is ever read back by the module. Register each metric once per app.
 */
export abstract class MetricCollectors {
  /**
   * A counter mirroring a monotonic count the module keeps: a number, or for a metric with one
   * label, numbers by that label's value. Read at each scrape.
   */
  abstract counter(metric: MetricDefinition, read: () => number | Readonly<Record<string, number>>): void;

  /**
   * A gauge read at each scrape. `aggregator`: how the primary combines the workers' values when
   * `WORKERS` > 1: summed (a figure of this process), `max` (a figure every process reads alike)
   * or `min` (1 only if it holds in every process).
   */
  abstract gauge(metric: MetricDefinition, read: () => number, aggregator?: 'sum' | 'max' | 'min'): void;

  /**
   * A gauge of a count over all processes, read from the database at most every 10 s and only
   * while the database is open; while it cannot be read, the last count read. The same figure in
   * every process (`max` across workers).
   */
  abstract storedCount(metric: MetricDefinition, read: () => Promise<number>): void;

  /** A histogram of durations in seconds (the latency buckets), observed by the module as it works. */
  abstract histogram(metric: MetricDefinition): Observe;
}
