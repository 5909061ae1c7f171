import type { AcknowledgeOutcome, NextPop } from './acknowledge-then-pop.js';
import type { ReleaseOutcome } from './lock-operations.js';
import type { PopOutcome, PushOutcome } from './outcomes.js';
import type { QueueCore } from './queue-core.js';
import type { PopAck } from './queue-pops.js';
import type { QueueView, StateLookup } from './queue-inspection.js';
import type { RedriveBatch, RedriveRequest } from './redrive.js';
import type { LockProblem, LockState, NewItem, OrNeed, QueueSettings, SettingsPatch, SettingsProblem } from './types.js';

/**
 * What an operation tells the turn it runs in before it runs: the reads it will need (made for
 * all the operations of a turn at once, before the first of them runs, so that none of them has
 * to ask), and how it bounds the turn.
 */
export interface DeclaredReads {
  /** Deduplication ids the operation will ask the core about: checked for the whole turn with one read. */
  readonly dedupIds?: readonly string[];
  /** Lock ids the operation will look up: in shared lock mode, their rows are read for the whole turn with one read. */
  readonly lockIds?: readonly string[];
  /**
   * The operation takes items from the front of the queue (a pop): a turn that activates the
   * queue loads its front segment with its row, so that the pop needs no read of its own.
   */
  readonly readsFront?: boolean;
  /** Items the operation carries; bounds how much one turn writes. Default 1. */
  readonly weight?: number;
  /** Nothing after this operation runs in the same turn (deleting the queue). */
  readonly endsTurn?: boolean;
}

/** Whether a long poll's client has gone (an `AbortSignal` is one): looked at when the pop runs. */
export interface ClientGone {
  readonly aborted: boolean;
}

/**
 * One operation on a queue, as data: its kind, its arguments and its declared reads. Anyone may
 * build one (the HTTP service, the schedules, the sweeps); {@link applyOp} is the one place that
 * applies an operation to a core. The time is not part of it: the turn it runs in gives it.
 */
export type QueueOp = (
  | { readonly kind: 'none' }
  | { readonly kind: 'push'; readonly items: readonly NewItem[]; readonly dedupWindowMs: number }
  | {
      readonly kind: 'pop';
      readonly depth: number;
      /** Take the items under a new lock (or a lock per item), see {@link PopAck}. */
      readonly ack?: PopAck;
      /** A long poll's client: once it has gone, the pop takes nothing. */
      readonly clientGone?: ClientGone;
    }
  | { readonly kind: 'acknowledge'; readonly lockId: string }
  /** Acknowledges each lock in order (a refusal leaves the others to go on), then pops with `next` if any was acknowledged. */
  | { readonly kind: 'acknowledgeBatch'; readonly lockIds: readonly string[]; readonly next?: NextPop }
  | { readonly kind: 'extendLock'; readonly lockId: string; readonly ttlMs: number }
  /** `delayMs` replaces the queue's retry delay (0: the items are back at once); `deadLetter` sends the items to the dead-letter queue. */
  | { readonly kind: 'release'; readonly lockId: string; readonly delayMs?: number; readonly deadLetter?: boolean }
  /** Releases each lock in order, as `release` would. */
  | { readonly kind: 'releaseBatch'; readonly lockIds: readonly string[]; readonly delayMs?: number; readonly deadLetter?: boolean }
  | { readonly kind: 'getSettings' }
  | { readonly kind: 'putSettings'; readonly patch: SettingsPatch }
  | { readonly kind: 'view' }
  | { readonly kind: 'lookupState'; readonly queueId: string; readonly key: string }
  | { readonly kind: 'redrive'; readonly request: RedriveRequest }
  | { readonly kind: 'deleteQueue' }
) &
  DeclaredReads;

/** What each kind of operation answers. */
export interface OpOutcomes {
  none: undefined;
  push: PushOutcome;
  pop: PopOutcome;
  acknowledge: number | LockProblem;
  acknowledgeBatch: AcknowledgeOutcome;
  extendLock: LockState | LockProblem;
  release: ReleaseOutcome;
  releaseBatch: ReleaseOutcome[];
  /** Undefined: the queue does not exist. */
  getSettings: QueueSettings | undefined;
  putSettings: QueueSettings | SettingsProblem;
  view: QueueView | undefined;
  lookupState: StateLookup;
  redrive: (RedriveBatch & { readonly count: number }) | undefined;
  deleteQueue: number | undefined;
}

