import { Injectable } from '@nestjs/common';

/**
 * Counters of segment moves, kept by the turn runner as it carries them out and read when
 * `/metrics` is scraped ({@link OffloadMetrics}). Moves count once their turn committed; failures count when they happen.
 */
@Injectable()
export class OffloadStats {
  segmentsOffloaded = 0;
  offloadFailures = 0;
  segmentsLoaded = 0;
  loadFailures = 0;
}
