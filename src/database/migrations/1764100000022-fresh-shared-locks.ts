import type { MigrationInterface, QueryRunner } from 'typeorm';
import { syncDatabaseFunctions } from '../functions/database-function.js';
import { DATABASE_FUNCTIONS } from '../functions/database-functions.js';

/**
 * `pushpop_write_turn` inserts the shared locks a turn created (marked `fresh` in
 * `p_sl_upserts`) without looking for a row of the same id, and writes the others as before
 * (insert or update): a pop of a hundred per-item locks was most of its statement's time, a
 * fifth of it in the conflict check. The same rows are written as before.
 *
 * Replaced in place (`CREATE OR REPLACE`); a process of the previous release runs with it as it
 * is (its locks carry no `fresh`, so each is written as before).
 */
export class FreshSharedLocks1764100000022 implements MigrationInterface {
  name = 'FreshSharedLocks1764100000022';

  async up(queryRunner: QueryRunner): Promise<void> {
    await syncDatabaseFunctions(queryRunner, DATABASE_FUNCTIONS);
  }

  /** Nothing to undo: the function writes exactly the rows the one before did. */
  async down(): Promise<void> {}
}
