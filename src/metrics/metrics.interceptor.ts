import { CallHandler, ExecutionContext, Injectable, NestInterceptor } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { Observable, tap } from 'rxjs';
import { PushpopError } from '../common/errors.js';
import { COUNTED_OPERATIONS } from '../common/operations.decorator.js';
import { MetricsService } from './metrics.service.js';

interface CountedBody {
  count?: number;
  items_acknowledged?: number;
}

/** The outcome label of a failed operation: its stable error_code, else a status class. */
function outcomeOf(error: unknown): string {
  if (error instanceof PushpopError) return error.errorCode;
  const status = (error as { status?: unknown }).status;
  return typeof status === 'number' && status < 500 ? 'CLIENT_ERROR' : 'INTERNAL_ERROR';
}

/** Counts and times every queue operation (handlers of controllers marked {@link CountedOperations}) by name; counts items moved. */
@Injectable()
export class MetricsInterceptor implements NestInterceptor {
  constructor(
    private readonly metrics: MetricsService,
    private readonly reflector: Reflector,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (!this.reflector.get<boolean>(COUNTED_OPERATIONS, context.getClass())) return next.handle();
    const operation = context.getHandler().name;
    const stop = this.metrics.operationDuration.startTimer({ operation });
    return next.handle().pipe(
      tap({
        next: (body: unknown) => {
          stop();
          this.metrics.operations.inc({ operation, outcome: 'ok' });
          this.countItems(operation, (body ?? {}));
        },
        error: (error: unknown) => {
          stop();
          const outcome = outcomeOf(error);
          this.metrics.operations.inc({ operation, outcome });
          if (operation === 'acknowledge') this.metrics.acknowledgements.inc({ result: outcome });
        },
      }),
    );
  }

  private countItems(operation: string, body: CountedBody): void {
    if (operation === 'push') this.metrics.itemsPushed.inc();
    else if (operation === 'pushBatch') this.metrics.itemsPushed.inc(body.count ?? 0);
    else if (operation === 'pop') this.metrics.itemsPopped.inc(body.count ?? 0);
    else if (operation === 'acknowledge') {
      this.metrics.acknowledgements.inc({ result: 'ok' });
      this.metrics.itemsAcknowledged.inc(body.items_acknowledged ?? 0);
    }
  }
}
