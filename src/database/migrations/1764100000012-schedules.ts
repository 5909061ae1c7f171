import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Schedules: recurring pushes by cron expression (`ScheduleEntity`). One row per schedule, keyed
 * by its id (a small table read by id and through its due index, not keyed by queue: on a
 * distributed PostgreSQL it is a reference table). The partial index on `next_run_at` holds only
 * schedules that will fire, so the sweep's probe for due ones is one index range read whatever
 * the number of schedules.
 */
export class Schedules1764100000012 implements MigrationInterface {
  name = 'Schedules1764100000012';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE "schedules" (
        "schedule_id" character varying(200) COLLATE "C" NOT NULL,
        "queue_id" character varying(200) COLLATE "C" NOT NULL,
        "cron" character varying(1000) NOT NULL,
        "timezone" character varying(100) NOT NULL,
        "item" text NOT NULL,
        "priority" integer NOT NULL DEFAULT 0,
        "paused" boolean NOT NULL DEFAULT false,
        "next_run_at" TIMESTAMP WITH TIME ZONE,
        "last_run_at" TIMESTAMP WITH TIME ZONE,
        "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
        CONSTRAINT "PK_schedules" PRIMARY KEY ("schedule_id")
      )`);
    await queryRunner.query(`CREATE INDEX "IDX_schedules_next_run" ON "schedules" ("next_run_at") WHERE NOT "paused" AND "next_run_at" IS NOT NULL`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "schedules"`);
  }
}
