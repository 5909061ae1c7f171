import { isRetryDelay, MAX_RETRY_DELAY_SECONDS, UnrecoverableError } from './errors.js';
import type { QueueSettings } from './types.js';

/** The consumer's own retry delays, used when the queue has no retry delay of its own (`retry_delay_seconds` 0). */
export interface BackoffOptions {
  /** `exponential` (default): `delaySeconds × 2^(deliveryCount − 1)`; `fixed`: `delaySeconds` every time. */
  type?: 'exponential' | 'fixed';
  /** The first retry's delay in whole seconds (default 1). */
  delaySeconds?: number;
  /** No delay is longer (default 300; at most 900, the contract's release limit). */
  maxDelaySeconds?: number;
}

/** What the consumer knows of its queue's failure settings (read once, when it starts). */
export interface QueuePolicy {
  deadLetterQueue: string | null;
  maxDeliveries: number | null;
  /** The queue's own retry delay, or null when it has none (`retry_delay_seconds` 0): then the consumer's backoff applies. */
  retry: { delaySeconds: number; backoff: 'fixed' | 'exponential'; maxDelaySeconds: number } | null;
}

/** A queue about which nothing is known (not created yet, or settings not readable): the contract's defaults. */
export const DEFAULT_QUEUE_POLICY: QueuePolicy = { deadLetterQueue: null, maxDeliveries: null, retry: null };

export function queuePolicyOf(settings: QueueSettings): QueuePolicy {
  const delay = settings.retry_delay_seconds ?? 0;
  return {
    deadLetterQueue: settings.dead_letter_queue ?? null,
    maxDeliveries: settings.max_deliveries ?? null,
    retry:
      delay > 0
        ? {
            delaySeconds: delay,
            backoff: settings.retry_backoff ?? 'exponential',
            maxDelaySeconds: settings.retry_delay_max_seconds ?? MAX_RETRY_DELAY_SECONDS,
          }
        : null,
  };
}

/**
 * What becomes of an item whose handler failed: given back after `delaySeconds` (`byQueue` when
 * that is the queue's own retry delay: the release then names no delay and the service applies
 * it), unless `deadLetter`: released with `dead_letter: true` (a service with that capability, a
 * queue with a dead-letter queue). `exhausted`: out of attempts; when it cannot be dead-lettered
 * on purpose it is still given back, and the service dead-letters it itself once it reached the
 * queue's `max_deliveries`.
 */
export interface Verdict {
  exhausted: boolean;
  deadLetter: boolean;
  delaySeconds: number;
  byQueue: boolean;
}

export interface FailureRules {
  maxAttempts: number;
  backoff: Required<BackoffOptions>;
  policy: QueuePolicy;
  /** The service takes `dead_letter: true` on a release. */
  deadLetterRelease: boolean;
}

/** The delay a handler's error asks for (a `RetryLater`, or any error with a valid `delaySeconds`), if any. */
export function requestedDelay(error: unknown): number | undefined {
  const delay = (error as { delaySeconds?: unknown } | null)?.delaySeconds;
  return isRetryDelay(delay) ? delay : undefined;
}

/** The consumer's backoff for the `deliveryCount`-th delivery's failure. */
export function backoffSeconds(backoff: Required<BackoffOptions>, deliveryCount: number): number {
  const base = backoff.type === 'fixed' ? backoff.delaySeconds : backoff.delaySeconds * 2 ** Math.max(0, deliveryCount - 1);
  return Math.min(backoff.maxDelaySeconds, MAX_RETRY_DELAY_SECONDS, Math.round(base));
}

/** The queue's retry delay for the `deliveryCount`-th delivery (the contract's formula). */
function queueDelaySeconds(retry: NonNullable<QueuePolicy['retry']>, deliveryCount: number): number {
  if (retry.backoff === 'fixed') return retry.delaySeconds;
  return Math.min(retry.maxDelaySeconds, retry.delaySeconds * 2 ** Math.max(0, deliveryCount - 1));
}

/**
 * Decides an item's fate after its handler failed on its `deliveryCount`-th delivery. Every
 * delivery counts as an attempt (a `RetryLater` too); an {@link UnrecoverableError} uses them all
 * up at once.
 */
export function decide(rules: FailureRules, deliveryCount: number, error: unknown): Verdict {
  const exhausted = error instanceof UnrecoverableError || deliveryCount >= rules.maxAttempts;
  const deadLetter = exhausted && rules.deadLetterRelease && rules.policy.deadLetterQueue !== null;
  const asked = requestedDelay(error);
  if (asked !== undefined) return { exhausted, deadLetter, delaySeconds: asked, byQueue: false };
  if (rules.policy.retry) return { exhausted, deadLetter, delaySeconds: queueDelaySeconds(rules.policy.retry, deliveryCount), byQueue: true };
  return { exhausted, deadLetter, delaySeconds: backoffSeconds(rules.backoff, deliveryCount), byQueue: false };
}

/** Whether the service dead-letters an item given back on its `deliveryCount`-th delivery (the queue's `max_deliveries`). */
export function deadLetteredByQueue(policy: QueuePolicy, deliveryCount: number): boolean {
  return policy.deadLetterQueue !== null && policy.maxDeliveries !== null && deliveryCount >= policy.maxDeliveries;
}

/**
 * Each queue's failure settings, read when first needed and kept (at most `max` queues, the
 * oldest read forgotten first): a consumer of a prefix meets many queues, and reads a queue's
 * settings only when one of its items fails. A read that fails is not kept.
 */
export class QueuePolicies {
  private readonly known = new Map<string, Promise<QueuePolicy>>();

  constructor(
    private readonly read: (queueId: string) => Promise<QueuePolicy>,
    private readonly max = 10_000,
  ) {}

  /** What is known of `queueId` already (read when the consumer started). */
  set(queueId: string, policy: QueuePolicy): void {
    this.known.set(queueId, Promise.resolve(policy));
  }

  get(queueId: string): Promise<QueuePolicy> {
    const kept = this.known.get(queueId);
    if (kept) return kept;
    if (this.known.size >= this.max) this.known.delete(this.known.keys().next().value!);
    const reading = this.read(queueId);
    this.known.set(queueId, reading);
    reading.catch(() => {
      if (this.known.get(queueId) === reading) this.known.delete(queueId);
    });
    return reading;
  }
}
