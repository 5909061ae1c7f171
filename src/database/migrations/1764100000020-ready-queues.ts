import type { MigrationInterface, QueryRunner } from 'typeorm';
import { syncDatabaseFunctions } from '../functions/database-function.js';
import { DATABASE_FUNCTIONS } from '../functions/database-functions.js';
import { QUEUE_READY_CONDITION } from '../functions/ready-queue.function.js';

/**
 * The ready set of fair pops (`POST /queues/pop?prefix=`): `queues.ready`, true while a queue has
 * items to hand out and is not paused, kept by the trigger `queues_ready` (see
 * functions/ready-queue.function.ts), and the partial index `IDX_queues_ready` on `queue_id`
 * over the ready queues only. The column is filled for the queues that hold items; a process of
 * the previous release, which knows nothing of it, keeps it right all the same (the trigger
 * runs on its writes too).
 */
export class ReadyQueues1764100000020 implements MigrationInterface {
  name = 'ReadyQueues1764100000020';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "queues" ADD "ready" boolean NOT NULL DEFAULT false`);
    await queryRunner.query(`UPDATE "queues" SET "ready" = true WHERE "item_count" > 0 AND NOT "paused"`);
    await queryRunner.query(`CREATE INDEX "IDX_queues_ready" ON "queues" ("queue_id") WHERE "ready"`);
    await syncDatabaseFunctions(queryRunner, DATABASE_FUNCTIONS);
    await queryRunner.query(
      `CREATE TRIGGER "queues_ready" BEFORE INSERT OR UPDATE ON "queues" FOR EACH ROW WHEN (${QUEUE_READY_CONDITION}) EXECUTE FUNCTION pushpop_queue_ready()`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TRIGGER "queues_ready" ON "queues"`);
    await queryRunner.query(`DROP FUNCTION pushpop_queue_ready()`);
    await queryRunner.query(`DROP INDEX "IDX_queues_ready"`);
    await queryRunner.query(`ALTER TABLE "queues" DROP COLUMN "ready"`);
  }
}
