import { Injectable } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { popOp } from './core/queue-ops.js';
import type { PopResponseDto } from './dto/queue-responses.dto.js';
import { withQueueId } from './pop-body.js';
import { QueueTurns } from './queue-turns.js';
import type { PopOptions } from './queue.service.js';
import { PrefixRotations } from './runtime/prefix-rotations.js';
import { QueueEvents } from './runtime/queue-events.js';
import { QueueStats } from './runtime/queue-stats.js';
import { TurnRunner } from './runtime/turn-runner.js';

/**
 * Candidates one fair pop tries at most before it answers empty (or, as a long poll, waits):
 * each is a turn of a queue that was ready when read but is paused, limited or locked now.
 */
export const MAX_CANDIDATES_PER_POP = 256;
/** A long poll of a fair pop looks again at least this often while it passed over queues that held items (a limit or a lock may lift with time). */
export const BLOCKED_RECHECK_MS = 1_000;
/** …and at least this often otherwise: the safety net for a notification lost while the listening connection was away. */
export const IDLE_RECHECK_MS = 5_000;

type SkipReason = keyof QueueStats['fairPopSkips'];

/** What one pass over the candidates found: items from one queue, or what it passed over. */
type Pass = { queueId: string; answer: PopResponseDto } | { blocked: boolean; retryInMs?: number };

/**
 * Fair pops over the queues under a prefix (`POST /queues/pop?prefix=`): each pop takes the next
 * ready queue of the prefix's round ({@link PrefixRotations}) and pops it in an ordinary turn of
 * that queue, so that its items, locks and limits are that queue's own. A candidate that turns
 * out to hand out nothing (emptied meanwhile, paused, limited by `max_in_flight` or
 * `max_pops_per_second`, or held by an exclusive lock) is passed over at once, never waited on
 * and never answered 423; the next one is tried, until a queue hands out items, the round comes
 * back to a queue read during this pop (every ready queue was tried), or
 * {@link MAX_CANDIDATES_PER_POP} were tried.
 *
 * A long poll registers on the prefix before its first look (see `QueueEvents.registerPrefix`),
 * so a push to any queue under the prefix that commits after that look, in this process or
 * another (its notification), or to a queue created meanwhile, wakes it.
 */
@Injectable()
export class FairPopService {
  constructor(
    private readonly turns: QueueTurns,
    private readonly runner: TurnRunner,
    private readonly rotations: PrefixRotations,
    private readonly events: QueueEvents,
    private readonly stats: QueueStats,
    private readonly clock: Clock,
  ) {}

  /** Pops from the next ready queue under `prefix`: a queue pop's answer plus `queue_id`, or no items (and no `queue_id`). */
  async pop(prefix: string, options: PopOptions, clientGone?: AbortSignal): Promise<PopResponseDto> {
    const poll = options.waitSeconds > 0 ? this.events.registerPrefix(prefix, clientGone) : undefined;
    const deadline = this.clock.now() + (poll ? options.waitSeconds * 1000 : 0);
    try {
      for (;;) {
        const pass = await this.pass(prefix, options, clientGone);
        if ('answer' in pass) {
          this.stats.fairPops.served += 1;
          return withQueueId(pass.answer, pass.queueId);
        }
        const remaining = deadline - this.clock.now();
        if (!poll || remaining <= 0 || clientGone?.aborted) break;
        const recheckMs = Math.min(pass.blocked ? BLOCKED_RECHECK_MS : IDLE_RECHECK_MS, pass.retryInMs ?? Infinity);
        if ((await poll.wait(Math.min(remaining, recheckMs))) === 'closed') break;
      }
    } finally {
      poll?.close();
    }
    this.stats.fairPops.empty += 1;
    return this.turns.popAnswer({ items: [] }, options);
  }

  /** One pass over the prefix's candidates, from where its round stands. */
  private async pass(prefix: string, options: PopOptions, clientGone?: AbortSignal): Promise<Pass> {
    const ack = this.turns.popAck(options);
    const take = popOp(options.depth, ack, clientGone);
    // Candidates read before this pass may miss queues that became ready since: the pass ends
    // when a candidate read during it comes round again (all the ring seen), or none is ready.
    const since = this.rotations.reads;
    const fresh = new Set<string>();
    let tries = 0;
    let blocked = false;
    let retryInMs: number | undefined;
    const skip = (reason: SkipReason): void => {
      this.stats.fairPopSkips[reason] += 1;
      if (reason !== 'empty') blocked = true;
    };
    while (tries < MAX_CANDIDATES_PER_POP && !clientGone?.aborted) {
      const candidate = await this.rotations.next(prefix);
      if (candidate === undefined) break;
      const { queueId } = candidate;
      if (candidate.read > since) {
        if (fresh.has(queueId)) break;
        fresh.add(queueId);
      }
      tries += 1;
      // Never waited on: a queue with a full line is as good as locked.
      if (this.runner.isLineFull(queueId)) {
        skip('busy');
        continue;
      }
      const outcome = await this.runner.run(queueId, take);
      if ('perItemRefused' in outcome) {
        skip('exclusive');
        continue;
      }
      if ('locked' in outcome) {
        skip('locked');
        continue;
      }
      if ('busy' in outcome || 'unavailable' in outcome) {
        skip('busy');
        continue;
      }
      if (outcome.items.length === 0) {
        if ('retryInMs' in outcome && outcome.retryInMs !== undefined) retryInMs = Math.min(retryInMs ?? Infinity, outcome.retryInMs);
        skip(outcome.paused ? 'paused' : outcome.limited ? 'limited' : 'empty');
        continue;
      }
      if (clientGone?.aborted && options.requireAck) {
        await this.turns.giveBackUnreceived(queueId, outcome);
        break;
      }
      this.stats.itemsPopped += outcome.items.length;
      return { queueId, answer: this.turns.popAnswer(outcome, options) };
    }
    return { blocked, ...(retryInMs !== undefined ? { retryInMs } : {}) };
  }
}
