import type { MigrationInterface, QueryRunner } from 'typeorm';
import { syncDatabaseFunctions } from '../functions/database-function.js';
import { DATABASE_FUNCTIONS } from '../functions/database-functions.js';

/**
 * `pushpop_write_turn` keeps only the forms this release and the previous one call: the short
 * form (38 parameters, called by both), the form with every parameter (92) and the previous
 * release's full form (85, a wrapper). The forms of the releases before (the first release's 27
 * parameters and the second's 66, both wrappers) are dropped: no process of those releases may
 * run against this schema (an upgrade goes one release at a time; see docs/operations.md,
 * Upgrades). The forms that stay are replaced in place, as `CanonicalFunctions1764100000007`
 * explains (the wrapper's text is now laid out to be read).
 */
export class DropOldWriteTurnForms1764100000013 implements MigrationInterface {
  name = 'DropOldWriteTurnForms1764100000013';

  async up(queryRunner: QueryRunner): Promise<void> {
    // Every overload of a declared name that is not declared goes: the 27- and 66-parameter forms.
    await syncDatabaseFunctions(queryRunner, DATABASE_FUNCTIONS);
  }

  /**
   * Nothing to undo: the schema still serves this release and the previous one. A release older
   * than that needs the database it ran on (the way back is the backup taken before upgrading).
   */
  async down(): Promise<void> {}
}
