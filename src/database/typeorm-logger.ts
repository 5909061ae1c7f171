import { Logger } from '@nestjs/common';
import type { Logger as TypeOrmLogger } from 'typeorm';

/**
 * TypeORM's log lines through Nest's logger, so that they take the service's format
 * (LOG_FORMAT=json included) instead of TypeORM's own console lines. Only failed statements are
 * written, as warnings with the statement and the database's message, never the statement's
 * parameters (items may hold personal data); everything else TypeORM reports is dropped, as it
 * was with `logging: ['error']` (the service logs its migrations itself).
 */
export class TypeOrmNestLogger implements TypeOrmLogger {
  private readonly logger = new Logger('TypeORM');

  logQueryError(error: string | Error, query: string): void {
    const message = error instanceof Error ? error.message : error;
    this.logger.warn(`query failed: ${query.replace(/\s+/g, ' ').trim()}: ${message}`);
  }

  logQuery(): void {}
  logQuerySlow(): void {}
  logSchemaBuild(): void {}
  logMigration(): void {}
  log(): void {}
}
