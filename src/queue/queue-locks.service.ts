import { Injectable } from '@nestjs/common';
import {
  InvalidLockIdError,
  LockExpiredError,
  LockIdRequiredError,
  LockNotFoundError,
  NoDeadLetterQueueError,
  type PushpopError,
  ValidationFailedError,
} from '../common/errors.js';
import type { NextPop, PopOutcome, ReleaseOutcome, ReleaseProblem } from './core/queue-core.js';
import { acknowledgeOp, releaseOp } from './core/queue-ops.js';
import type {
  AcknowledgeBatchResponseDto,
  AcknowledgeResponseDto,
  AcknowledgeResultDto,
  ExtendLockResponseDto,
  PopResponseDto,
  ReleaseBatchResponseDto,
  ReleaseResponseDto,
  ReleaseResultDto,
} from './dto/queue-responses.dto.js';
import { QueueMapper } from './queue.mapper.js';
import { QueueTurns } from './queue-turns.js';
import { QueueStats } from './runtime/queue-stats.js';

/** The pop an acknowledgement asks for after it (`next`), each field optional; always with ack, never waiting. */
export interface NextPopOptions {
  depth?: number;
  ttlSeconds?: number;
  lockPerItem?: boolean;
  includeHeaders?: boolean;
}

/** How a release gives the items back: after `delaySeconds` (0-900; the DTO checks the range), or to the dead-letter queue. */
export interface ReleaseOptions {
  delaySeconds?: number;
  deadLetter?: boolean;
}

type Problem = ReleaseProblem | 'LOCK_ID_REQUIRED';

const LOCK_ERRORS: Record<Problem, () => PushpopError> = {
  LOCK_ID_REQUIRED: () => new LockIdRequiredError(),
  LOCK_NOT_FOUND: () => new LockNotFoundError(),
  LOCK_EXPIRED: () => new LockExpiredError(),
  INVALID_LOCK_ID: () => new InvalidLockIdError(),
  NO_DEAD_LETTER_QUEUE: () => new NoDeadLetterQueueError(),
};

const isProblem = (result: unknown): result is Problem => typeof result === 'string' && Object.hasOwn(LOCK_ERRORS, result);

/** A refusal as a batch answers it for one lock id: the status and `error_code` of the single route's error. */
function problemResult(lockId: string, problem: Problem): { lock_id: string; status: number; error_code: string } {
  const error = LOCK_ERRORS[problem]();
  return { lock_id: lockId, status: error.status, error_code: error.errorCode };
}

/** The result of an operation on one lock; its error when the lock was refused. */
function lockResult<T>(result: T | Problem): T {
  if (isProblem(result)) throw LOCK_ERRORS[result]();
  return result;
}

/** First in the contract's order, and needs no turn. */
function requireLockId(lockId: unknown): string {
  if (typeof lockId !== 'string' || lockId === '') throw new LockIdRequiredError();
  return lockId;
}

/**
 * The lock operations of the HTTP contract: acknowledge (optionally popping the next items in
 * the same turn), extend and release, one lock at a time or many at once. A batch is one
 * operation of the queue (one turn, one commit for all its locks); each lock id is answered as
 * the single route would answer it.
 */
@Injectable()
export class QueueLocksService {
  constructor(
    private readonly turns: QueueTurns,
    private readonly stats: QueueStats,
  ) {}

  /** Removes the lock's items for good; with `next`, then pops in the same turn. */
  async acknowledge(queueId: string, lockId: unknown, next?: NextPopOptions): Promise<AcknowledgeResponseDto> {
    if (typeof lockId !== 'string' || lockId === '') this.countAcknowledgement('LOCK_ID_REQUIRED');
    const id = requireLockId(lockId);
    const done = await this.turns.run(queueId, acknowledgeOp([id], this.nextPop(next)));
    if (done.perItemRefused) throw new ValidationFailedError('next.lock_per_item needs a queue in lock_mode shared');
    this.countAcknowledgement(done.acknowledged[0]);
    const count = lockResult(done.acknowledged[0]);
    this.stats.itemsAcknowledged += count;
    const answer = QueueMapper.acknowledge(count);
    return done.next ? { ...answer, next: this.nextAnswer(done.next, next) } : answer;
  }

