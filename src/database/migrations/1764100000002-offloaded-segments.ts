import type { MigrationInterface, QueryRunner } from 'typeorm';

export class OffloadedSegments1764100000002 implements MigrationInterface {
  name = 'OffloadedSegments1764100000002';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE "offloaded_segments" (
        "key" varchar(300) COLLATE "C" NOT NULL,
        "queue_id" varchar(200) COLLATE "C" NOT NULL,
        "items" text[] NOT NULL,
        "created_at" timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT "PK_offloaded_segments" PRIMARY KEY ("key")
      )`);
    await queryRunner.query(`CREATE INDEX "IDX_offloaded_segments_queue" ON "offloaded_segments" ("queue_id")`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "offloaded_segments"`);
  }
}
