import { Controller, Get, Header, Res } from '@nestjs/common';
import { ApiOkResponse, ApiProduces, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { MetricsService } from './metrics.service.js';

@ApiTags('operations')
@Controller('metrics')
export class MetricsController {
  constructor(private readonly service: MetricsService) {}

  /** Prometheus text exposition; every name starts with `pushpop_`. */
  @Get()
  @Header('Cache-Control', 'no-store')
  @ApiProduces('text/plain')
  @ApiOkResponse({ description: 'Prometheus text format 0.0.4', schema: { type: 'string' } })
  async metrics(@Res() res: Response): Promise<void> {
    const { contentType, body } = await this.service.exposition();
    res.setHeader('Content-Type', contentType);
    res.send(body);
  }
}
