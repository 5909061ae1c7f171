import { Injectable } from '@nestjs/common';
import { MetricCollectors, type Observe } from '../../metrics/metric-collectors.js';
import { METRICS } from '../../metrics/metric-names.js';
import type { RuntimeObserver } from './runtime-observer.js';

/** The label values of a turn's outcome, made once: a turn observed allocates nothing. */
const OK = { outcome: 'ok' } as const;
const ERROR = { outcome: 'error' } as const;

/** The runtime's timings as histograms: the observer the runtime is given at construction ({@link RUNTIME_OBSERVER}). */
@Injectable()
export class RuntimeHistograms implements RuntimeObserver {
  private readonly storeDuration: Observe;
  private readonly loadDuration: Observe;

  constructor(collectors: MetricCollectors) {
    this.storeDuration = collectors.histogram(METRICS.storeDuration);
    this.loadDuration = collectors.histogram(METRICS.segmentLoadDuration);
  }

  turnFinished(seconds: number, ok: boolean): void {
    this.storeDuration(seconds, ok ? OK : ERROR);
  }

  segmentLoaded(seconds: number): void {
    this.loadDuration(seconds);
  }
}
