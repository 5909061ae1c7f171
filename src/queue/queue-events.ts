import { Injectable, OnModuleDestroy } from '@nestjs/common';

/**
 * Wakes long-polling pops when items arrive on their queue in this process. Waiting happens
 * outside the queue's turn, so a waiting pop never holds up pushes. Pushes made by another
 * process sharing the database are noticed by the waiter's periodic re-check.
 */
@Injectable()
export class QueueEvents implements OnModuleDestroy {
  private readonly waiters = new Map<string, Set<() => void>>();
  /** Set at shutdown: long polls answer at once instead of waiting. */
  closed = false;

  /** Resolves when `notify(queueId)` is called, after `ms`, or on shutdown, whichever is first. */
  wait(queueId: string, ms: number): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise((resolve) => {
      let set = this.waiters.get(queueId);
      if (!set) this.waiters.set(queueId, (set = new Set()));
      const done = (): void => {
        clearTimeout(timer);
        const current = this.waiters.get(queueId);
        current?.delete(done);
        if (current?.size === 0) this.waiters.delete(queueId);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, ms));
      set.add(done);
    });
  }

  /** Wakes every waiter of the queue (after a push commits). */
  notify(queueId: string): void {
    const set = this.waiters.get(queueId);
    if (!set) return;
    for (const done of [...set]) done();
  }

  /** Number of pops currently long-polling. */
  get waiting(): number {
    let total = 0;
    for (const set of this.waiters.values()) total += set.size;
    return total;
  }

  onModuleDestroy(): void {
    this.closed = true;
    for (const set of [...this.waiters.values()]) for (const done of [...set]) done();
  }
}
