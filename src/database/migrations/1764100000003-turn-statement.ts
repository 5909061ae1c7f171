import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * One statement per turn: `pushpop_write_turn` applies everything a turn changed (queue row,
 * segment rows, lock) if and only if the queue row still has the version the turn was computed
 * from. Called in autocommit it is the whole transaction; the order inside is fixed: the
 * version check first, then deletes before inserts (a priority emptied and refilled in one
 * turn reuses segment and position numbers), then the lock, then the segments the turn moved
 * to or back from the `offloaded_segments` table (when that is the offload store).
 *
 * Also makes the schema distributable by queue id: versions count per queue instead of coming
 * from a sequence shared by every queue, and every primary key starts with `queue_id`.
 */
export class TurnStatement1764100000003 implements MigrationInterface {
  name = 'TurnStatement1764100000003';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "queues" ALTER COLUMN "version" DROP DEFAULT`);
    await queryRunner.query(`DROP SEQUENCE "queue_versions"`);
    await queryRunner.query(`ALTER TABLE "offloaded_segments" DROP CONSTRAINT "PK_offloaded_segments"`);
    await queryRunner.query(`ALTER TABLE "offloaded_segments" ADD CONSTRAINT "PK_offloaded_segments" PRIMARY KEY ("queue_id", "key")`);
    await queryRunner.query(`DROP INDEX "IDX_offloaded_segments_queue"`);
    await queryRunner.query(`
      CREATE FUNCTION pushpop_write_turn(
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
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP FUNCTION pushpop_write_turn`);
    await queryRunner.query(`CREATE INDEX "IDX_offloaded_segments_queue" ON "offloaded_segments" ("queue_id")`);
    await queryRunner.query(`ALTER TABLE "offloaded_segments" DROP CONSTRAINT "PK_offloaded_segments"`);
    await queryRunner.query(`ALTER TABLE "offloaded_segments" ADD CONSTRAINT "PK_offloaded_segments" PRIMARY KEY ("key")`);
    await queryRunner.query(`CREATE SEQUENCE "queue_versions" AS bigint START WITH 4503599627370496`);
    await queryRunner.query(`ALTER TABLE "queues" ALTER COLUMN "version" SET DEFAULT nextval('queue_versions')`);
  }
}
