import type { MigrationInterface, QueryRunner } from 'typeorm';
import { syncDatabaseFunctions } from '../functions/database-function.js';
import { DATABASE_FUNCTIONS } from '../functions/database-functions.js';

/**
 * Dead-lettered items remember the queue they came from, and a redrive sends items to other
 * queues.
 *
 * - `dead_lettered_from` on every place an item rests: `delayed_items` (a dead letter waits
 *   there until its queue's next turn), `segment_items`, `returned_items`, and, parallel to
 *   their items, `queue_locks`, `shared_locks` and `offloaded_segments`. Null: the item was
 *   never dead-lettered (every item stored before this migration). Nullable columns without a
 *   default: adding them rewrites no table.
 * - The turn statement writes them (full form only: a plain push or pop never has one, and
 *   keeps the short form and its cost), sets it on the dead letters it adds, and takes the
 *   items a redrive moves (`p_rd_*`): due at once on their destinations, their rows locked with
 *   the queue's own in `queue_id` order, their versions moving on, as for dead letters.
 */
export class DeadLetterOrigins1764100000009 implements MigrationInterface {
  name = 'DeadLetterOrigins1764100000009';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const table of ['delayed_items', 'segment_items', 'returned_items']) {
      await queryRunner.query(`ALTER TABLE "${table}" ADD COLUMN "dead_lettered_from" varchar(200) COLLATE "C"`);
    }
    for (const table of ['queue_locks', 'shared_locks', 'offloaded_segments']) {
      await queryRunner.query(`ALTER TABLE "${table}" ADD COLUMN "dead_lettered_from" varchar(200)[]`);
    }
    await syncDatabaseFunctions(queryRunner, DATABASE_FUNCTIONS);
  }

  /**
   * The columns go. The functions keep their declared text (the previous release's are not kept
   * anywhere): a service of the previous release recreates them when it migrates again.
   */
  async down(queryRunner: QueryRunner): Promise<void> {
    for (const table of ['delayed_items', 'segment_items', 'returned_items', 'queue_locks', 'shared_locks', 'offloaded_segments']) {
      await queryRunner.query(`ALTER TABLE "${table}" DROP COLUMN "dead_lettered_from"`);
    }
  }
}
