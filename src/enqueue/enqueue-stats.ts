import { Injectable } from '@nestjs/common';

/** Counters of this process's carrier, read when `/metrics` is scraped ({@link EnqueueMetrics}). */
@Injectable()
export class EnqueueStats {
  /** Rows carried into their queues (duplicates of an earlier carriage or push included). */
  rowsCarried = 0;
  /** Rows dropped because this process could not push them (see `EnqueueCarrier`). */
  rowsDropped = 0;
}
