import type { KeyedMutex } from '@pushpop/keyed-mutex';
import { captureAsyncContext, type AsyncContext } from '../../common/async-context.js';
import type { InTurnCommit } from '../../database/unit-of-work.js';
import type { TurnOp } from './turn-op.js';

export type { InTurnCommit } from '../../database/unit-of-work.js';

/** An operation waiting in its queue's line, and how to answer its caller. */
export interface Pending {
  readonly op: TurnOp;
  /**
   * Statements that commit in the transaction of the write of the turn that runs the operation,
   * or not at all (`TurnAttempt`: they run once the operations ran, after the write); one that
   * throws fails the turn, as a failed write does.
   */
  readonly inCommit?: InTurnCommit;
  /** With tracing on: the trace context the operation was asked for in. */
  readonly trace?: unknown;
  /**
   * Set when the operation joined a drain under way (which runs in the context of whoever
   * started it): runs a function in the operation's own async context, so that a turn led by
   * this operation runs in its caller's context, as a turn it started would.
   */
  context?: AsyncContext;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/**
 * {@link TurnLines.add} refused an operation: `MAX_PENDING_PER_QUEUE` operations already wait
 * on the queue. Nothing ran; the service answers 429 QUEUE_BUSY.
 */
export class QueueLineFull extends Error {
  constructor(readonly queueId: string) {
    super(`too many operations are waiting on queue ${queueId}`);
    this.name = 'QueueLineFull';
  }
}

/** Operations and items one turn takes from a queue's line at most. */
const MAX_TURN_OPERATIONS = 64;
const MAX_TURN_WEIGHT = 1000;

/** A turn of a queue over a batch of its line; it answers every operation of the batch itself. */
export type RunTurn = (queueId: string, batch: Pending[]) => Promise<void>;

/**
 * Operations that join the line right behind one just put in it, in the same tick (so that a
 * turn taking the one takes them too, bounds allowing): long polls handed a push's items.
 */
export type Joiners = (queueId: string, op: TurnOp) => Pending[];

/**
 * The queues' lines: where an operation waits for a turn of its queue, and the one place it
 * waits. A line exists while a drain of it is under way; the drain runs turns one after the
 * other, each taking every operation waiting then, up to a bound (group commit), until it finds
 * the line empty. An operation arriving at a queue without a line starts a drain, one arriving
 * at a line joins the next turn of that drain.
 *
 * A drain holds the queue's keyed mutex (`ActorRegistry.turns`) from its first turn to its last,
 * one pass for the whole drain: nothing else that takes the queue's mutex runs in between (the
 * idle sweep of actors leaves a queue whose mutex is held), and a drain started while the
 * mutex is still being released waits for it.
 */
export class TurnLines {
  private readonly lines = new Map<string, Pending[]>();

  /**
   * @param maxPending - operations one line holds at most (`MAX_PENDING_PER_QUEUE`)
   * @param turns - the queues' mutex, held by a drain
   * @param runTurn - runs one turn over a batch taken from the line
   * @param failed - told of a turn that threw instead of answering its operations (the drain goes on)
   * @param joiners - operations that join right behind an operation put in a line (not bounded by `maxPending`: they were waiting already)
   */
  constructor(
    private readonly maxPending: number,
    private readonly turns: KeyedMutex,
    private readonly runTurn: RunTurn,
    private readonly failed: (queueId: string, error: unknown) => void,
    private readonly joiners: Joiners = () => [],
  ) {}

  /**
   * Puts an operation in its queue's line, and those that join behind it (see {@link Joiners}),
   * starting a drain if none is under way.
   * @throws QueueLineFull when `maxPending` operations already wait on the queue
   */
  add(queueId: string, pending: Pending): void {
    const line = this.lines.get(queueId);
    if (line) {
      if (line.length >= this.maxPending) throw new QueueLineFull(queueId);
      pending.context = captureAsyncContext();
      line.push(pending, ...this.joiners(queueId, pending.op));
      return;
    }
    // Before the drain starts: its first turn takes the joiners with the operation.
    this.lines.set(queueId, [pending, ...this.joiners(queueId, pending.op)]);
    // Errors are caught turn by turn inside the drain; this catch is for a bug in the drain itself.
    this.turns.run(queueId, () => this.drain(queueId)).catch((error: unknown) => this.failed(queueId, error));
  }

  /** Whether `maxPending` operations already wait on the queue: {@link add} would refuse another. */
  isFull(queueId: string): boolean {
    const line = this.lines.get(queueId);
    return line !== undefined && line.length >= this.maxPending;
  }

  /** Operations waiting for a turn over all queues (not those of the turns under way). */
  get waiting(): number {
    let total = 0;
    for (const line of this.lines.values()) total += line.length;
    return total;
  }

  /** Runs turns until the line is empty, then drops it (in the same tick as the last look: nothing joins it in between). */
  private async drain(queueId: string): Promise<void> {
    const line = this.lines.get(queueId)!;
    while (line.length > 0) {
      const batch = [line.shift()!];
      let weight = batch[0].op.weight ?? 1;
      while (line.length > 0 && batch.length < MAX_TURN_OPERATIONS && !batch.at(-1)!.op.endsTurn && weight + (line[0].op.weight ?? 1) <= MAX_TURN_WEIGHT) {
        weight += line[0].op.weight ?? 1;
        batch.push(line.shift()!);
      }
      try {
        const context = batch[0].context;
        await (context ? context(() => this.runTurn(queueId, batch)) : this.runTurn(queueId, batch));
      } catch (error) {
        // A turn answers its operations itself; one that threw instead must not leave them waiting for ever.
        for (const pending of batch) pending.reject(error);
        this.failed(queueId, error);
      }
    }
    this.lines.delete(queueId);
  }
}
