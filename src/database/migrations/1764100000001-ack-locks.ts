import type { MigrationInterface, QueryRunner } from 'typeorm';

export class AckLocks1764100000001 implements MigrationInterface {
  name = 'AckLocks1764100000001';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE "queue_locks" (
        "queue_id" varchar(200) COLLATE "C" NOT NULL,
        "lock_id" varchar(64) NOT NULL,
        "state" varchar(16) NOT NULL,
        "priorities" integer[] NOT NULL,
        "items" text[] NOT NULL,
        "created_at" timestamptz NOT NULL,
        "expires_at" timestamptz NOT NULL,
        CONSTRAINT "PK_queue_locks" PRIMARY KEY ("queue_id"),
        CONSTRAINT "CHK_queue_locks_state" CHECK ("state" IN ('active', 'expired'))
      )`);
    // The sweep's only query: due active locks, oldest first, without scanning queues.
    await queryRunner.query(`CREATE INDEX "IDX_queue_locks_due" ON "queue_locks" ("expires_at") WHERE "state" = 'active'`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "queue_locks"`);
  }
}
