import { Injectable, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { SweepClock, type SweepHandle } from '../sweeps/sweep-clock.js';
import { ScheduleService } from './schedule.service.js';

/** Most schedules fired in one sweep; the rest wait for the next one (which comes at once). */
const SWEEP_BATCH = 100;

/**
 * Fires due schedules: every SCHEDULE_SWEEP_INTERVAL_MS (default 500 ms, so a firing is pushed
 * within a second of its time) the sweep clock asks, with the other sweeps' questions in one
 * statement, whether the partial index on `schedules.next_run_at` holds a due schedule;
 * schedules not due cost nothing. Having fired some, it sweeps again at once (a firing's
 * successor may be due already). The first question is put as soon as the database is open:
 * the sweep then makes up, with one push each, the firings missed while no process ran.
 */
@Injectable()
export class ScheduleSweeper implements OnApplicationBootstrap, OnModuleDestroy {
  private handle?: SweepHandle;

  constructor(
    private readonly config: AppConfig,
    private readonly sweeps: SweepClock,
    private readonly schedules: ScheduleService,
  ) {}

  onApplicationBootstrap(): void {
    this.handle = this.sweeps.register({
      what: 'Schedule sweep',
      question: (now) => ({ work: 'schedulesDue', at: now }),
      intervalMs: () => this.config.env.SCHEDULE_SWEEP_INTERVAL_MS,
      sweep: () => this.sweep(),
    });
  }

  async onModuleDestroy(): Promise<void> {
    await this.handle?.stop();
  }

  /** One sweep; returns true when it fired something (sweep again at once). */
  async sweep(): Promise<boolean> {
    return (await this.schedules.fireDue(SWEEP_BATCH, () => this.handle?.stopped ?? false)) > 0;
  }
}
