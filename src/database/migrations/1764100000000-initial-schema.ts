import type { MigrationInterface, QueryRunner } from 'typeorm';

export class InitialSchema1764100000000 implements MigrationInterface {
  name = 'InitialSchema1764100000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`CREATE SEQUENCE "queue_versions" AS bigint`);
    await queryRunner.query(`
      CREATE TABLE "queues" (
        "queue_id" varchar(200) COLLATE "C" NOT NULL,
        "version" bigint NOT NULL DEFAULT nextval('queue_versions'),
        "segment_size" integer NOT NULL,
        "buffer_segments" integer NOT NULL,
        "item_count" bigint NOT NULL DEFAULT 0,
        "priorities" jsonb NOT NULL DEFAULT '{}',
        "created_at" timestamptz NOT NULL DEFAULT now(),
        "updated_at" timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT "PK_queues" PRIMARY KEY ("queue_id")
      )`);
    await queryRunner.query(`
      CREATE TABLE "segment_items" (
        "queue_id" varchar(200) COLLATE "C" NOT NULL,
        "priority" integer NOT NULL,
        "segment" bigint NOT NULL,
        "position" integer NOT NULL,
        "item" text NOT NULL,
        CONSTRAINT "PK_segment_items" PRIMARY KEY ("queue_id", "priority", "segment", "position")
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "segment_items"`);
    await queryRunner.query(`DROP TABLE "queues"`);
    await queryRunner.query(`DROP SEQUENCE "queue_versions"`);
  }
}
