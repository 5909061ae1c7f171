import type { MigrationInterface, QueryRunner } from 'typeorm';
import { syncDatabaseFunctions } from '../functions/database-function.js';
import { DATABASE_FUNCTIONS } from '../functions/database-functions.js';

/**
 * `pushpop_enqueue` looks at an item's depth only when its stored form could nest 65 levels (a
 * `jsonb` that does takes at least 520 bytes) or is compressed: counting the brackets of every
 * item's text was a sixth of a call's cost (functions/enqueue.function.ts). The same items are
 * accepted and refused as before.
 *
 * Replaced in place (`CREATE OR REPLACE`); a process of the previous release runs with it as it
 * is (the function's arguments, answers and rows are unchanged).
 */
export class SqlEnqueueDepthCheck1764100000021 implements MigrationInterface {
  name = 'SqlEnqueueDepthCheck1764100000021';

  async up(queryRunner: QueryRunner): Promise<void> {
    await syncDatabaseFunctions(queryRunner, DATABASE_FUNCTIONS);
  }

  /** Nothing to undo: the function accepts and refuses exactly what the one before did. */
  async down(): Promise<void> {}
}
