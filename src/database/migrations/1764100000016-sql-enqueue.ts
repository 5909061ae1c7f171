import type { MigrationInterface, QueryRunner } from 'typeorm';
import { syncDatabaseFunctions } from '../functions/database-function.js';
import { DATABASE_FUNCTIONS } from '../functions/database-functions.js';

/**
 * Enqueue from SQL, inside the application's transaction (`pushpop_enqueue`, see
 * functions/enqueue.function.ts):
 *
 * - `enqueued_items`: the rows the function adds and the service carries into their queues,
 *   keyed by the adding transaction (`xid`) and the call's sequence number, so that the carrier
 *   reads a transaction's rows in call order from the key.
 * - `enqueue_commits`: one row per transaction that added rows, written as it commits by the
 *   deferred constraint trigger `enqueue_committed`, numbered in commit order (`commit_seq`).
 * - `enqueue_limits`: one row, the limits the function checks that the service's configuration
 *   sets (`MAX_ITEM_BYTES`, `MAX_PRIORITY`), written by the service as it starts.
 *
 * None is keyed by queue: on a distributed PostgreSQL they are reference tables of the
 * coordinator, as `schedules` is. `EXECUTE` on the functions is taken from `PUBLIC`: only the
 * roles an operator grants it to may enqueue.
 */
export class SqlEnqueue1764100000016 implements MigrationInterface {
  name = 'SqlEnqueue1764100000016';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE "enqueue_limits" (
        "one" boolean NOT NULL DEFAULT true,
        "max_item_bytes" integer NOT NULL DEFAULT 262144,
        "max_priority" integer NOT NULL DEFAULT 255,
        CONSTRAINT "PK_enqueue_limits" PRIMARY KEY ("one"),
        CONSTRAINT "CHK_enqueue_limits_one" CHECK ("one")
      )`);
    await queryRunner.query(`INSERT INTO "enqueue_limits" DEFAULT VALUES`);
    await queryRunner.query(`
      CREATE TABLE "enqueued_items" (
        "xid" xid8 NOT NULL,
        "seq" bigserial NOT NULL,
        "queue_id" character varying(200) COLLATE "C" NOT NULL,
        "item" jsonb NOT NULL,
        "priority" integer NOT NULL,
        "deliver_at" TIMESTAMP WITH TIME ZONE,
        "dedup_id" character varying(128),
        "headers" jsonb,
        "opens" boolean NOT NULL,
        CONSTRAINT "PK_enqueued_items" PRIMARY KEY ("xid", "seq")
      )`);
    await queryRunner.query(`
      CREATE TABLE "enqueue_commits" (
        "xid" xid8 NOT NULL,
        "commit_seq" bigserial NOT NULL,
        "committed_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT clock_timestamp(),
        CONSTRAINT "PK_enqueue_commits" PRIMARY KEY ("xid")
      )`);
    await queryRunner.query(`CREATE UNIQUE INDEX "IDX_enqueue_commits_order" ON "enqueue_commits" ("commit_seq")`);
    await syncDatabaseFunctions(queryRunner, DATABASE_FUNCTIONS);
    await queryRunner.query(`
      CREATE CONSTRAINT TRIGGER "enqueue_committed" AFTER INSERT ON "enqueued_items"
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.opens) EXECUTE FUNCTION pushpop_enqueue_committed()`);
    await queryRunner.query(`REVOKE ALL ON FUNCTION pushpop_enqueue(text, jsonb, integer, integer, text, jsonb) FROM PUBLIC`);
    await queryRunner.query(`REVOKE ALL ON FUNCTION pushpop_enqueue_committed() FROM PUBLIC`);
  }

  /** The tables go, rows not carried yet with them; the functions stay as declared (they find no table until migrated again). */
  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "enqueued_items"`);
    await queryRunner.query(`DROP TABLE "enqueue_commits"`);
    await queryRunner.query(`DROP TABLE "enqueue_limits"`);
  }
}
