import type { MigrationInterface, QueryRunner } from 'typeorm';
import { syncDatabaseFunctions } from '../functions/database-function.js';
import { DATABASE_FUNCTIONS } from '../functions/database-functions.js';

/**
 * Items carry headers (an object of strings, kept as its JSON text).
 *
 * - `headers` on every place an item rests, as `dead_lettered_from` is: `segment_items`,
 *   `returned_items`, `delayed_items`, and, parallel to their items, `queue_locks`,
 *   `shared_locks` and `offloaded_segments`. Null: no headers (every item stored before this
 *   migration). Nullable columns without a default: adding them rewrites no table.
 * - The turn statement writes them (the form with every parameter only: a push or pop of items
 *   without headers keeps the short form and its cost), carries them to dead letters and
 *   redriven items. The third release's full signature stays callable (a wrapper writing no
 *   headers) for its processes during a rolling upgrade.
 */
export class ItemHeaders1764100000011 implements MigrationInterface {
  name = 'ItemHeaders1764100000011';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const table of ['segment_items', 'returned_items', 'delayed_items']) {
      await queryRunner.query(`ALTER TABLE "${table}" ADD COLUMN "headers" text`);
    }
    for (const table of ['queue_locks', 'shared_locks', 'offloaded_segments']) {
      await queryRunner.query(`ALTER TABLE "${table}" ADD COLUMN "headers" text[]`);
    }
    await syncDatabaseFunctions(queryRunner, DATABASE_FUNCTIONS);
  }

  /**
   * The columns go. The functions keep their declared text (the previous release's are not kept
   * anywhere): a service of the previous release recreates them when it migrates again.
   */
  async down(queryRunner: QueryRunner): Promise<void> {
    for (const table of ['segment_items', 'returned_items', 'delayed_items', 'queue_locks', 'shared_locks', 'offloaded_segments']) {
      await queryRunner.query(`ALTER TABLE "${table}" DROP COLUMN "headers"`);
    }
  }
}
