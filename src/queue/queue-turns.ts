import { randomFillSync } from 'node:crypto';
import { Inject, Injectable, Optional } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { QueueBusyError, ValidationFailedError } from '../common/errors.js';
import type { PopAck, PopOutcome } from './core/queue-core.js';
import { releaseOp } from './core/queue-ops.js';
import type { PushOutcome } from './core/outcomes.js';
import type { NewItem } from './core/types.js';
import type { PopResponseDto } from './dto/queue-responses.dto.js';
import { QueueMapper } from './queue.mapper.js';
import { QueueStats } from './runtime/queue-stats.js';
import { TurnRunner } from './runtime/turn-runner.js';
import type { OutcomeOf, TurnOp } from './runtime/turn-op.js';
import { TRACING, type Tracing } from '../telemetry/tracing.js';

/** Random bytes for 128 lock ids, drawn at once: a call into the system's generator per lock cost a pop with ack about a fortieth of its CPU. */
const lockIdBytes = Buffer.alloc(8 * 128);
/** Where the next lock id's bytes start in {@link lockIdBytes}; at its end, it is filled again. */
let lockIdAt = lockIdBytes.length;

/** A lock id: 8 random bytes as 11 URL-safe characters, as seed 004's token_urlsafe(8). Each byte is used once. */
export const newLockId = (): string => {
  if (lockIdAt === lockIdBytes.length) {
    randomFillSync(lockIdBytes);
    lockIdAt = 0;
  }
  lockIdAt += 8;
  return lockIdBytes.toString('base64url', lockIdAt - 8, lockIdAt);
};

/** How a pop hands its items out: under a lock (or a lock per item), with their headers. */
export interface PopHow {
  readonly requireAck: boolean;
  /** Each item under a lock of its own (with `requireAck`, shared lock mode). Absent: false. */
  readonly lockPerItem?: boolean;
  /** Answer the items' headers too. Absent: false. */
  readonly includeHeaders?: boolean;
}

/**
 * What the queue services share: running an operation in a turn of its queue, the lock a pop
 * asks for, and a pop's answer (counted, and its items linked to the request's trace).
 */
@Injectable()
export class QueueTurns {
  constructor(
    private readonly config: AppConfig,
    private readonly runner: TurnRunner,
    private readonly stats: QueueStats,
    @Optional() @Inject(TRACING) private readonly tracing?: Tracing,
  ) {}

  /** Runs an operation in a turn of the queue's actor; 429 QUEUE_BUSY when too many operations wait on the queue already. */
  run<O extends TurnOp>(queueId: string, op: O): Promise<OutcomeOf<O>> {
    // Checked and queued in the same tick: nothing can join the line in between.
    if (this.runner.isLineFull(queueId)) throw new QueueBusyError(queueId);
    return this.runner.run(queueId, op);
  }

  /** A push turn (`TurnRunner.push`: the core's push operation, counted), refused as {@link run} refuses when the queue's line is full. */
  push(queueId: string, items: readonly NewItem[]): Promise<PushOutcome> {
    if (this.runner.isLineFull(queueId)) throw new QueueBusyError(queueId);
    return this.runner.push(queueId, items);
  }

  /** The lock a pop with ack of up to `depth` items asks for (a new id, or one per item), held for `ttlSeconds`. */
  ack(depth: number, ttlSeconds: number, lockPerItem = false): PopAck {
    const maxLocks = this.config.env.MAX_LOCKS_PER_QUEUE;
    const lock = { lockId: newLockId(), ttlMs: ttlSeconds * 1000, maxLocks };
    return lockPerItem ? { ...lock, itemLockIds: Array.from({ length: depth }, newLockId) } : lock;
  }

  /**
   * Gives back at once (no retry delay) the items a pop took under a lock or locks for a client
   * that went away meanwhile: nobody will receive the locks' ids. Not refused when the queue's
   * line is full: the items must not wait out their TTL.
   */
  async giveBackUnreceived(queueId: string, outcome: Extract<PopOutcome, { items: unknown }>): Promise<void> {
    const lockIds = outcome.locks ? outcome.locks.map((l) => l.lockId) : outcome.lock ? [outcome.lock.lockId] : [];
    if (lockIds.length > 0) await this.runner.run(queueId, releaseOp(lockIds, { delayMs: 0 }));
  }

  /** The lock (or locks) a pop asks for; none without `requireAck`, and `lockPerItem` without it is 400. */
  popAck(options: PopHow & { readonly depth: number; readonly ttlSeconds: number }): PopAck | undefined {
    if (options.lockPerItem && !options.requireAck) throw new ValidationFailedError('lock_per_item needs require_ack=true');
    return options.requireAck ? this.ack(options.depth, options.ttlSeconds, options.lockPerItem) : undefined;
  }

  /** A pop's answer; one limited by a delivery limit is counted by its reason. */
  popAnswer(outcome: Extract<PopOutcome, { items: unknown }>, how: PopHow): PopResponseDto {
    if (outcome.limited) this.stats.popsLimited[outcome.limited] += 1;
    if (outcome.paused) this.stats.pausedPops += 1;
    if (this.tracing && outcome.items.length > 0) this.tracing.linkItems(outcome.items.map((i) => i.headers));
    return QueueMapper.pop(outcome, how.requireAck, how.includeHeaders === true);
  }
}
