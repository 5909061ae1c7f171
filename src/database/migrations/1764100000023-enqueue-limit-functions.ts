import type { MigrationInterface, QueryRunner } from 'typeorm';
import { createFunctionStatement, syncDatabaseFunctions } from '../functions/database-function.js';
import { DATABASE_FUNCTIONS } from '../functions/database-functions.js';
import { enqueueLimitFunctions } from '../functions/enqueue-limits.function.js';
import { PUSHPOP_ENQUEUE } from '../functions/enqueue.function.js';

/** How this release's `pushpop_enqueue` reads its limits, and how the one before read them. */
const READS_FUNCTIONS = `  v_max_bytes := pushpop_enqueue_max_item_bytes();\n  v_max_priority := pushpop_enqueue_max_priority();`;
const READS_TABLE = `  SELECT max_item_bytes, max_priority INTO v_max_bytes, v_max_priority FROM enqueue_limits;`;

/**
 * `pushpop_enqueue` takes the limits of the service's configuration from two `IMMUTABLE`
 * functions whose bodies are the constants (`pushpop_enqueue_max_item_bytes()`,
 * `pushpop_enqueue_max_priority()`, see functions/enqueue-limits.function.ts) instead of reading
 * the one-row `enqueue_limits` in every call: the read was 1.3–1.5 µs of a call's 9. The
 * functions get the limits the table held, and the table goes.
 *
 * A process of the previous release started after this ran cannot write its limits (it warns
 * and carries as before); the function then checks those the last process of this release set.
 */
export class EnqueueLimitFunctions1764100000023 implements MigrationInterface {
  name = 'EnqueueLimitFunctions1764100000023';

  async up(queryRunner: QueryRunner): Promise<void> {
    const [limits]: { max_item_bytes: number; max_priority: number }[] = await queryRunner.query(`SELECT max_item_bytes, max_priority FROM enqueue_limits`);
    await syncDatabaseFunctions(queryRunner, DATABASE_FUNCTIONS);
    if (limits) {
      for (const fn of enqueueLimitFunctions({ maxItemBytes: limits.max_item_bytes, maxPriority: limits.max_priority })) {
        await queryRunner.query(createFunctionStatement(fn));
      }
    }
    await queryRunner.query(`DROP TABLE "enqueue_limits"`);
  }

  /** The table again, with the limits the functions hold, and the function reading it as before; the two functions stay (nothing calls them). */
  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE "enqueue_limits" (
        "one" boolean NOT NULL DEFAULT true,
        "max_item_bytes" integer NOT NULL DEFAULT 262144,
        "max_priority" integer NOT NULL DEFAULT 255,
        CONSTRAINT "PK_enqueue_limits" PRIMARY KEY ("one"),
        CONSTRAINT "CHK_enqueue_limits_one" CHECK ("one")
      )`);
    await queryRunner.query(
      `INSERT INTO "enqueue_limits" (max_item_bytes, max_priority) VALUES (pushpop_enqueue_max_item_bytes(), pushpop_enqueue_max_priority())`,
    );
    if (!PUSHPOP_ENQUEUE.body.includes(READS_FUNCTIONS)) throw new Error('pushpop_enqueue no longer reads its limits as this migration knows');
    const previous = { ...PUSHPOP_ENQUEUE, body: PUSHPOP_ENQUEUE.body.replace(READS_FUNCTIONS, READS_TABLE) };
    await syncDatabaseFunctions(queryRunner, [previous]);
  }
}
