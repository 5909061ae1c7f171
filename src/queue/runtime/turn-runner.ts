import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { AppConfig } from '../../config/app-config.js';
import type { PushOutcome } from '../core/outcomes.js';
import { pushOp } from '../core/queue-ops.js';
import type { NewItem, SegmentFetch } from '../core/types.js';
import { ActorRegistry } from './actor-registry.js';
import { AfterCommit } from './after-commit.js';
import { QueueEvents } from './queue-events.js';
import { QueueStats } from './queue-stats.js';
import { NO_OBSERVER, RUNTIME_OBSERVER, type RuntimeObserver } from './runtime-observer.js';
import { TurnAttempt } from './turn-attempt.js';
import { TurnLines, type InTurnCommit, type Pending } from './turn-lines.js';
import type { OutcomeOf, TurnOp } from './turn-op.js';
import { TRACING, turnTrace, type Tracing } from '../../telemetry/tracing.js';

export type { TurnOp } from './turn-op.js';
export { QueueLineFull, type InTurnCommit } from './turn-lines.js';

/**
 * Turns of their own a backlog of due delayed items may take before the waiting operations
 * run anyway (each turn moves up to MAX_DUE_PER_TURN items).
 */
const MAX_BACKLOG_TURNS = 100;

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * The turn runner: every operation on a queue runs here, as part of a turn of the queue's actor.
 * It coordinates the parts of a turn:
 *
 * - **the line** ({@link TurnLines}): the operation waits in its queue's line; one turn at a time
 *   per queue in this process takes every operation waiting, up to a bound (group commit);
 * - **the attempts** ({@link TurnAttempt}): the steps at the turn's start (due delayed items,
 *   expired locks) and then the operations run in arrival order against the queue's core, which
 *   decides everything in memory; the turn's changes are written in one statement, applied only
 *   if the queue's row still has the version the core was computed from, else attempted again;
 * - **hand-off**: a push joining its queue's line brings the queue's waiting long polls in
 *   behind it ({@link QueueEvents.handOff}), so the push's turn hands them its items;
 * - **after the commit** ({@link AfterCommit}): only then does any operation get its outcome (a
 *   refusal is an outcome like any other); counters, logs, wake-ups and notifications follow;
 * - **the offload carriage** (`OffloadCarriage`, used by the last two): segments saved to the
 *   offload store before the write and deleted from it after.
 *
 * **Delayed items** due at the turn's `now` are moved to their priorities first. If more are due
 * than one turn moves, the turn writes only that and the operations wait for the next turn, so
 * that nothing pushed later overtakes an item that was due (up to {@link MAX_BACKLOG_TURNS}
 * such turns; then the operations run anyway).
 */
@Injectable()
export class TurnRunner {
  private readonly logger = new Logger('TurnRunner');
  private readonly lines: TurnLines;
  private readonly dedupWindowMs: number;

  constructor(
    config: AppConfig,
    registry: ActorRegistry,
    private readonly attempts: TurnAttempt,
    private readonly afterCommit: AfterCommit,
    private readonly stats: QueueStats,
    events: QueueEvents,
    @Optional() @Inject(RUNTIME_OBSERVER) private readonly observer: RuntimeObserver = NO_OBSERVER,
    @Optional() @Inject(TRACING) private readonly tracing?: Tracing,
  ) {
    this.dedupWindowMs = config.env.DEDUP_WINDOW_SECONDS * 1000;
    this.lines = new TurnLines(
      config.env.MAX_PENDING_PER_QUEUE,
      registry.turns,
      (queueId, batch) => this.turn(queueId, batch),
      (queueId, error) => this.logger.error(`Turn of queue ${queueId} failed unexpectedly: ${message(error)}`),
      // A push hands its items to the queue's waiting long polls in its own turn.
      (queueId, op) => (op.kind === 'push' ? events.handOff(queueId, op.items.filter((item) => !item.delayMs).length) : []),
    );
  }

  /**
   * Runs an operation in a turn of the queue's actor and answers with its outcome once the turn committed.
   * @param inCommit - statements that commit in the turn's transaction, or not at all (see {@link InTurnCommit})
   * @throws QueueLineFull when `MAX_PENDING_PER_QUEUE` operations already wait on the queue
   */
  run<O extends TurnOp>(queueId: string, op: O, inCommit?: InTurnCommit): Promise<OutcomeOf<O>> {
    return new Promise<OutcomeOf<O>>((resolve, reject) => {
      const trace = this.tracing?.currentContext();
      const pending: Pending = inCommit ? { op, resolve, reject, trace, inCommit } : { op, resolve, reject, trace };
      this.lines.add(queueId, pending);
    });
  }

  /**
   * The one way items are pushed, whoever pushes them (an HTTP push or batch push, a schedule's
   * firing, the carrier of SQL-enqueued rows): a turn with the core's push operation (all or
   * nothing and in order, dedup ids checked in the turn within `DEDUP_WINDOW_SECONDS`), counted
   * in `pushpop_items_pushed_total` and `pushpop_duplicates_skipped_total` once it committed.
   * It joins the line in the calling tick, as {@link run} does.
   * @param inCommit - statements that commit with the push or not at all: the carrier's deletion
   *   of the inbox rows it pushes, so that a carriage cut short did both or neither
   * @throws QueueLineFull when `MAX_PENDING_PER_QUEUE` operations already wait on the queue
   */
  async push(queueId: string, items: readonly NewItem[], inCommit?: InTurnCommit): Promise<PushOutcome> {
    const outcome = await this.run(queueId, pushOp(items, this.dedupWindowMs), inCommit);
    this.stats.pushed(outcome);
    return outcome;
  }

  /** Whether `MAX_PENDING_PER_QUEUE` operations already wait on the queue: {@link run} would refuse another. */
  isLineFull(queueId: string): boolean {
    return this.lines.isFull(queueId);
  }

  /** Operations waiting for a turn over all queues. */
  get waitingOperations(): number {
    return this.lines.waiting;
  }

  /** One turn over a batch of the queue's line: attempts, then what follows the commit; every operation of the batch is answered. */
  private async turn(queueId: string, batch: Pending[]): Promise<void> {
    const prefetched = new Map<string, SegmentFetch>();
    for (let backlogTurns = 0; ; backlogTurns++) {
      const started = performance.now();
      const attempted = await this.attempts.run(queueId, batch, backlogTurns >= MAX_BACKLOG_TURNS, prefetched);
      if (!attempted.ok) {
        this.observer.turnFinished((performance.now() - started) / 1000, false, batch.length);
        this.tracing?.turnFinished(turnTrace(queueId, batch, started, false, attempted.attempts));
        for (const pending of batch) pending.reject(attempted.error);
        return;
      }
      const { prepared } = attempted;
      if (!prepared.results) {
        // A backlog of due delayed items took this turn: the operations wait for the next one,
        // so nothing they push overtakes an item that was due before them.
        this.observer.turnFinished((performance.now() - started) / 1000, true, 0);
        await this.afterCommit.committed(queueId, [], prepared);
        continue;
      }
      this.observer.turnFinished((performance.now() - started) / 1000, true, batch.length);
      this.tracing?.turnFinished(turnTrace(queueId, batch, started, true, attempted.attempts, prepared.sql));
      await this.afterCommit.committed(queueId, batch, prepared);
      return;
    }
  }
}
