import { Logger } from '@nestjs/common';
import type { Logger as TypeOrmLogger } from 'typeorm';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { TypeOrmNestLogger } from './typeorm-logger.js';

describe('TypeOrmNestLogger', () => {
  afterEach(() => vi.restoreAllMocks());

  it("writes a failed statement as a warning of Nest's logger, on one line, without its parameters", () => {
    const warn = vi.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    // Called by TypeORM as its Logger, with the statement's parameters.
    const logger: TypeOrmLogger = new TypeOrmNestLogger();
    logger.logQueryError(new Error('relation "x" does not exist'), 'SELECT *\n  FROM x\n WHERE a = $1', ['secret-item-data']);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(warn.mock.calls[0][0]).toBe('query failed: SELECT * FROM x WHERE a = $1: relation "x" does not exist');
    expect(JSON.stringify(warn.mock.calls)).not.toContain('secret-item-data');
  });

  it('writes nothing else', () => {
    const spies = (['log', 'warn', 'error', 'debug'] as const).map((level) => vi.spyOn(Logger.prototype, level).mockImplementation(() => undefined));
    const logger = new TypeOrmNestLogger();
    logger.logQuery();
    logger.logQuerySlow();
    logger.logSchemaBuild();
    logger.logMigration();
    logger.log();
    for (const spy of spies) expect(spy).not.toHaveBeenCalled();
  });
});
