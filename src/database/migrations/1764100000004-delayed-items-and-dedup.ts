import type { MigrationInterface, QueryRunner } from 'typeorm';

/** The turn statement's parameters before this migration (kept as an overload, see below). */
const PREVIOUS_PARAMETERS = `
  p_queue_id varchar, p_expected bigint, p_version bigint, p_delete boolean,
  p_segment_size integer, p_buffer_segments integer, p_item_count bigint, p_priorities jsonb,
  p_del_priority integer[], p_del_segment bigint[], p_del_from integer[], p_del_through integer[],
  p_ins_priority integer[], p_ins_segment bigint[], p_ins_position integer[], p_ins_item text[],
  p_lock_op text, p_lock_id varchar, p_lock_state varchar, p_lock_priorities integer[], p_lock_items text[],
  p_lock_created double precision, p_lock_expires double precision,
  p_save_keys varchar[], p_save_lengths integer[], p_save_items text[], p_delete_keys varchar[]`;

/**
 * Delayed items and deduplication.
 *
 * - `delayed_items`: items pushed with a delay, apart from the segments until they are due,
 *   keyed `(queue_id, due_at, seq)` so that a queue's due items are one index range, read in
 *   due order (ties in push order, `seq` counting per queue).
 * - `queues.delayed_count`, `next_due_at`, `delayed_seq`: what a turn needs to know without
 *   reading `delayed_items`. A turn reads them only when `next_due_at` has passed; the sweep
 *   finds queues with due items through the partial index on `next_due_at`.
 * - `dedup_ids`: deduplication ids accepted per queue, until `expires_at`; the sweep deletes
 *   expired ones through the index on `expires_at`, in bounded batches.
 *
 * The turn statement takes the new columns and rows as well, so that moving due items (delete
 * from `delayed_items`, insert into the segments) and remembering a dedup id happen in the
 * same statement as the rest of the turn, under its version check. Nothing but a queue's
 * turns writes these rows (the sweep deletes only expired dedup ids, which no turn reads as
 * live), so the version check serialises them as it does the segments.
 *
 * The previous 27-parameter form becomes a wrapper, so that a process of the previous release
 * still running during a rolling upgrade keeps working: it leaves the delayed columns as they
 * are, and deleting a queue deletes its delayed items and dedup ids in either form.
 */
