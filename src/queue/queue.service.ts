import { Injectable } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { Clock } from '../common/clock.js';
import {
  LockModeChangeError,
  QueueLockedError,
  QueueNotEmptyError,
  QueueNotFoundError,
  SegmentUnavailableError,
  StateKeyNotFoundError,
  TooManyLocksError,
  ValidationFailedError,
} from '../common/errors.js';
import { QueueListingRepository } from '../storage/queue-listing.repository.js';
import { deleteQueueOp, popOp, redriveOp } from './core/queue-ops.js';
import type { NewItem, SettingsPatch } from './core/types.js';
import type { PopOutcome } from './core/queue-core.js';
import type {
  DeleteQueueResponseDto,
  PopResponseDto,
  PushBatchResponseDto,
  PushResponseDto,
  QueueInfoDto,
  QueueListDto,
  QueueSettingsDto,
  RedriveResponseDto,
} from './dto/queue-responses.dto.js';
import { MAX_DELAY_SECONDS } from './dto/push-item.dto.js';
import { encodeHeaders, encodeItem } from './item-codec.js';
import { QueueEvents } from './runtime/queue-events.js';
import { isQueueId } from './core/queue-id.js';
import { QueueMapper } from './queue.mapper.js';
import { QueueStats } from './runtime/queue-stats.js';
import { QueueWakeUps } from './runtime/queue-wake-ups.js';
import type { OutcomeOf, TurnOp } from './runtime/turn-op.js';
import { QueueTurns, type PopHow } from './queue-turns.js';

export interface PopOptions extends PopHow {
  depth: number;
  ttlSeconds: number;
  waitSeconds: number;
}

/** What a push may ask for besides its item and priority. */
export interface PushOptions {
  /** Seconds before the item becomes visible (0-31536000; the DTO checks the range). */
  delaySeconds?: number;
  /** When the item becomes visible, unix seconds (at most one year ahead; the past: at once). Not with `delaySeconds`. */
  deliverAt?: number;
  dedupId?: string;
  /** Headers of the item (checked by the DTO). */
  headers?: Record<string, string>;
  /** The request's W3C `traceparent`, kept as the header `traceparent` unless `headers` names one. */
  traceparent?: string;
}

/** A batch entry as the controller hands it over. */
export interface PushEntry {
  item: unknown;
  priority?: number;
  delay_seconds?: number;
  deliver_at?: number;
  dedup_id?: string;
  headers?: Record<string, string>;
}

/** Items one batch of a redrive moves at most: one turn, one statement, one transaction. */
export const REDRIVE_BATCH = 1000;
/**
 * Items never dead-lettered a redrive without a destination looks past at most (each later
 * batch takes them from the front and puts them back, so they cost every batch); a batch also
 * takes at most `REDRIVE_SEGMENTS_PER_BATCH` segments' worth (see the core's `Redrive`).
 */
export const REDRIVE_MAX_LEFT = 10_000;

/**
 * The queue operations of the HTTP contract. Each validates its input (so a bad request never
 * fails the operations it would have shared a turn with), describes the operation (plain data,
 * see `QueueOp`: the core decides, refusals included), runs it in a turn of the queue's actor,
 * and maps the outcome to the answer. Only here do outcomes become HTTP
 * errors: the core and the runtime refuse with coded results, never with an HTTP error.
 */
@Injectable()
export class QueueService {
  constructor(
    private readonly config: AppConfig,
    private readonly turns: QueueTurns,
    private readonly clock: Clock,
    private readonly events: QueueEvents,
    private readonly listing: QueueListingRepository,
    private readonly stats: QueueStats,
    private readonly wakeUps: QueueWakeUps,
  ) {}

  private turn<O extends TurnOp>(queueId: string, op: O): Promise<OutcomeOf<O>> {
    return this.turns.run(queueId, op);
  }

  private checkPriority(priority: number | undefined, field = 'priority'): number {
    const p = priority ?? 0;
    if (p > this.config.env.MAX_PRIORITY) throw new ValidationFailedError(`${field} must not be greater than ${this.config.env.MAX_PRIORITY}`);
    return p;
  }

