/**
 * What the runtime reports as it works, for whoever observes it ({@link RuntimeHistograms}
 * feeds the metrics' histograms). Injected at construction under {@link RUNTIME_OBSERVER}; without a provider nothing
 * observes ({@link NO_OBSERVER}). The runtime never reads anything back from it.
 */
export interface RuntimeObserver {
  /** A turn finished: its database time, whether it committed, how many operations it carried. */
  turnFinished(seconds: number, ok: boolean, operations: number): void;
  /** An offloaded segment was loaded back for use, taking this long. */
  segmentLoaded(seconds: number): void;
}

export const RUNTIME_OBSERVER = Symbol('RuntimeObserver');

export const NO_OBSERVER: RuntimeObserver = {
  turnFinished: () => undefined,
  segmentLoaded: () => undefined,
};
