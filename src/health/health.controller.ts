import { Controller, Get } from '@nestjs/common';
import { ApiProperty, ApiTags } from '@nestjs/swagger';
import { HealthCheck, HealthCheckResult, HealthCheckService, HealthIndicatorService } from '@nestjs/terminus';
import { Public } from '../auth/scopes.decorator.js';
import { ApiErrors } from '../common/api-errors.decorator.js';
import { DatabaseProvider } from '../database/database.provider.js';
import { UnitOfWork } from '../database/unit-of-work.js';

/** Liveness answer. */
export class LivenessDto {
  @ApiProperty({ example: 'healthy' })
  status: string;
  @ApiProperty({ type: 'integer', description: 'Seconds since the process started.' })
  uptime_seconds: number;
}

@ApiTags('operations')
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly indicator: HealthIndicatorService,
    private readonly db: DatabaseProvider,
    private readonly uow: UnitOfWork,
  ) {}

  /** 200 while the process runs. */
  @Get()
  @Public()
  live(): LivenessDto {
    return { status: 'healthy', uptime_seconds: Math.round(process.uptime()) };
  }

  /** 200 when the database answers within 3 s, else 503. */
  @Get('ready')
  @Public()
  // Above @HealthCheck(), so that it replaces the terminus schema of the 503: the filter answers it with the error body.
  @ApiErrors({ 503: ['SERVICE_UNAVAILABLE'] })
  @HealthCheck()
  ready(): Promise<HealthCheckResult> {
    return this.health.check([
      () =>
        this.indicator
          .check('database')
          .attempt(async () => {
            if (!this.db.isReady) throw new Error('the database is starting');
            await this.uow.ping();
          })
          .withTimeout(3000),
    ]);
  }
}
