import type { BackoffOptions } from './failure-policy.js';

/** What a handler gets for one item. */
export interface Message<T> {
  item: T;
  /** How many times the item has been handed out with a lock, this time included (1 the first time). */
  deliveryCount: number;
  /** The item's headers (`{}` when it has none). */
  headers: Record<string, string>;
  /** Fires when the consumer gives up on this handler: its lock was lost, `maxProcessingSeconds` passed, or `close()` timed out. */
  signal: AbortSignal;
  /** The queue the item came from (of a consumer of a prefix, the queue its fair pop served). */
  queueId: string;
  lockId: string;
}

/**
 * Resolves (or returns) when the item is done: it is acknowledged. Throws to give it back after
 * a delay (a {@link RetryLater} to choose it), or an {@link UnrecoverableError} to dead-letter it.
 */
export type Handler<T> = (message: Message<T>) => unknown;

export interface ConsumerOptions {
  /**
   * Items handled at once (default 1). On a shared queue each has a lock of its own. An exclusive
   * queue hands out one lock at a time (FIFO): there the consumer takes one item at a time, or
   * `batchSize` items under one lock; a `concurrency` above 1 there draws a warning with the remedy.
   */
  concurrency?: number;
  /**
   * Exclusive queues only: take up to this many items under the queue's one lock and run their
   * handlers at once (default 1). The lock is acknowledged when every handler succeeded; when
   * one fails the whole batch is given back, so its successful items run again, and the batch
   * waits for its slowest item.
   */
  batchSize?: number;
  /**
   * Shared queues, on a service with per-item locks and batch settling: items popped ahead of
   * the handlers, each under its own lock; the consumer holds at most `concurrency + prefetch`
   * locks besides those of finished items whose acknowledgement is on its way. By default the
   * prefetch follows the handlers: what the slots get through in 100 ms at the pace their
   * handlers have taken so far (`concurrency` until one finished), at least 1 and at most four
   * times `concurrency` (at least 128). Handlers that take microseconds fill it to that bound,
   * so each round trip and each turn of the queue moves many items (no-op handlers on one
   * machine, 20,000 items: a bound of 64 moved about 26,000 items/s at concurrency 1 and 8, 128
   * moved 30,000–36,000); handlers that take a second keep one item waiting, so a consumer of
   * slow handlers holds no items another consumer could run now. A number fixes it: more items
   * per round trip, and more waiting (their locks extended) where another consumer could have
   * taken them. 0 pops one item per slot as a service without per-item locks makes it.
   * `close()` gives the waiting ones back at once.
   */
  prefetch?: number;
  /** The lock's time to live, 1–300 (default 30). */
  ttlSeconds?: number;
  /** Extend each lock this often while its handlers run (default a third of `ttlSeconds`). */
  extendEverySeconds?: number;
  /** Long-poll wait per pop, 0–20 (default 20). `close()` cuts a waiting poll at once. */
  waitSeconds?: number;
  /** Give up on a lock whose handlers run longer than this (default: never): their signals abort and it counts as a failed attempt. */
  maxProcessingSeconds?: number;
  /** How long `close()` waits for running handlers before it gives their items back (default 30000). */
  closeTimeoutMs?: number;
  /**
   * Attempts per item (deliveries, `RetryLater`s included) before the consumer dead-letters it
   * (default: the queue's `max_deliveries`, else 5).
   */
  maxAttempts?: number;
  /** Retry delays when the queue has none of its own (default exponential from 1 s, at most 300 s). */
  backoff?: BackoffOptions;
  /**
   * The queue's lock mode, used when its settings cannot be read (a key without the `read`
   * scope). `auto` (default): read them (exclusive when the queue does not exist yet).
   */
  lockMode?: 'auto' | 'exclusive' | 'shared';
  /**
   * Ask for item headers (`include_headers`, default true; a service older than the third version
   * of the contract refuses it by name, and the consumer then pops without). A handler runs in a
   * span whose parent is its item's `traceparent` header.
   */
  includeHeaders?: boolean;
  /** Pause after a failed pop or an answer of "nothing now" (paused, limited, locked) before polling again (default 1000). */
  idleDelayMs?: number;
}

/** Why a consumer gave up on a handler, as its signal's `reason`. */
export type GiveUpReason = 'lock-lost' | 'timeout' | 'shutdown';

/** An item, as every per-item event names it. */
export interface ItemEvent<T> {
  item: T;
  deliveryCount: number;
  lockId: string;
  /** The queue the item came from. */
  queueId: string;
  headers: Record<string, string>;
}

export interface ConsumerEvents<T> {
  /** The item's handler succeeded and the item was acknowledged. */
  completed: [event: ItemEvent<T>];
  /** The item's handler failed (or ran past `maxProcessingSeconds`): it comes back after `delaySeconds`. */
  retrying: [event: ItemEvent<T> & { error: unknown; delaySeconds: number }];
  /**
   * The consumer gave up on the item: an {@link UnrecoverableError}, or its last attempt failed.
   * `deadLettered` false: it could not be dead-lettered (no dead-letter queue, or a service
   * without dead-lettering on purpose and attempts left under `max_deliveries`), so it comes back
   * after `delaySeconds` like a retry.
   */
  failed: [event: ItemEvent<T> & { error: unknown; deadLettered: boolean; delaySeconds?: number }];
  /** The item went to the dead-letter queue (also emitted with `failed`). */
  deadLettered: [event: ItemEvent<T> & { error: unknown; deadLetterQueue: string | null }];
  /** The queue had nothing more for this consumer and no handler runs (once after each run of work). */
  drained: [];
  /** A lock expired or disappeared while its handlers ran: their items will be delivered again. */
  lockLost: [info: { lockId: string; queueId: string; items: T[]; error: unknown }];
  /** A pop, acknowledge, extend or release failed (after the client's retries). */
  error: [error: unknown];
  /**
   * The consumer runs otherwise than its options suggest (e.g. `concurrency` above 1 on an
   * exclusive queue), with the remedy. Without a listener it goes to `process.emitWarning`.
   */
  warning: [message: string];
}

/** Item counts, one per event, and what was given back without a failure (`close()`, a failed batch's other items). */
export interface ConsumerStats {
  completed: number;
  retrying: number;
  failed: number;
  deadLettered: number;
  lockLost: number;
  released: number;
}
