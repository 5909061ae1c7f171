import { Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { SweepLoop } from '../common/sweep-loop.js';
import { DatabaseProvider } from '../database/database.provider.js';
import { ScheduleService } from './schedule.service.js';

/** Most schedules fired in one sweep; the rest wait for the next one (which comes at once). */
const SWEEP_BATCH = 100;

/**
 * Fires due schedules: every SCHEDULE_SWEEP_INTERVAL_MS (default 500 ms, so a firing is pushed
 * within a second of its time) one probe of the partial index on `schedules.next_run_at` for
 * all schedules together; schedules not due cost nothing. Having fired some, it sweeps again at
 * once (a firing's successor may be due already). The first sweep runs as soon as the database
 * is open: it makes up, with one push each, the firings missed while no process ran.
 */
@Injectable()
export class ScheduleSweeper implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly loop: SweepLoop;

  constructor(
    private readonly config: AppConfig,
    private readonly db: DatabaseProvider,
    private readonly schedules: ScheduleService,
  ) {
    this.loop = new SweepLoop(
      new Logger('ScheduleSweeper'),
      'Schedule sweep',
      () => this.sweep(),
      () => this.config.env.SCHEDULE_SWEEP_INTERVAL_MS,
    );
  }

  onApplicationBootstrap(): void {
    this.loop.start(this.db.ready);
  }

  async onModuleDestroy(): Promise<void> {
    await this.loop.stop();
  }

  /** One sweep; returns true when it fired something (sweep again at once). */
  async sweep(): Promise<boolean> {
    return (await this.schedules.fireDue(SWEEP_BATCH, () => this.loop.stopped)) > 0;
  }
}
