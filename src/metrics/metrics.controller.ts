import { Controller, Get, Header, Res } from '@nestjs/common';
import { ApiOkResponse, ApiProduces, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { ScopesUnless } from '../auth/scopes.decorator.js';
import { ApiErrors, AUTH_ERRORS } from '../common/api-errors.decorator.js';
import { MetricsService } from './metrics.service.js';

@ApiTags('operations')
@Controller('metrics')
export class MetricsController {
  constructor(private readonly service: MetricsService) {}

  /** Prometheus text exposition; every name starts with `pushpop_`. */
  @Get()
  @ScopesUnless('METRICS_PUBLIC', 'read')
  @Header('Cache-Control', 'no-store')
  @ApiProduces('text/plain')
  @ApiOkResponse({ description: 'Prometheus text format 0.0.4', schema: { type: 'string' } })
  @ApiErrors(AUTH_ERRORS)
  async metrics(@Res({ passthrough: true }) reply: FastifyReply): Promise<string> {
    const { contentType, body } = await this.service.exposition();
    reply.type(contentType);
    return body;
  }
}
