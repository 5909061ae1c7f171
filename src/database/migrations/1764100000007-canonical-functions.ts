import type { MigrationInterface, QueryRunner } from 'typeorm';
import { syncDatabaseFunctions } from '../functions/database-function.js';
import { DATABASE_FUNCTIONS } from '../functions/database-functions.js';

/**
 * Every database function as declared in `src/database/functions/` (the one place they are
 * defined from now on), whatever earlier migrations left.
 *
 * Why a migration of its own, the earlier ones untouched: a database already migrated never
 * runs migrations 3 to 5 again, so changing their text would change only fresh databases and
 * the two would differ. They keep the text they were released with (history, frozen), and
 * this migration brings both kinds of database to the same functions, replaced in place
 * (`CREATE OR REPLACE`: a process of the previous release keeps calling them while the
 * upgrade rolls). The new bodies behave as the ones they replace; the short form now also
 * deletes a queue's shared locks and given-back items, so a queue's deletion needs no longer
 * the full form.
 *
 * A later change to a declaration comes with a migration of its own that runs
 * {@link syncDatabaseFunctions} again (that is what brings existing databases to it); a fresh
 * database then runs both, and ends with the same functions.
 */
export class CanonicalFunctions1764100000007 implements MigrationInterface {
  name = 'CanonicalFunctions1764100000007';

  async up(queryRunner: QueryRunner): Promise<void> {
    await syncDatabaseFunctions(queryRunner, DATABASE_FUNCTIONS);
  }

  /**
   * Nothing to undo: the functions behave as the ones before (the earlier migrations' `down`
   * drop them by signature, whatever their text).
   */
  async down(): Promise<void> {}
}