export class DelayedItemsAndDedup1764100000004 implements MigrationInterface {
  name = 'DelayedItemsAndDedup1764100000004';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE "queues"
        ADD COLUMN "delayed_count" bigint NOT NULL DEFAULT 0,
        ADD COLUMN "next_due_at" timestamptz,
        ADD COLUMN "delayed_seq" bigint NOT NULL DEFAULT 0`);
    // The delay sweep's only query: queues with a due delayed item, earliest first.
    await queryRunner.query(`CREATE INDEX "IDX_queues_next_due" ON "queues" ("next_due_at") WHERE "next_due_at" IS NOT NULL`);
    await queryRunner.query(`
      CREATE TABLE "delayed_items" (
        "queue_id" varchar(200) COLLATE "C" NOT NULL,
        "due_at" timestamptz NOT NULL,
        "seq" bigint NOT NULL,
        "priority" integer NOT NULL,
        "item" text NOT NULL,
        CONSTRAINT "PK_delayed_items" PRIMARY KEY ("queue_id", "due_at", "seq")
      )`);
    await queryRunner.query(`
      CREATE TABLE "dedup_ids" (
        "queue_id" varchar(200) COLLATE "C" NOT NULL,
        "dedup_id" varchar(128) COLLATE "C" NOT NULL,
        "expires_at" timestamptz NOT NULL,
        CONSTRAINT "PK_dedup_ids" PRIMARY KEY ("queue_id", "dedup_id")
      )`);
    await queryRunner.query(`CREATE INDEX "IDX_dedup_ids_expires" ON "dedup_ids" ("expires_at")`);
    await queryRunner.query(`
      CREATE FUNCTION pushpop_write_turn(${PREVIOUS_PARAMETERS},
        p_delayed_count bigint, p_next_due double precision, p_delayed_seq bigint,
        p_dl_due double precision[], p_dl_seq bigint[], p_dl_priority integer[], p_dl_item text[],
        p_dl_through_due double precision, p_dl_through_seq bigint,
        p_dedup_ids varchar[], p_dedup_expires double precision[]
      ) RETURNS boolean LANGUAGE plpgsql AS $fn$
      DECLARE
        v_from integer := 1;
      BEGIN
        -- p_delayed_count NULL: the delayed columns stay as they are (a turn that did not touch them, or the wrapper below).
        IF p_expected IS NULL THEN
          INSERT INTO queues (queue_id, version, segment_size, buffer_segments, item_count, priorities, delayed_count, next_due_at, delayed_seq)
          VALUES (p_queue_id, p_version, p_segment_size, p_buffer_segments, p_item_count, p_priorities,
                  coalesce(p_delayed_count, 0), to_timestamp(p_next_due / 1000.0), coalesce(p_delayed_seq, 0))
          ON CONFLICT (queue_id) DO NOTHING;
        ELSIF p_delete THEN
          DELETE FROM queues WHERE queue_id = p_queue_id AND version = p_expected;
        ELSIF p_delayed_count IS NULL THEN
          UPDATE queues SET version = p_version, item_count = p_item_count, priorities = p_priorities, updated_at = now()
           WHERE queue_id = p_queue_id AND version = p_expected;
        ELSE
          UPDATE queues SET version = p_version, item_count = p_item_count, priorities = p_priorities, updated_at = now(),
                 delayed_count = p_delayed_count, next_due_at = to_timestamp(p_next_due / 1000.0), delayed_seq = p_delayed_seq
           WHERE queue_id = p_queue_id AND version = p_expected;
        END IF;
        IF NOT FOUND THEN
          RETURN false;
        END IF;
        IF p_delete THEN
          DELETE FROM segment_items WHERE queue_id = p_queue_id;
          DELETE FROM queue_locks WHERE queue_id = p_queue_id;
          DELETE FROM offloaded_segments WHERE queue_id = p_queue_id;
          DELETE FROM delayed_items WHERE queue_id = p_queue_id;
          DELETE FROM dedup_ids WHERE queue_id = p_queue_id;
          RETURN true;
        END IF;
        IF cardinality(p_del_priority) > 0 THEN
          DELETE FROM segment_items s
           USING unnest(p_del_priority, p_del_segment, p_del_from, p_del_through) AS d(priority, segment, first, through)
           WHERE s.queue_id = p_queue_id AND s.priority = d.priority AND s.segment = d.segment AND s.position BETWEEN d.first AND d.through;
        END IF;
        IF cardinality(p_ins_priority) > 0 THEN
          INSERT INTO segment_items (queue_id, priority, segment, position, item)
          SELECT p_queue_id, i.priority, i.segment, i.position, i.item
            FROM unnest(p_ins_priority, p_ins_segment, p_ins_position, p_ins_item) AS i(priority, segment, position, item);
        END IF;
        IF p_lock_op = 'upsert' THEN
          INSERT INTO queue_locks (queue_id, lock_id, state, priorities, items, created_at, expires_at)
          VALUES (p_queue_id, p_lock_id, p_lock_state, p_lock_priorities, p_lock_items, to_timestamp(p_lock_created / 1000.0), to_timestamp(p_lock_expires / 1000.0))
          ON CONFLICT (queue_id) DO UPDATE SET lock_id = EXCLUDED.lock_id, state = EXCLUDED.state, priorities = EXCLUDED.priorities,
            items = EXCLUDED.items, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at;
        ELSIF p_lock_op = 'delete' THEN
          DELETE FROM queue_locks WHERE queue_id = p_queue_id;
        END IF;
        FOR i IN 1 .. coalesce(cardinality(p_save_keys), 0) LOOP
          INSERT INTO offloaded_segments (queue_id, key, items)
          VALUES (p_queue_id, p_save_keys[i], p_save_items[v_from : v_from + p_save_lengths[i] - 1])
          ON CONFLICT (queue_id, key) DO UPDATE SET items = EXCLUDED.items, created_at = now();
          v_from := v_from + p_save_lengths[i];
        END LOOP;
        IF cardinality(p_delete_keys) > 0 THEN
          DELETE FROM offloaded_segments WHERE queue_id = p_queue_id AND key = ANY(p_delete_keys);
        END IF;
        -- Due items moved to the segments above: always a prefix of the queue's delayed items in (due_at, seq) order.
        IF p_dl_through_due IS NOT NULL THEN
          DELETE FROM delayed_items
           WHERE queue_id = p_queue_id AND (due_at, seq) <= (to_timestamp(p_dl_through_due / 1000.0), p_dl_through_seq);
        END IF;
        IF cardinality(p_dl_due) > 0 THEN
          INSERT INTO delayed_items (queue_id, due_at, seq, priority, item)
          SELECT p_queue_id, to_timestamp(d.due / 1000.0), d.seq, d.priority, d.item
            FROM unnest(p_dl_due, p_dl_seq, p_dl_priority, p_dl_item) AS d(due, seq, priority, item);
        END IF;
        -- An expired id the sweep has not deleted yet is replaced.
        IF cardinality(p_dedup_ids) > 0 THEN
          INSERT INTO dedup_ids (queue_id, dedup_id, expires_at)
          SELECT p_queue_id, d.id, to_timestamp(d.expires / 1000.0) FROM unnest(p_dedup_ids, p_dedup_expires) AS d(id, expires)
          ON CONFLICT (queue_id, dedup_id) DO UPDATE SET expires_at = EXCLUDED.expires_at;
        END IF;
        RETURN true;
      END
      $fn$`);
    await queryRunner.query(`
      CREATE OR REPLACE FUNCTION pushpop_write_turn(${PREVIOUS_PARAMETERS}) RETURNS boolean LANGUAGE sql AS $fn$
        SELECT pushpop_write_turn(p_queue_id, p_expected, p_version, p_delete, p_segment_size, p_buffer_segments, p_item_count, p_priorities,
          p_del_priority, p_del_segment, p_del_from, p_del_through, p_ins_priority, p_ins_segment, p_ins_position, p_ins_item,
          p_lock_op, p_lock_id, p_lock_state, p_lock_priorities, p_lock_items, p_lock_created, p_lock_expires,
          p_save_keys, p_save_lengths, p_save_items, p_delete_keys,
          NULL, NULL, NULL, '{}', '{}', '{}', '{}', NULL, NULL, '{}', '{}')
      $fn$`);
  }

  /** Back to the previous schema: delayed items and dedup ids are dropped with their tables. */
  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP FUNCTION pushpop_write_turn(${PREVIOUS_PARAMETERS.replace(/p_\w+ /g, '')},
      bigint, double precision, bigint, double precision[], bigint[], integer[], text[], double precision, bigint, varchar[], double precision[])`);
    // The previous body of the 27-parameter form (migration 1764100000003).
    await queryRunner.query(`
      CREATE OR REPLACE FUNCTION pushpop_write_turn(
        p_queue_id varchar, p_expected bigint, p_version bigint, p_delete boolean,
        p_segment_size integer, p_buffer_segments integer, p_item_count bigint, p_priorities jsonb,
        p_del_priority integer[], p_del_segment bigint[], p_del_from integer[], p_del_through integer[],
        p_ins_priority integer[], p_ins_segment bigint[], p_ins_position integer[], p_ins_item text[],
        p_lock_op text, p_lock_id varchar, p_lock_state varchar, p_lock_priorities integer[], p_lock_items text[],
        p_lock_created double precision, p_lock_expires double precision,
        p_save_keys varchar[], p_save_lengths integer[], p_save_items text[], p_delete_keys varchar[]
      ) RETURNS boolean LANGUAGE plpgsql AS $fn$
      DECLARE
        v_from integer := 1;
      BEGIN
        IF p_expected IS NULL THEN
          INSERT INTO queues (queue_id, version, segment_size, buffer_segments, item_count, priorities)
          VALUES (p_queue_id, p_version, p_segment_size, p_buffer_segments, p_item_count, p_priorities)
          ON CONFLICT (queue_id) DO NOTHING;
        ELSIF p_delete THEN
          DELETE FROM queues WHERE queue_id = p_queue_id AND version = p_expected;
        ELSE
          UPDATE queues SET version = p_version, item_count = p_item_count, priorities = p_priorities, updated_at = now()
           WHERE queue_id = p_queue_id AND version = p_expected;
        END IF;
        IF NOT FOUND THEN
          RETURN false;
        END IF;
        IF p_delete THEN
          DELETE FROM segment_items WHERE queue_id = p_queue_id;
          DELETE FROM queue_locks WHERE queue_id = p_queue_id;
          DELETE FROM offloaded_segments WHERE queue_id = p_queue_id;
          RETURN true;
        END IF;
        IF cardinality(p_del_priority) > 0 THEN
          DELETE FROM segment_items s
           USING unnest(p_del_priority, p_del_segment, p_del_from, p_del_through) AS d(priority, segment, first, through)
           WHERE s.queue_id = p_queue_id AND s.priority = d.priority AND s.segment = d.segment AND s.position BETWEEN d.first AND d.through;
        END IF;
        IF cardinality(p_ins_priority) > 0 THEN
          INSERT INTO segment_items (queue_id, priority, segment, position, item)
          SELECT p_queue_id, i.priority, i.segment, i.position, i.item
            FROM unnest(p_ins_priority, p_ins_segment, p_ins_position, p_ins_item) AS i(priority, segment, position, item);
        END IF;
        IF p_lock_op = 'upsert' THEN
          INSERT INTO queue_locks (queue_id, lock_id, state, priorities, items, created_at, expires_at)
          VALUES (p_queue_id, p_lock_id, p_lock_state, p_lock_priorities, p_lock_items, to_timestamp(p_lock_created / 1000.0), to_timestamp(p_lock_expires / 1000.0))
          ON CONFLICT (queue_id) DO UPDATE SET lock_id = EXCLUDED.lock_id, state = EXCLUDED.state, priorities = EXCLUDED.priorities,
            items = EXCLUDED.items, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at;
        ELSIF p_lock_op = 'delete' THEN
          DELETE FROM queue_locks WHERE queue_id = p_queue_id;
        END IF;
        FOR i IN 1 .. coalesce(cardinality(p_save_keys), 0) LOOP
          INSERT INTO offloaded_segments (queue_id, key, items)
          VALUES (p_queue_id, p_save_keys[i], p_save_items[v_from : v_from + p_save_lengths[i] - 1])
          ON CONFLICT (queue_id, key) DO UPDATE SET items = EXCLUDED.items, created_at = now();
          v_from := v_from + p_save_lengths[i];
        END LOOP;
        IF cardinality(p_delete_keys) > 0 THEN
          DELETE FROM offloaded_segments WHERE queue_id = p_queue_id AND key = ANY(p_delete_keys);
        END IF;
        RETURN true;
      END
      $fn$`);
    await queryRunner.query(`DROP TABLE "dedup_ids"`);
    await queryRunner.query(`DROP TABLE "delayed_items"`);
    await queryRunner.query(`DROP INDEX "IDX_queues_next_due"`);
    await queryRunner.query(`ALTER TABLE "queues" DROP COLUMN "delayed_count", DROP COLUMN "next_due_at", DROP COLUMN "delayed_seq"`);
  }
}
