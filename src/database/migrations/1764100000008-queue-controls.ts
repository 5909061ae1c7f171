import type { MigrationInterface, QueryRunner } from 'typeorm';
import { syncDatabaseFunctions } from '../functions/database-function.js';
import { DATABASE_FUNCTIONS } from '../functions/database-functions.js';

/**
 * The production controls of the third contract, stored with each queue's row so that every
 * process sees them: pause, retry delays, delivery limits, and the queue's pop budget (a token
 * bucket all processes draw from). Delayed items gain where a given-back item was pushed and its
 * deliveries, so that one waiting out a retry delay goes back to the front of its priority, in
 * push order, when it is due.
 *
 * The columns have defaults (or are null), so rows of existing queues read as before (not
 * paused, no retry delay, no limit), and a process of the previous release, which never writes
 * them, leaves them alone. The turn statement's full form gains their parameters; its previous
 * full form stays, as a wrapper, for processes of the previous release during a rolling upgrade
 * (see `write-turn.function.ts`).
 */
export class QueueControls1764100000008 implements MigrationInterface {
  name = 'QueueControls1764100000008';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "queues"
      ADD "paused" boolean NOT NULL DEFAULT false,
      ADD "retry_delay_seconds" integer NOT NULL DEFAULT 0,
      ADD "retry_backoff" character varying(16) NOT NULL DEFAULT 'exponential',
      ADD "retry_delay_max_seconds" integer NOT NULL DEFAULT 900,
      ADD "max_in_flight" integer,
      ADD "max_pops_per_second" double precision,
      ADD "pop_tokens" double precision,
      ADD "pop_tokens_at" double precision`);
    // The paused-queues metric counts through it: paused queues are few.
    await queryRunner.query(`CREATE INDEX "IDX_queues_paused" ON "queues" ("paused") WHERE "paused"`);
    await queryRunner.query(`ALTER TABLE "delayed_items"
      ADD "origin_segment" bigint,
      ADD "origin_position" integer,
      ADD "deliveries" integer`);
    await syncDatabaseFunctions(queryRunner, DATABASE_FUNCTIONS);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "IDX_queues_paused"`);
    await queryRunner.query(`ALTER TABLE "delayed_items" DROP COLUMN "origin_segment", DROP COLUMN "origin_position", DROP COLUMN "deliveries"`);
    await queryRunner.query(`ALTER TABLE "queues"
      DROP COLUMN "paused", DROP COLUMN "retry_delay_seconds", DROP COLUMN "retry_backoff", DROP COLUMN "retry_delay_max_seconds",
      DROP COLUMN "max_in_flight", DROP COLUMN "max_pops_per_second", DROP COLUMN "pop_tokens", DROP COLUMN "pop_tokens_at"`);
  }
}
