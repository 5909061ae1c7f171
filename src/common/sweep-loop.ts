import type { Logger } from '@nestjs/common';

/**
 * A background sweep's schedule: runs `sweep` every `intervalMs()` once `ready` resolves, again
 * at once while it reports more work, never two at a time; a failure is logged and retried at
 * the next interval. The timer does not keep the process alive.
 */
export class SweepLoop {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  stopped = false;

  constructor(
    private readonly logger: Logger,
    private readonly what: string,
    private readonly sweep: () => Promise<boolean>,
    private readonly intervalMs: () => number,
  ) {}

  start(ready: Promise<unknown>): void {
    ready.then(
      () => this.schedule(0),
      () => undefined,
    );
  }

  /** Stops the schedule and waits for a sweep in progress. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.sweep()
        .then((more) => this.schedule(more ? 0 : this.intervalMs()))
        .catch((error: unknown) => {
          this.logger.warn(`${this.what} failed: ${error instanceof Error ? error.message : String(error)}`);
          this.schedule(this.intervalMs());
        });
    }, ms);
    this.timer.unref();
  }
}
