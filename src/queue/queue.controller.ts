import { Body, Controller, Delete, Get, Headers, HttpCode, Param, Post, Put, Query, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { ApiHeader, ApiOkResponse, ApiParam, ApiTags } from '@nestjs/swagger';
import { PopQueryDto } from './dto/pop-query.dto.js';
import { PushBatchDto, PushItemDto } from './dto/push-item.dto.js';
import { ListQueuesQueryDto } from './dto/list-queues-query.dto.js';
import {
  AcknowledgeBatchResponseDto,
  ReleaseBatchResponseDto,
  AcknowledgeResponseDto,
  DeleteQueueResponseDto,
  ExtendLockResponseDto,
  ReleaseResponseDto,
  PopResponseDto,
  PushBatchResponseDto,
  PushResponseDto,
  QueueInfoDto,
  QueueListDto,
  QueueSettingsDto,
  RedriveResponseDto,
} from './dto/queue-responses.dto.js';
import { RedriveRequestDto } from './dto/redrive.dto.js';
import { QueueSettingsRequestDto } from './dto/queue-settings.dto.js';
import { Scopes } from '../auth/scopes.decorator.js';
import { ApiErrors, AUTH_ERRORS, BODY_ERRORS, COMMON_QUEUE_ERRORS, type ErrorCodes } from '../common/api-errors.decorator.js';
import { CountedOperations } from '../common/operations.decorator.js';
import {
  AcknowledgeBatchRequestDto,
  AcknowledgeRequestDto,
  ExtendLockRequestDto,
  type NextPopDto,
  ReleaseBatchRequestDto,
  ReleaseRequestDto,
} from './dto/lock.dto.js';
import { DatabaseReadyGuard } from '../database/database-ready.guard.js';
import { QueueIdPipe } from './queue-id.pipe.js';
import { QueueService } from './queue.service.js';
import { QueueLocksService, type NextPopOptions } from './queue-locks.service.js';
import { answerPop, popOptions, sendsStoredItems } from './pop-request.js';
import { requestTraceparent } from './item-codec.js';

/** What push and batch push answer about their items. */
const ITEM_ERRORS: ErrorCodes = { 400: ['ITEM_TOO_DEEP'], 413: ['ITEM_TOO_LARGE'] };

/** Items a redrive moves when `max_items` is not given. */
const DEFAULT_REDRIVE_ITEMS = 10_000;

/** What acknowledge, extend-lock and release answer about the lock, in the order they are checked. */
const LOCK_ERRORS: ErrorCodes = { 400: ['LOCK_ID_REQUIRED', 'INVALID_LOCK_ID'], 404: ['LOCK_NOT_FOUND'], 410: ['LOCK_EXPIRED'] };

/** What a release with `dead_letter` answers on a queue without a dead-letter queue (the lock's checks first). */
const DEAD_LETTER_ERRORS: ErrorCodes = { 409: ['NO_DEAD_LETTER_QUEUE'] };

/** The `next` of an acknowledgement as the service takes it. */
const nextPop = (next: NextPopDto | undefined): NextPopOptions | undefined =>
  next && { depth: next.depth, ttlSeconds: next.ttl_seconds, lockPerItem: next.lock_per_item, includeHeaders: next.include_headers };

const QUEUE_ID_PARAM = {
  name: 'queue_id',
  description: 'Queue id: 1-200 characters of A-Z a-z 0-9 . _ : @ -',
  example: 'orders',
};

/** W3C trace context of a push: kept as each item's header `traceparent` unless the item sets one. */
const TRACEPARENT_HEADER = {
  name: 'traceparent',
  required: false,
  description:
    "W3C trace context (`00-<trace id>-<span id>-<flags>`); kept as the item header `traceparent` unless the entry's `headers` set one. A malformed value is ignored.",
  example: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
};

/** The HTTP contract of the queues; validation only, the service does the work. */
@ApiTags('queues')
@Controller()
@CountedOperations()
@UseGuards(DatabaseReadyGuard)
export class QueueController {
  constructor(
    private readonly queues: QueueService,
    private readonly locks: QueueLocksService,
  ) {}

  /**
   * Pushes one item at a priority (default 0). A queue exists once something is pushed to it.
   * With `delay_seconds` (up to one year) or `deliver_at` (unix seconds) the item becomes visible
   * only then; with `dedup_id` a repeat within
   * `DEDUP_WINDOW_SECONDS` pushes nothing and answers `duplicate: true`.
   */
  @Post('queue/:queue_id/push')
  @Scopes('produce')
  @ApiErrors(COMMON_QUEUE_ERRORS, ITEM_ERRORS, BODY_ERRORS)
  @HttpCode(200)
  @ApiParam(QUEUE_ID_PARAM)
  @ApiHeader(TRACEPARENT_HEADER)
  async push(
    @Param('queue_id', QueueIdPipe) queueId: string,
    @Body() body: PushItemDto,
    @Headers('traceparent') traceparent?: string,
  ): Promise<PushResponseDto> {
    return this.queues.push(queueId, body.item, body.priority, {
      delaySeconds: body.delay_seconds,
      deliverAt: body.deliver_at,
      dedupId: body.dedup_id,
      headers: body.headers,
      traceparent: requestTraceparent(traceparent),
    });
  }

  /**
   * Pushes 1-1000 items, all or nothing, in the given order. Entries take `delay_seconds`,
   * `deliver_at` and `dedup_id` as a single push does; `duplicates` counts the entries skipped as duplicates.
   */
  @Post('queue/:queue_id/push/batch')
  @Scopes('produce')
  @ApiErrors(COMMON_QUEUE_ERRORS, ITEM_ERRORS, BODY_ERRORS)
  @HttpCode(200)
  @ApiParam(QUEUE_ID_PARAM)
  @ApiHeader(TRACEPARENT_HEADER)
  async pushBatch(
    @Param('queue_id', QueueIdPipe) queueId: string,
    @Body() body: PushBatchDto,
    @Headers('traceparent') traceparent?: string,
  ): Promise<PushBatchResponseDto> {
    return this.queues.pushBatch(queueId, body.items, requestTraceparent(traceparent));
  }

  /**
   * Pops up to `depth` items: lowest priority number first, FIFO within a priority. An empty
   * queue answers 200 with no items. With `require_ack` the items are held by a lock until
   * acknowledged, released or expired. A paused queue answers no items and `paused: true`
   * (before any 423); a delivery limit with no room (`max_in_flight`, pops with ack) or no
   * budget (`max_pops_per_second`) answers no items and `limited: true`. A long poll waits
   * through both: for the resume, the room or the budget.
   */
  @Post('queue/:queue_id/pop')
  @Scopes('consume')
  @ApiErrors(COMMON_QUEUE_ERRORS, { 423: ['QUEUE_LOCKED'] })
  @HttpCode(200)
  @ApiParam(QUEUE_ID_PARAM)
  async pop(
    @Param('queue_id', QueueIdPipe) queueId: string,
    @Query() query: PopQueryDto,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<PopResponseDto> {
    const options = popOptions(query);
    return answerPop(reply, options, (clientGone) => this.queues.pop(queueId, options, clientGone));
  }

  /**
   * Acknowledges a lock: its items are gone for good. Checked in this order: lock_id given
   * (400 LOCK_ID_REQUIRED), a lock exists (404 LOCK_NOT_FOUND), not expired (410
   * LOCK_EXPIRED), id matches (400 INVALID_LOCK_ID; the lock stays). With `next`, when the
   * acknowledgement succeeds, the same request then pops the queue with `require_ack=true` and
   * those parameters, without waiting, in the same turn, and answers that pop's answer as `next`;
   * an invalid `next` is 400 before anything is acknowledged.
   */
  @Post('queue/:queue_id/acknowledge')
  @Scopes('consume')
  @ApiErrors(COMMON_QUEUE_ERRORS, LOCK_ERRORS, BODY_ERRORS)
  @HttpCode(200)
  @ApiParam(QUEUE_ID_PARAM)
  async acknowledge(
    @Param('queue_id', QueueIdPipe) queueId: string,
    @Body() body: AcknowledgeRequestDto,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<AcknowledgeResponseDto> {
    if (body.next) sendsStoredItems(reply);
    return this.locks.acknowledge(queueId, body.lock_id, nextPop(body.next));
  }

  /**
   * Acknowledges 1-1000 distinct locks as one operation: the acknowledged ones commit together.
   * `results` answers each lock id, in the request's order, with the status and `error_code` the
   * single acknowledge would answer for it. With `next`, when at least one lock was
   * acknowledged, then pops as the single acknowledge does.
   */
  @Post('queue/:queue_id/acknowledge/batch')
  @Scopes('consume')
  @ApiErrors(COMMON_QUEUE_ERRORS, BODY_ERRORS)
  @HttpCode(200)
  @ApiParam(QUEUE_ID_PARAM)
  async acknowledgeBatch(
    @Param('queue_id', QueueIdPipe) queueId: string,
    @Body() body: AcknowledgeBatchRequestDto,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<AcknowledgeBatchResponseDto> {
    if (body.next) sendsStoredItems(reply);
    return this.locks.acknowledgeBatch(queueId, body.lock_ids, nextPop(body.next));
  }

  /** Sets a lock's expiry to now + `ttl_seconds` (1-300, default 30). Errors as for acknowledge. */
  @Post('queue/:queue_id/extend-lock')
  @Scopes('consume')
  @ApiErrors(COMMON_QUEUE_ERRORS, LOCK_ERRORS, BODY_ERRORS)
  @HttpCode(200)
  @ApiParam(QUEUE_ID_PARAM)
  async extendLock(@Param('queue_id', QueueIdPipe) queueId: string, @Body() body: ExtendLockRequestDto): Promise<ExtendLockResponseDto> {
    return this.locks.extendLock(queueId, body.lock_id, body.ttl_seconds ?? 30);
  }

  /**
   * Gives a lock's items back, to the front of their original priorities, after the queue's
   * retry delay (or `delay_seconds`, 0-900, for this release); items that reached
   * `max_deliveries` go to the dead-letter queue. `items_delayed` counts the items waiting out
   * a delay. With `dead_letter: true` every item goes to the tail of the queue's
   * `dead_letter_queue` at once (409 `NO_DEAD_LETTER_QUEUE` without one; not with
   * `delay_seconds`). Errors as for acknowledge.
   */
  @Post('queue/:queue_id/release')
  @Scopes('consume')
  @ApiErrors(COMMON_QUEUE_ERRORS, LOCK_ERRORS, DEAD_LETTER_ERRORS, BODY_ERRORS)
  @HttpCode(200)
  @ApiParam(QUEUE_ID_PARAM)
  async release(@Param('queue_id', QueueIdPipe) queueId: string, @Body() body: ReleaseRequestDto): Promise<ReleaseResponseDto> {
    return this.locks.release(queueId, body.lock_id, { delaySeconds: body.delay_seconds, deadLetter: body.dead_letter });
  }

  /**
   * Releases 1-1000 distinct locks as one operation, each as the single release would (with
   * `delay_seconds` or `dead_letter` for all of them): the released ones commit together.
   * `results` answers each lock id in the request's order; the counts are their sums.
   */
  @Post('queue/:queue_id/release/batch')
  @Scopes('consume')
  @ApiErrors(COMMON_QUEUE_ERRORS, BODY_ERRORS)
  @HttpCode(200)
  @ApiParam(QUEUE_ID_PARAM)
  async releaseBatch(@Param('queue_id', QueueIdPipe) queueId: string, @Body() body: ReleaseBatchRequestDto): Promise<ReleaseBatchResponseDto> {
    return this.locks.releaseBatch(queueId, body.lock_ids, { delaySeconds: body.delay_seconds, deadLetter: body.dead_letter });
  }

  /** A queue's counts, segment pointers per priority, settings and lock. */
  @Get('queue/:queue_id')
  @Scopes('read')
  @ApiErrors(COMMON_QUEUE_ERRORS, { 404: ['QUEUE_NOT_FOUND'] })
  @ApiParam(QUEUE_ID_PARAM)
  async getQueue(@Param('queue_id', QueueIdPipe) queueId: string): Promise<QueueInfoDto> {
    return this.queues.getQueue(queueId);
  }

  /** The queue's settings: segment layout, lock mode, delivery limit and dead-letter queue, pause, retry delays and delivery limits. */
  @Get('queue/:queue_id/settings')
  @Scopes('read')
  @ApiErrors(COMMON_QUEUE_ERRORS, { 404: ['QUEUE_NOT_FOUND'] })
  @ApiParam(QUEUE_ID_PARAM)
  async getSettings(@Param('queue_id', QueueIdPipe) queueId: string): Promise<QueueSettingsDto> {
    return this.queues.getSettings(queueId);
  }

  /**
   * Changes any of the queue's settings (creating the queue if it does not exist) and answers
   * all of them. `segment_size` and `buffer_segments` change only while the queue holds no
   * items and no lock (409 `QUEUE_NOT_EMPTY`); `lock_mode` only while no lock lives (409
   * `QUEUE_LOCKED`); `max_deliveries` needs `dead_letter_queue`, which may not be the queue itself (400).
   * The controls (`paused`, retry delays, delivery limits) change at any time; a request is judged
   * by the settings it would leave, so `retry_delay_seconds` above the stored
   * `retry_delay_max_seconds` is 400 even when it names only one of them. A refused request changes nothing.
   */
  @Put('queue/:queue_id/settings')
  @Scopes('admin')
  @ApiErrors(COMMON_QUEUE_ERRORS, BODY_ERRORS, { 409: ['QUEUE_NOT_EMPTY', 'QUEUE_LOCKED'] })
  @ApiParam(QUEUE_ID_PARAM)
  async putSettings(@Param('queue_id', QueueIdPipe) queueId: string, @Body() body: QueueSettingsRequestDto): Promise<QueueSettingsDto> {
    return this.queues.putSettings(queueId, {
      segmentSize: body.segment_size,
      bufferSegments: body.buffer_segments,
      lockMode: body.lock_mode,
      maxDeliveries: body.max_deliveries,
      deadLetterQueue: body.dead_letter_queue,
      paused: body.paused,
      retryDelaySeconds: body.retry_delay_seconds,
      retryBackoff: body.retry_backoff,
      retryDelayMaxSeconds: body.retry_delay_max_seconds,
      maxInFlight: body.max_in_flight,
      maxPopsPerSecond: body.max_pops_per_second,
    });
  }

  /**
   * Raw state under seed 003's key names: `metadata`, `queue_<p>_seg_<n>` (a segment in the
   * actor's state) or `offloaded_queue_<p>_seg_<n>_<queue_id>` (a segment in the offload store).
   */
  @Get('queue/:queue_id/state/:key')
  @Scopes('read')
  @ApiErrors(COMMON_QUEUE_ERRORS, { 404: ['STATE_KEY_NOT_FOUND'] })
  @ApiParam(QUEUE_ID_PARAM)
  @ApiParam({ name: 'key', example: 'metadata' })
  @ApiOkResponse({
    description: 'The metadata document, or a segment as a JSON array of items',
    schema: {
      oneOf: [
        { type: 'object', additionalProperties: true },
        { type: 'array', items: { type: 'object', additionalProperties: true } },
      ],
    },
  })
  async getState(@Param('queue_id', QueueIdPipe) queueId: string, @Param('key') key: string): Promise<unknown> {
    return this.queues.getState(queueId, key);
  }

  /** Lists queues in id order, optionally by id prefix, a page at a time. */
  @Get('queues')
  @Scopes('read')
  @ApiErrors({ 400: ['VALIDATION_FAILED'], 503: ['STORE_UNAVAILABLE'] }, AUTH_ERRORS)
  async listQueues(@Query() query: ListQueuesQueryDto): Promise<QueueListDto> {
    return this.queues.listQueues(query.prefix ?? '', query.limit ?? 100, query.cursor);
  }

  /**
   * Moves up to `max_items` items (default 10000) from the front of the queue (lowest priority
   * first, FIFO) to the tail of their priority on `destination`, or, without one, back to the
   * queue each was dead-lettered from (items never dead-lettered stay where they are). Moved
   * items' delivery counts start again at 0; items held by live locks stay. Every item moves
   * exactly once, in batches of up to 1000 that each commit on their own: if the process dies
   * in the middle, the batches committed are moved and the rest is still on the queue.
   */
  @Post('queue/:queue_id/redrive')
  @Scopes('admin')
  @ApiErrors(COMMON_QUEUE_ERRORS, BODY_ERRORS, { 404: ['QUEUE_NOT_FOUND'] })
  @HttpCode(200)
  @ApiParam(QUEUE_ID_PARAM)
  async redrive(@Param('queue_id', QueueIdPipe) queueId: string, @Body() body: RedriveRequestDto): Promise<RedriveResponseDto> {
    return this.queues.redrive(queueId, body.destination, body.max_items ?? DEFAULT_REDRIVE_ITEMS);
  }

  /** Deletes a queue with all its segments, offloaded segments and lock. */
  @Delete('queue/:queue_id')
  @Scopes('admin')
  @ApiErrors(COMMON_QUEUE_ERRORS, { 404: ['QUEUE_NOT_FOUND'] })
  @ApiParam(QUEUE_ID_PARAM)
  async deleteQueue(@Param('queue_id', QueueIdPipe) queueId: string): Promise<DeleteQueueResponseDto> {
    return this.queues.deleteQueue(queueId);
  }
}
