/**
 * Requests sent in groups: at most `maxInFlight` groups in flight at once. A request arriving
 * while fewer are in flight goes out at once, alone; one arriving while that many are waits,
 * and the waiting requests go together (up to `maxGroup` in one group, in arrival order) as soon
 * as a group in flight is answered. So nothing waits for a timer, and requests are grouped
 * exactly when they would otherwise have queued for a connection.
 *
 * `send` answers each request of its group on its own (fulfilled or rejected, in the group's
 * order); a `send` that throws rejects the whole group with its error.
 *
 * Hand-written rather than a batching library: unlike the {@link GatheringBatcher} (one batch
 * in flight, requests keyed and merged), every request here is distinct and several groups run
 * side by side, on as many connections.
 */
export class StatementGroups<I, R> {
  private waiting: { item: I; resolve(result: R): void; reject(error: unknown): void }[] = [];
  private inFlight = 0;
  /** Groups sent, and those of more than one request. */
  groups = 0;
  grouped = 0;

  constructor(
    private readonly send: (items: I[]) => Promise<PromiseSettledResult<R>[]>,
    private readonly maxInFlight: number,
    private readonly maxGroup: number,
  ) {}

  request(item: I): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      this.next();
    });
  }

  private next(): void {
    while (this.inFlight < this.maxInFlight && this.waiting.length > 0) {
      const group = this.waiting.splice(0, this.maxGroup);
      this.inFlight += 1;
      this.groups += 1;
      if (group.length > 1) this.grouped += 1;
      let sent: Promise<PromiseSettledResult<R>[]>;
      try {
        sent = this.send(group.map((g) => g.item));
      } catch (error) {
        sent = Promise.reject(error instanceof Error ? error : new Error(String(error)));
      }
      sent
        .then(
          (results) => group.forEach((g, i) => (results[i].status === 'fulfilled' ? g.resolve(results[i].value) : g.reject(results[i].reason))),
          (error: unknown) => group.forEach((g) => g.reject(error)),
        )
        .finally(() => {
          this.inFlight -= 1;
          this.next();
        });
    }
  }
}