  /**
   * Acknowledges 1-1000 distinct locks (the DTO checks) as one operation: the acknowledged ones
   * commit together; with `next`, when at least one was acknowledged, then pops in the same turn.
   */
  async acknowledgeBatch(queueId: string, lockIds: readonly string[], next?: NextPopOptions): Promise<AcknowledgeBatchResponseDto> {
    const ids = lockIds.filter((id) => id !== '');
    const done = ids.length > 0 ? await this.turns.run(queueId, acknowledgeOp(ids, this.nextPop(next))) : { acknowledged: [] };
    if ('perItemRefused' in done && done.perItemRefused) throw new ValidationFailedError('next.lock_per_item needs a queue in lock_mode shared');
    const byId = new Map(ids.map((id, i) => [id, done.acknowledged[i]]));
    let total = 0;
    const results = lockIds.map((lockId): AcknowledgeResultDto => {
      const result = lockId === '' ? 'LOCK_ID_REQUIRED' : byId.get(lockId)!;
      this.countAcknowledgement(result);
      if (isProblem(result)) return problemResult(lockId, result);
      total += result;
      return { lock_id: lockId, status: 200, items_acknowledged: result };
    });
    this.stats.itemsAcknowledged += total;
    const popped = 'next' in done && done.next ? this.nextAnswer(done.next, next) : undefined;
    return QueueMapper.acknowledgeBatch(total, results, popped);
  }

  /** Counts one lock id an acknowledgement named, by its result (`pushpop_acknowledgements_total`). */
  private countAcknowledgement(result: number | Problem): void {
    const tally = this.stats.acknowledgements;
    if (!isProblem(result)) tally.ok += 1;
    else if (result !== 'NO_DEAD_LETTER_QUEUE') tally[result] += 1;
  }

  /** Sets the lock's expiry to now + ttl. */
  async extendLock(queueId: string, lockId: unknown, ttlSeconds: number): Promise<ExtendLockResponseDto> {
    const id = requireLockId(lockId);
    const lock = lockResult(await this.turns.run(queueId, { kind: 'extendLock', lockId: id, ttlMs: ttlSeconds * 1000, lockIds: [id] }));
    return QueueMapper.extendLock(id, lock.expiresAt);
  }

  /**
   * Gives the lock's items back (items that reached `max_deliveries` go to the dead-letter
   * queue), after the queue's retry delay or `delaySeconds`; or, with `deadLetter`, sends them
   * all to the dead-letter queue.
   */
  async release(queueId: string, lockId: unknown, options: ReleaseOptions = {}): Promise<ReleaseResponseDto> {
    const how = this.releaseHow(options);
    const id = requireLockId(lockId);
    const [released] = await this.turns.run(queueId, releaseOp([id], how));
    lockResult(released.returned);
    const outcome = released.outcome!;
    this.stats.itemsRedelivered.released += outcome.returned;
    return QueueMapper.release(outcome.returned, outcome.deadLettered, outcome.delayed);
  }

  /** Releases 1-1000 distinct locks (the DTO checks) as one operation: the released ones commit together. */
  async releaseBatch(queueId: string, lockIds: readonly string[], options: ReleaseOptions = {}): Promise<ReleaseBatchResponseDto> {
    const how = this.releaseHow(options);
    const ids = lockIds.filter((id) => id !== '');
    const released = ids.length > 0 ? await this.turns.run(queueId, releaseOp(ids, how)) : [];
    const byId = new Map<string, ReleaseOutcome>(ids.map((id, i) => [id, released[i]]));
    const total = { returned: 0, deadLettered: 0, delayed: 0 };
    const results = lockIds.map((lockId): ReleaseResultDto => {
      const result = lockId === '' ? 'LOCK_ID_REQUIRED' : byId.get(lockId)!.returned;
      if (isProblem(result)) return problemResult(lockId, result);
      const outcome = byId.get(lockId)!.outcome!;
      total.returned += outcome.returned;
      total.deadLettered += outcome.deadLettered;
      total.delayed += outcome.delayed;
      return { lock_id: lockId, status: 200, ...QueueMapper.releaseCounts(outcome) };
    });
    this.stats.itemsRedelivered.released += total.returned;
    return QueueMapper.releaseBatch(total, results);
  }

  private releaseHow(options: ReleaseOptions): { delayMs?: number; deadLetter?: boolean } {
    if (options.deadLetter && options.delaySeconds !== undefined) throw new ValidationFailedError('dead_letter and delay_seconds must not be given together');
    if (options.deadLetter) return { deadLetter: true };
    return options.delaySeconds === undefined ? {} : { delayMs: options.delaySeconds * 1000 };
  }

  /** The pop `next` asks for: with ack (a lock, or a lock per item), `depth` 1 and a lock of 30 s unless given. */
  private nextPop(next: NextPopOptions | undefined): NextPop | undefined {
    if (!next) return undefined;
    const depth = next.depth ?? 1;
    return { depth, ack: this.turns.ack(depth, next.ttlSeconds ?? 30, next.lockPerItem) };
  }

  /** The answer of the pop made after an acknowledgement: a pop that could take nothing (no room for a lock, a segment out of reach) answers empty. */
  private nextAnswer(outcome: PopOutcome, next: NextPopOptions | undefined): PopResponseDto {
    const taken = 'items' in outcome ? outcome : { items: [] };
    this.stats.itemsPopped += taken.items.length;
    return this.turns.popAnswer(taken, { requireAck: true, lockPerItem: next?.lockPerItem, includeHeaders: next?.includeHeaders });
  }
}
