import { Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { DatabaseProvider } from '../database/database.provider.js';
import { SweepProbeRepository, type DueQuestion } from '../storage/sweep-probe.repository.js';

/** A background sweep, as it registers with the {@link SweepClock}. */
export interface Sweep {
  /** Names the sweep in log lines ("Lock sweep"). */
  readonly what: string;
  /** What the sweep asks the probe before it sweeps, for the service's time `now`. */
  question(now: number): DueQuestion;
  /** The longest time between two questions; read each time (a setting). */
  intervalMs(): number;
  /** One sweep; true when it left work behind (a full batch): it sweeps again at once, without asking. */
  sweep(): Promise<boolean>;
}

/** A registered sweep: whether it was stopped, and how to stop it. */
export interface SweepHandle {
  readonly stopped: boolean;
  /** Stops asking for the sweep and waits for a sweep in progress. */
  stop(): Promise<void>;
}

interface Entry {
  readonly sweep: Sweep;
  /** When the sweep is to be asked next (performance.now() time). */
  nextAt: number;
  running?: Promise<void>;
  stopped: boolean;
}

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * The sweeps' one timer. Before a sweep runs, its question (anything due?) is put to the
 * database, and the questions of every sweep whose time has come are put together: one
 * statement of index probes ({@link SweepProbeRepository}). So sweeps that find nothing to do
 * cost one cheap statement between them per shortest interval, where each used to send its own
 * statements on its own timer; a sweep runs only when its answer is yes, and again at once while
 * it leaves work behind. A sweep whose time comes within half the shortest interval joins the
 * question being put now (asked a little early, never late), which keeps the sweeps in step.
 * Each sweep is asked at least every `intervalMs` (plus the statement's time), as when each had
 * its timer, so every guarantee of the sweeps holds; several processes each ask for themselves.
 * The first questions are put once the database is open. The timer does not keep the process alive.
 */
@Injectable()
export class SweepClock implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('Sweeps');
  private readonly entries: Entry[] = [];
  private timer?: NodeJS.Timeout;
  private probing?: Promise<void>;
  private started = false;
  private closed = false;
  private failing = false;

  constructor(
    private readonly db: DatabaseProvider,
    private readonly probe: SweepProbeRepository,
    private readonly clock: Clock,
  ) {}

  onApplicationBootstrap(): void {
    this.db.ready.then(
      () => {
        this.started = true;
        this.plan();
      },
      () => undefined,
    );
  }

  async onModuleDestroy(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    await this.probing;
    await Promise.all(this.entries.map((entry) => this.stop(entry)));
  }

  /** Adds a sweep; it is first asked as soon as the database is open (work may have come due while no process ran). */
  register(sweep: Sweep): SweepHandle {
    const entry: Entry = { sweep, nextAt: 0, stopped: false };
    this.entries.push(entry);
    this.plan();
    return {
      get stopped() {
        return entry.stopped;
      },
      stop: () => this.stop(entry),
    };
  }

  private async stop(entry: Entry): Promise<void> {
    entry.stopped = true;
    this.plan();
    await entry.running;
  }

  /** The sweeps waiting for their question: not stopped, not sweeping. */
  private waiting(): Entry[] {
    return this.entries.filter((e) => !e.stopped && e.running === undefined);
  }

  /** Sets the timer for the earliest question (none while a question is being put: its answer plans again). */
  private plan(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.started || this.closed || this.probing) return;
    const waiting = this.waiting();
    if (waiting.length === 0) return;
    const next = Math.min(...waiting.map((e) => e.nextAt));
    this.timer = setTimeout(() => this.ask(), Math.max(0, next - performance.now()));
    this.timer.unref();
  }

  /** Puts the questions of the sweeps whose time has come (or comes within the slack) in one statement, and starts the sweeps answered yes. */
  private ask(): void {
    this.timer = undefined;
    const t = performance.now();
    const waiting = this.waiting();
    const slack = Math.min(...waiting.map((e) => e.sweep.intervalMs())) / 2;
    const asked = waiting.filter((e) => e.nextAt <= t + slack);
    if (asked.length === 0) return this.plan();
    for (const entry of asked) entry.nextAt = t + entry.sweep.intervalMs();
    const now = this.clock.now();
    this.probing = this.probe
      .due(asked.map((e) => e.sweep.question(now)))
      .then(
        (answers) => {
          if (this.failing) this.logger.log('Sweep probe works again');
          this.failing = false;
          asked.forEach((entry, i) => {
            if (answers[i]) this.run(entry);
          });
        },
        (error: unknown) => {
          // The database is away: requests say so (503); one line here, not one per interval.
          if (!this.failing) this.logger.warn(`Sweep probe failed: ${message(error)}; retrying`);
          this.failing = true;
        },
      )
      .finally(() => {
        this.probing = undefined;
        this.plan();
      });
  }

  /** Sweeps, again at once while the sweep leaves work behind; then the sweep waits for its next question. */
  private run(entry: Entry): void {
    if (entry.stopped || this.closed) return;
    entry.running = (async () => {
      try {
        while (!entry.stopped && (await entry.sweep.sweep()));
      } catch (error) {
        this.logger.warn(`${entry.sweep.what} failed: ${message(error)}`);
      }
    })().finally(() => {
      entry.running = undefined;
      entry.nextAt = performance.now() + entry.sweep.intervalMs();
      this.plan();
    });
  }
}