/** What an operation answers. */
export type OutcomeOf<O extends QueueOp> = OpOutcomes[O['kind']];

/** A push of `items` in order, declaring their dedup ids and weight. */
export function pushOp(items: readonly NewItem[], dedupWindowMs: number): QueueOp & { readonly kind: 'push' } {
  const dedupIds = items.flatMap((i) => (i.dedupId !== undefined ? [i.dedupId] : []));
  return { kind: 'push', items, dedupWindowMs, ...(items.length !== 1 ? { weight: items.length } : {}), ...(dedupIds.length > 0 ? { dedupIds } : {}) };
}

/** What a pop of up to `depth` items adds to a turn's weight: under a lock it writes the items again (the lock's rows), else only takes them. */
const popWeight = (depth: number, ack: PopAck | undefined): number => (ack ? depth : 1);

/** A pop of up to `depth` items (under a new lock, or a lock per item, with `ack`), declaring that it reads the front and its weight. */
export function popOp(depth: number, ack?: PopAck, clientGone?: ClientGone): QueueOp & { readonly kind: 'pop' } {
  const weight = popWeight(depth, ack);
  return { kind: 'pop', depth, readsFront: true, ...(weight !== 1 ? { weight } : {}), ...(ack ? { ack } : {}), ...(clientGone ? { clientGone } : {}) };
}

/** Acknowledging locks (then popping with `next`), declaring their ids, the front when it pops, and the weight of both. */
export function acknowledgeOp(lockIds: readonly string[], next?: NextPop): QueueOp & { readonly kind: 'acknowledgeBatch' } {
  const weight = lockIds.length + (next ? popWeight(next.depth, next.ack) : 0);
  return { kind: 'acknowledgeBatch', lockIds, weight, ...(next ? { next, readsFront: true } : {}) };
}

/** Releasing locks, declaring their ids. */
export function releaseOp(
  lockIds: readonly string[],
  how: { readonly delayMs?: number; readonly deadLetter?: boolean } = {},
): QueueOp & { readonly kind: 'releaseBatch' } {
  return { kind: 'releaseBatch', lockIds, weight: lockIds.length, ...how };
}

/** One batch of a redrive, weighing what it may move. */
export function redriveOp(request: RedriveRequest): QueueOp & { readonly kind: 'redrive' } {
  return { kind: 'redrive', request, weight: request.limit };
}

/** Deleting the queue: the last operation of its turn. */
export function deleteQueueOp(): QueueOp & { readonly kind: 'deleteQueue' } {
  return { kind: 'deleteQueue', endsTurn: true };
}

/**
 * Applies an operation to a core at `now`: its outcome (a refusal included), or the rows it
 * needs first (see `drive`).
 */
export function applyOp<O extends QueueOp>(core: QueueCore, op: O, now: number): OrNeed<OutcomeOf<O>>;
export function applyOp(core: QueueCore, op: QueueOp, now: number): OrNeed<OpOutcomes[keyof OpOutcomes]> {
  switch (op.kind) {
    case 'none':
      return undefined;
    case 'push':
      return core.push(op.items, now, op.dedupWindowMs);
    case 'pop':
      // A long poll whose client has gone takes nothing (nobody would receive the items).
      return op.clientGone?.aborted ? { items: [] } : core.pop(op.depth, now, op.ack);
    case 'acknowledge':
      return core.acknowledge(op.lockId, now);
    case 'acknowledgeBatch':
      return core.acknowledgeAll(op.lockIds, now, op.next);
    case 'extendLock':
      return core.extendLock(op.lockId, now, op.ttlMs);
    case 'release':
      return core.releaseLock(op.lockId, now, op);
    case 'releaseBatch':
      return core.releaseAll(op.lockIds, now, op);
    case 'getSettings':
      return core.isPresent ? core.settings : undefined;
    case 'putSettings':
      return core.updateSettings(op.patch);
    case 'view':
      return core.view();
    case 'lookupState':
      return core.lookupState(op.queueId, op.key);
    case 'redrive':
      return core.redrive(op.request);
    case 'deleteQueue':
      return core.deleteQueue();
  }
}