  /**
   * Milliseconds before an item becomes visible: `delaySeconds`, or until `deliverAt` (0 when
   * it has passed). Both at once, or a `deliverAt` more than a year ahead, is 400.
   */
  private delayMsOf(options: PushOptions, field?: string): number {
    const name = (f: string) => (field ? `${field}.${f}` : f);
    if (options.deliverAt === undefined) return (options.delaySeconds ?? 0) * 1000;
    if (options.delaySeconds !== undefined) throw new ValidationFailedError(`${name('delay_seconds')} and ${name('deliver_at')} must not be given together`);
    const delayMs = Math.max(0, Math.ceil(options.deliverAt * 1000 - this.clock.now()));
    if (delayMs > MAX_DELAY_SECONDS * 1000) throw new ValidationFailedError(`${name('deliver_at')} must not be more than ${MAX_DELAY_SECONDS} seconds ahead`);
    return delayMs;
  }

  /** An item as the core takes it; without headers, delay or dedup id exactly `{priority, json}`, as before. */
  private newItem(item: unknown, priority: number | undefined, options: PushOptions, field?: string): NewItem {
    const plain = {
      priority: this.checkPriority(priority, field ? `${field}.priority` : 'priority'),
      json: encodeItem(item, this.config.env.MAX_ITEM_BYTES, field ? `${field}.item` : 'item'),
    };
    const headers =
      options.headers === undefined && options.traceparent === undefined
        ? undefined
        : encodeHeaders(options.headers, options.traceparent, field ? `${field}.headers` : 'headers');
    const entry = headers === undefined ? plain : { ...plain, headers };
    const delayMs = this.delayMsOf(options, field);
    if (!delayMs && options.dedupId === undefined) return entry;
    return { ...entry, delayMs, dedupId: options.dedupId };
  }

  /**
   * Pushes one item, at once or after a delay. With a dedup id, the check and the push are one
   * turn and one write: an id is accepted exactly once per window, across processes too.
   */
  async push(queueId: string, item: unknown, priority: number | undefined, options: PushOptions = {}): Promise<PushResponseDto> {
    const entry = this.newItem(item, priority, options);
    const delayMs = entry.delayMs ?? 0;
    const outcome = await this.turns.push(queueId, [entry]);
    return QueueMapper.push(queueId, entry.priority, {
      delaySeconds: delayMs > 0 ? Math.ceil(delayMs / 1000) : undefined,
      dedup: entry.dedupId !== undefined,
      duplicate: outcome.duplicates > 0,
    });
  }

  /**
   * Pushes 1-1000 items, all or nothing, in order; entries with a duplicate dedup id are skipped.
   * `traceparent`: the request's, kept with every entry that sets none.
   */
  async pushBatch(queueId: string, entries: PushEntry[], traceparent?: string): Promise<PushBatchResponseDto> {
    const items = entries.map((entry, i) =>
      this.newItem(
        entry.item,
        entry.priority,
        { delaySeconds: entry.delay_seconds, deliverAt: entry.deliver_at, dedupId: entry.dedup_id, headers: entry.headers, traceparent },
        `items.${i}`,
      ),
    );
    const outcome = await this.turns.push(queueId, items);
    return QueueMapper.pushBatch(queueId, outcome.enqueued, outcome.duplicates);
  }

