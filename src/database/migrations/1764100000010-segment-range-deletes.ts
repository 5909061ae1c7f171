import type { MigrationInterface, QueryRunner } from 'typeorm';
import { syncDatabaseFunctions } from '../functions/database-function.js';
import { DATABASE_FUNCTIONS } from '../functions/database-functions.js';

/**
 * The turn statement deletes segment rows one index range per segment instead of joining the
 * ranges with `segment_items`: a connection that planned that join while the table was small
 * kept a plan reading every row of the queue, the dead rows a bulk load leaves included, so
 * that every pop on a freshly filled deep queue paid for all of them. Same signatures, same
 * effect; replaced in place, as `CanonicalFunctions1764100000007` explains.
 */
export class SegmentRangeDeletes1764100000010 implements MigrationInterface {
  name = 'SegmentRangeDeletes1764100000010';

  async up(queryRunner: QueryRunner): Promise<void> {
    await syncDatabaseFunctions(queryRunner, DATABASE_FUNCTIONS);
  }

  /** Nothing to undo: the functions behave as the ones before. */
  async down(): Promise<void> {}
}
