import type { MigrationInterface, QueryRunner } from 'typeorm';
import { syncDatabaseFunctions } from '../functions/database-function.js';
import { DATABASE_FUNCTIONS } from '../functions/database-functions.js';

/**
 * `pushpop_write_turn` also reads `p_sl_upserts` as `{"locks": [...], "single": {...}}`: the
 * shared locks a turn created with one item each (a pop's per-item locks) as parallel arrays,
 * the others as a row each, as before. PostgreSQL read a hundred per-item locks as rows (each
 * row's five arrays made by `jsonb_to_recordset`) in 473–503 ms per 20,000, as parallel arrays in
 * 285–296 ms. The same rows are written.
 *
 * Replaced in place (`CREATE OR REPLACE`, the same parameters); a process of the previous release
 * runs with it as it is (it sends the array of rows, which the function still reads).
 */
export class SingleItemSharedLocks1764100000024 implements MigrationInterface {
  name = 'SingleItemSharedLocks1764100000024';

  async up(queryRunner: QueryRunner): Promise<void> {
    await syncDatabaseFunctions(queryRunner, DATABASE_FUNCTIONS);
  }

  /** Nothing to undo: the function writes exactly the rows the one before did. */
  async down(): Promise<void> {}
}
