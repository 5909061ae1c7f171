import { Injectable } from '@nestjs/common';

/** Counters of schedule firings this process pushed and claimed, read when `/metrics` is scraped ({@link ScheduleMetrics}). */
@Injectable()
export class ScheduleStats {
  /** Firings pushed and claimed (made-up ones included). */
  firings = 0;
  /** Firings pushed late, each standing for every firing missed while no process ran. */
  firingsMadeUp = 0;
}