  /**
   * Pops, optionally under a new lock. While an unexpired lock exists every pop answers 423.
   *
   * A long poll (`waitSeconds` > 0) is registered before it first looks at the queue, so that no
   * wake-up is lost between that look and the wait. Its first look is shared with the other
   * polls arriving meanwhile (one statement, see {@link QueueWakeUps.needsTurn}); only if the
   * queue may hold something does it run a turn. While the queue is empty it waits outside the
   * turn and costs nothing; woken (items arrived), it tries again in an ordinary turn. At the
   * end of its wait, or at shutdown, it answers empty without another turn: nothing woke it, so
   * nothing arrived that this process knows of. Past `MAX_WAITING_POLLS` it answers at once.
   * A long poll whose client went away (`clientGone`) stops waiting, and takes nothing more:
   * the pop operation carries the signal and takes nothing once it is set, and a lock made in
   * the turn during which the client left (nobody will receive its id) is released at once,
   * without delay (a release with `delayMs` 0), rather than holding the items for its TTL.
   */
  async pop(queueId: string, options: PopOptions, clientGone?: AbortSignal): Promise<PopResponseDto> {
    const ack = this.turns.popAck(options);
    const poll = options.waitSeconds > 0 ? this.events.register(queueId, clientGone) : undefined;
    const deadline = this.clock.now() + (poll ? options.waitSeconds * 1000 : 0);
    const take = popOp(options.depth, ack, clientGone);
    try {
      // Found empty by the first look: what a turn on the empty queue would have taken. Not for
      // locks per item: only a turn knows whether the queue's lock mode allows them.
      const look = poll && !options.lockPerItem && !(await this.wakeUps.needsTurn(queueId));
      // What the first look found, or the outcome of the pop a push's turn ran for this poll.
      let looked: PopOutcome | undefined = look ? { items: [] } : undefined;
      for (;;) {
        const outcome = looked ?? (await this.turn(queueId, take));
        if ('perItemRefused' in outcome) throw new ValidationFailedError('lock_per_item needs a queue in lock_mode shared');
        if ('locked' in outcome) throw new QueueLockedError(outcome.locked.expiresAt);
        if ('busy' in outcome) throw new TooManyLocksError(queueId, ack!.maxLocks!);
        if ('unavailable' in outcome) throw new SegmentUnavailableError(queueId, outcome.unavailable.priority, outcome.unavailable.segment);
        looked = undefined;
        if (clientGone?.aborted && options.requireAck && outcome.items.length > 0) {
          await this.turns.giveBackUnreceived(queueId, outcome);
          return this.turns.popAnswer({ items: [] }, options);
        }
        this.stats.itemsPopped += outcome.items.length;
        const remaining = deadline - this.clock.now();
        if (!poll || outcome.items.length > 0 || remaining <= 0) return this.turns.popAnswer(outcome, options);
        // Waiting for pop budget: it comes with time, not with a wake-up, so the poll looks again when it is due.
        const retryInMs = 'retryInMs' in outcome ? outcome.retryInMs : undefined;
        // Waiting for items (not for budget), it offers its pop to a push's turn (see QueueEvents.handOff).
        const end = await poll.wait(retryInMs !== undefined ? Math.min(remaining, retryInMs) : remaining, retryInMs === undefined ? take : undefined);
        if (end === 'joined') {
          looked = ((await poll.joined) as PopOutcome | undefined) ?? { items: [] };
          continue;
        }
        if (end === 'woken' || (end === 'timeout' && retryInMs !== undefined && deadline - this.clock.now() > 0)) continue;
        // Nothing came for the whole wait: the next poll on the queue may skip its first look.
        if (end === 'timeout' && outcome.items.length === 0 && !('paused' in outcome && outcome.paused) && !('limited' in outcome && outcome.limited))
          poll.waitedInVain();
        // A wait on a paused queue that ran out looks once more: the queue may have been resumed
        // meanwhile with nothing to hand out (no wake-up then), and the answer must not say paused.
        if (end === 'timeout' && 'paused' in outcome && outcome.paused) {
          const last = await this.turn(queueId, take);
          if ('items' in last) {
            this.stats.itemsPopped += last.items.length;
            return this.turns.popAnswer(last, options);
          }
        }
        return this.turns.popAnswer(outcome, options);
      }
    } finally {
      poll?.close();
    }
  }

  /** The queue's settings; 404 for a queue that does not exist. */
  async getSettings(queueId: string): Promise<QueueSettingsDto> {
    const settings = await this.turn(queueId, { kind: 'getSettings' });
    if (!settings) throw new QueueNotFoundError(queueId);
    return QueueMapper.settings(settings);
  }

