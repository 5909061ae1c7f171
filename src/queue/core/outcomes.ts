import type { HeldItem, LockState } from './types.js';

/** What a pop decided. */
export type PopOutcome =
  /**
   * What the pop took (perhaps nothing). `paused`: the queue is paused, nothing was handed out;
   * `limited`: a delivery limit left no room (`in_flight`) or budget (`rate`), nothing was handed out.
   */
  | {
      readonly items: HeldItem[];
      readonly lock?: LockState;
      /** A pop with a lock per item: the items' locks, parallel to `items` (no `lock`). */
      readonly locks?: readonly LockState[];
      readonly paused?: true;
      readonly limited?: 'in_flight' | 'rate';
      /** With `limited: 'rate'`: milliseconds until the budget allows a pop again. */
      readonly retryInMs?: number;
    }
  /** An unexpired lock exists: every pop is refused until it ends (exclusive mode). */
  | { readonly locked: LockState }
  /** Locks per item were asked for on a queue in exclusive lock mode: nothing was taken. */
  | { readonly perItemRefused: true }
  /** Shared mode: the queue has as many live locks as it may (a pop with ack only). */
  | { readonly busy: true }
  /** The head segment is in the offload store, which could not be read: nothing was taken. */
  | { readonly unavailable: { readonly priority: number; readonly segment: number } };

/** What a push decided: how many items were enqueued (now or delayed) and how many were skipped as duplicates. */
export interface PushOutcome {
  readonly enqueued: number;
  readonly duplicates: number;
}
