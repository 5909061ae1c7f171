import type { MigrationInterface, QueryRunner } from 'typeorm';
import { syncDatabaseFunctions } from '../functions/database-function.js';
import { DATABASE_FUNCTIONS } from '../functions/database-functions.js';

/**
 * Enqueue from SQL, faster and woken at once (functions/enqueue.function.ts):
 *
 * - `pushpop_enqueue` checks the lengths of queue ids, dedup ids and header names apart from
 *   their patterns (the same rules: a bounded repetition cost PostgreSQL's regex engine about
 *   0.3 ms a call);
 * - `pushpop_enqueue_committed` numbers the transaction before it looks for others waiting, and
 *   holds the gate lock shared until its commit is visible, so that carriers carry again as
 *   soon as a carriage ends and stop only when nothing is waiting or committing; it looks for
 *   others waiting among the two newest rows of the `commit_seq` index (live ones) instead of
 *   scanning the table, whose oldest rows the carriages leave dead.
 *
 * Replaced in place (`CREATE OR REPLACE`): during a rolling upgrade a process of the previous
 * release carries as before (probing every 100 ms while rows wait), and a commit that the
 * previous trigger numbered without the gate is carried by the next idle probe (5 s) at worst.
 */
export class SqlEnqueueWakeUps1764100000017 implements MigrationInterface {
  name = 'SqlEnqueueWakeUps1764100000017';

  async up(queryRunner: QueryRunner): Promise<void> {
    await syncDatabaseFunctions(queryRunner, DATABASE_FUNCTIONS);
  }

  /** Nothing to undo: the functions accept and refuse exactly what the ones before did. */
  async down(): Promise<void> {}
}