  /**
   * Changes a queue's settings, creating the queue if need be. The request's own rules (ranges,
   * a dead-letter queue that is a queue id and not the queue itself) are checked here; the rules
   * that depend on the queue (`max_deliveries` needs a dead-letter queue, layout and lock mode
   * changes, the retry delay within its maximum) are the core's (`changeSettings`), judged
   * against the settings as they will be after the change.
   */
  async putSettings(queueId: string, patch: SettingsPatch): Promise<QueueSettingsDto> {
    if (patch.deadLetterQueue === queueId) throw new ValidationFailedError('dead_letter_queue must not be the queue itself');
    if (patch.deadLetterQueue !== undefined && patch.deadLetterQueue !== null && !isQueueId(patch.deadLetterQueue)) {
      throw new ValidationFailedError('dead_letter_queue must be a queue id: 1-200 characters of A-Z a-z 0-9 . _ : @ -, and not . or ..');
    }
    const result = await this.turn(queueId, { kind: 'putSettings', patch });
    if ('refused' in result) {
      if (result.refused === 'NEEDS_DEAD_LETTER_QUEUE') throw new ValidationFailedError('max_deliveries needs dead_letter_queue');
      if (result.refused === 'QUEUE_NOT_EMPTY') throw new QueueNotEmptyError(queueId);
      if (result.refused === 'RETRY_DELAY_ABOVE_MAX')
        throw new ValidationFailedError(`retry_delay_seconds (${result.delay}) must not be greater than retry_delay_max_seconds (${result.max})`);
      throw new LockModeChangeError(queueId, result.lockExpiresAt);
    }
    return QueueMapper.settings(result);
  }

  async getQueue(queueId: string): Promise<QueueInfoDto> {
    const view = await this.turn(queueId, { kind: 'view' });
    if (!view) throw new QueueNotFoundError(queueId);
    return QueueMapper.queueInfo(queueId, view);
  }

  /** The raw state under seed 003's key names (see the contract's state endpoint). */
  async getState(queueId: string, key: string): Promise<unknown> {
    const found = await this.turn(queueId, { kind: 'lookupState', queueId, key });
    if (found === 'not-found') throw new StateKeyNotFoundError(key);
    if ('unavailable' in found) throw new SegmentUnavailableError(queueId, found.unavailable.priority, found.unavailable.segment);
    return found.value;
  }

  async listQueues(prefix: string, limit: number, cursor: string | undefined): Promise<QueueListDto> {
    let after: string | undefined;
    if (cursor !== undefined && cursor !== '') {
      after = Buffer.from(cursor, 'base64url').toString('utf8');
      if (!isQueueId(after)) throw new ValidationFailedError('cursor is not a cursor this service returned');
    }
    const rows = await this.listing.listQueues(prefix, after, limit + 1);
    const page = rows.slice(0, limit);
    const next = rows.length > limit ? Buffer.from(page.at(-1)!.queueId, 'utf8').toString('base64url') : null;
    return QueueMapper.queueList(page, this.clock.now(), next);
  }

  /**
   * Redrive (see `Redrive` in the core): batches of up to {@link REDRIVE_BATCH} items, each a
   * turn of the queue whose one statement removes the items and adds them to their
   * destinations (locking the queues' rows in `queue_id` order, moving their versions on), so
   * every item moves exactly once even if the process dies between two batches. Items left in
   * place are looked past by the next batch (`skip`); if a consumer pops some of them meanwhile,
   * a later batch may leave a dead-lettered item in place, never move one twice.
   */
  async redrive(queueId: string, destination: string | undefined, maxItems: number): Promise<RedriveResponseDto> {
    if (destination === queueId) throw new ValidationFailedError('destination must not be the queue itself');
    if (destination !== undefined && !isQueueId(destination)) {
      throw new ValidationFailedError('destination must be a queue id: 1-200 characters of A-Z a-z 0-9 . _ : @ -, and not . or ..');
    }
    let moved = 0;
    let skip = 0;
    let left = 0;
    for (let first = true; moved < maxItems && skip < REDRIVE_MAX_LEFT; first = false) {
      const limit = Math.min(REDRIVE_BATCH, maxItems - moved);
      const request = { queueId, limit, skip, ...(destination !== undefined ? { destination } : {}) };
      const batch = await this.turn(queueId, redriveOp(request));
      if (!batch) {
        if (first) throw new QueueNotFoundError(queueId);
        break;
      }
      moved += batch.moved;
      skip += batch.left;
      left = batch.count;
      if (batch.done) break;
    }
    return QueueMapper.redrive(moved, left);
  }

  async deleteQueue(queueId: string): Promise<DeleteQueueResponseDto> {
    const deleted = await this.turn(queueId, deleteQueueOp());
    if (deleted === undefined) throw new QueueNotFoundError(queueId);
    return QueueMapper.deleteQueue(deleted);
  }
}
