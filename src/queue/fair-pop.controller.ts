import { Controller, HttpCode, Post, Query, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { ApiTags } from '@nestjs/swagger';
import { Scopes } from '../auth/scopes.decorator.js';
import { ApiErrors, AUTH_ERRORS } from '../common/api-errors.decorator.js';
import { CountedOperations } from '../common/operations.decorator.js';
import { DatabaseReadyGuard } from '../database/database-ready.guard.js';
import { FairPopQueryDto, FairPopResponseDto } from './dto/fair-pop.dto.js';
import { FairPopService } from './fair-pop.service.js';
import { answerPop, popOptions } from './pop-request.js';

/** Fair pops over the queues under a prefix; validation only, the service does the work. */
@ApiTags('queues')
@Controller()
@CountedOperations()
@UseGuards(DatabaseReadyGuard)
export class FairPopController {
  constructor(private readonly fair: FairPopService) {}

  /**
   * Pops up to `depth` items from one of the queues whose ids start with `prefix`, taking the
   * queues that have items to hand out in turn (round robin in queue id order), and answers
   * which one as `queue_id`; the items and their lock are that queue's, as for a queue pop.
   * Queues that are paused, limited (`max_in_flight`, `max_pops_per_second`), held by an
   * exclusive lock or hold only delayed items are passed over, never waited on, never 423.
   * Nothing found: no items and no `queue_id`. `wait_seconds` waits for a push to any queue
   * under the prefix, one created meanwhile included.
   */
  @Post('queues/pop')
  @Scopes('consume')
  @ApiErrors({ 400: ['VALIDATION_FAILED'], 503: ['STORE_UNAVAILABLE'] }, AUTH_ERRORS)
  @HttpCode(200)
  async popFair(@Query() query: FairPopQueryDto, @Res({ passthrough: true }) reply: FastifyReply): Promise<FairPopResponseDto> {
    const options = popOptions(query);
    return answerPop(reply, options, (clientGone) => this.fair.pop(query.prefix, options, clientGone));
  }
}
