/** Counters of the offload policy, published by the metrics module. */
export class OffloadStats {
  segmentsOffloaded = 0;
  offloadFailures = 0;
  segmentsLoaded = 0;
  loadFailures = 0;
  /** Seconds each successful load took (drained by the metrics module into a histogram). */
  readonly loadSeconds: number[] = [];
}
