import { DynamicModule, Module } from '@nestjs/common';
import { AdminModule } from './admin/admin.module.js';
import { AuthModule } from './auth/auth.module.js';
import { CommonModule } from './common/common.module.js';
import { ConfigModule } from './config/config.module.js';
import type { Environment } from './config/environment.js';
import { DatabaseModule } from './database/database.module.js';
import { DedupModule } from './dedup/dedup.module.js';
import { DelayModule } from './delay/delay.module.js';
import { EnqueueModule } from './enqueue/enqueue.module.js';
import { HealthModule } from './health/health.module.js';
import { LockModule } from './lock/lock.module.js';
import { MetricsModule } from './metrics/metrics.module.js';
import { ObserversModule } from './metrics/observers.module.js';
import { QueueModule } from './queue/queue.module.js';
import { SchedulesModule } from './schedules/schedules.module.js';
import { TelemetryModule } from './telemetry/telemetry.module.js';
import type { Tracing } from './telemetry/tracing.js';

@Module({})
export class AppModule {
  /** The whole service; `overrides` replace environment variables (tests); `tracing`: on when given (see `startTracing`). */
  static forRoot(overrides: Partial<Record<keyof Environment, string>> = {}, tracing?: Tracing): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ConfigModule.forRoot(overrides),
        TelemetryModule.forRoot(tracing),
        CommonModule,
        ObserversModule,
        AuthModule,
        DatabaseModule,
        QueueModule,
        LockModule,
        DelayModule,
        DedupModule,
        SchedulesModule,
        EnqueueModule,
        HealthModule,
        MetricsModule,
        AdminModule.forRoot(),
      ],
    };
  }
}
