interface Asked<O, R> {
  options: O;
  callers: { resolve(result: R): void; reject(error: unknown): void }[];
}

/**
 * Requests keyed by an id, sent in batches: one batch in flight at a time, and the requests
 * asked for while it is in flight gather for the next one (at most `maxBatch` keys each). None
 * waits for a timer: with nothing in flight a request goes out at once, alone. Requests for a
 * key already waiting share its entry (`merge` combines their options) and its answer. A batch
 * that fails rejects every request in it.
 *
 * Hand-written rather than a DataLoader-style library: this rule (send now if idle, else
 * gather behind the one in flight) is all there is, and such libraries hold every request back
 * until the end of the tick.
 */
export class GatheringBatcher<K, O, R> {
  private asked = new Map<K, Asked<O, R>>();
  private sending = false;
  /** Batches sent. */
  batches = 0;

  constructor(
    /** Sends one batch; answers the result for each of its keys. */
    private readonly send: (batch: ReadonlyMap<K, O>) => Promise<(key: K) => R>,
    private readonly maxBatch: number,
    private readonly merge: (a: O, b: O) => O = (a) => a,
  ) {}

  request(key: K, options: O): Promise<R> {
    return new Promise((resolve, reject) => {
      const waiting = this.asked.get(key);
      if (waiting) {
        waiting.options = this.merge(waiting.options, options);
        waiting.callers.push({ resolve, reject });
      } else {
        this.asked.set(key, { options, callers: [{ resolve, reject }] });
      }
      this.next();
    });
  }

  private next(): void {
    if (this.sending || this.asked.size === 0) return;
    this.sending = true;
    const batch = new Map<K, Asked<O, R>>();
    for (const [key, asked] of this.asked) {
      if (batch.size >= this.maxBatch) break;
      batch.set(key, asked);
      this.asked.delete(key);
    }
    this.batches += 1;
    let sent: Promise<(key: K) => R>;
    try {
      sent = this.send(new Map([...batch].map(([key, { options }]) => [key, options])));
    } catch (error) {
      // Thrown at once: rejects the batch like a send that fails later.
      sent = Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    sent
      .then(
        (resultOf) => {
          for (const [key, { callers }] of batch) for (const caller of callers) caller.resolve(resultOf(key));
        },
        (error: unknown) => {
          for (const { callers } of batch.values()) for (const caller of callers) caller.reject(error);
        },
      )
      .finally(() => {
        this.sending = false;
        this.next();
      });
  }
}
