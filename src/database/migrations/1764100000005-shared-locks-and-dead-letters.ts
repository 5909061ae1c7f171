import type { MigrationInterface, QueryRunner } from 'typeorm';

/** The turn statement's parameters before this migration (kept as an overload, see below). */
const PREVIOUS_PARAMETERS = `
  p_queue_id varchar, p_expected bigint, p_version bigint, p_delete boolean,
  p_segment_size integer, p_buffer_segments integer, p_item_count bigint, p_priorities jsonb,
  p_del_priority integer[], p_del_segment bigint[], p_del_from integer[], p_del_through integer[],
  p_ins_priority integer[], p_ins_segment bigint[], p_ins_position integer[], p_ins_item text[],
  p_lock_op text, p_lock_id varchar, p_lock_state varchar, p_lock_priorities integer[], p_lock_items text[],
  p_lock_created double precision, p_lock_expires double precision,
  p_save_keys varchar[], p_save_lengths integer[], p_save_items text[], p_delete_keys varchar[],
  p_delayed_count bigint, p_next_due double precision, p_delayed_seq bigint,
  p_dl_due double precision[], p_dl_seq bigint[], p_dl_priority integer[], p_dl_item text[],
  p_dl_through_due double precision, p_dl_through_seq bigint,
  p_dedup_ids varchar[], p_dedup_expires double precision[]`;

const PREVIOUS_TYPES = PREVIOUS_PARAMETERS.replace(/p_\w+ /g, '');

/** Parameters this migration adds to the turn statement. */
const NEW_PARAMETERS = `
  p_settings boolean, p_lock_mode text, p_max_deliveries integer, p_dead_letter_queue varchar,
  p_ins_deliveries integer[], p_lock_segments bigint[], p_lock_positions integer[], p_lock_deliveries integer[],
  p_shared_live integer, p_shared_items bigint, p_shared_next double precision,
  p_sl_upserts jsonb, p_sl_deletes varchar[],
  p_ret_priority integer[], p_ret_segment bigint[], p_ret_position integer[], p_ret_item text[], p_ret_deliveries integer[],
  p_retdel_priority integer[], p_retdel_segment bigint[], p_retdel_position integer[],
  p_dlq_id varchar, p_dlq_version bigint, p_dlq_segment_size integer, p_dlq_buffer_segments integer,
  p_dlq_priority integer[], p_dlq_item text[], p_now double precision`;

/**
 * Queue settings, shared locks (competing consumers), delivery counts and dead letters.
 *
 * - `queues.lock_mode`, `max_deliveries`, `dead_letter_queue`: settings stored with the queue
 *   (the segment layout columns were already there), written by the turn that changes them.
 * - `queues.live_locks`, `locked_items`, `next_lock_expiry`: what a turn needs to know of a
 *   queue's shared locks without reading them. `next_lock_expiry` is a lower bound of the
 *   earliest expiry (extending a lock does not touch it); the sweep finds queues with due
 *   locks through its partial index, one probe per interval.
 * - `shared_locks`: one row per shared lock, keyed `(queue_id, lock_id)`; live ones indexed by
 *   `(queue_id, expires_at)` so that a queue's due locks are one index range. An expired lock
 *   keeps its row (state `expired`, no items) so that its id answers 410; the sweep forgets
 *   such rows an hour after expiry through the partial index on `expires_at`.
 * - `returned_items`: items given back by shared locks, keyed by where they were pushed
 *   `(priority, segment, position)`, so a queue pops them in push order, one index range.
 * - `segment_items.deliveries`, `queue_locks.segments/positions/deliveries`: delivery counts
 *   and where the locked items were pushed, for the exclusive lock as well.
 *
 * The turn statement writes all of it, under the queue's version check. Dead letters go to
 * the dead-letter queue's `delayed_items` as due at once (its next turn moves them to the tail
 * of their priorities, before anything else looks at it) and bump that queue's version, in the
 * same transaction: the two queue rows are locked first, in `queue_id` order, so two turns that
 * dead-letter into each other's queues never deadlock.
 *
 * The previous 38-parameter form stays as it was: the service calls it for the turns that
 * write nothing this migration adds (most pushes and pops: fewer parameters to bind and parse,
 * and a smaller UPDATE, measured about a fifth cheaper for PostgreSQL), and a process of the
 * previous release keeps working with it during a rolling upgrade.
 */
export class SharedLocksAndDeadLetters1764100000005 implements MigrationInterface {
  name = 'SharedLocksAndDeadLetters1764100000005';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE "queues"
        ADD COLUMN "lock_mode" varchar(16) NOT NULL DEFAULT 'exclusive',
        ADD COLUMN "max_deliveries" integer,
        ADD COLUMN "dead_letter_queue" varchar(200) COLLATE "C",
        ADD COLUMN "live_locks" integer NOT NULL DEFAULT 0,
        ADD COLUMN "locked_items" bigint NOT NULL DEFAULT 0,
        ADD COLUMN "next_lock_expiry" timestamptz,
        ADD CONSTRAINT "CHK_queues_lock_mode" CHECK ("lock_mode" IN ('exclusive', 'shared'))`);
    await queryRunner.query(`CREATE INDEX "IDX_queues_next_lock_expiry" ON "queues" ("next_lock_expiry") WHERE "next_lock_expiry" IS NOT NULL`);
    await queryRunner.query(`ALTER TABLE "segment_items" ADD COLUMN "deliveries" integer NOT NULL DEFAULT 0`);
    await queryRunner.query(`ALTER TABLE "queue_locks" ADD COLUMN "segments" bigint[], ADD COLUMN "positions" integer[], ADD COLUMN "deliveries" integer[]`);
    await queryRunner.query(`
      CREATE TABLE "shared_locks" (
        "queue_id" varchar(200) COLLATE "C" NOT NULL,
        "lock_id" varchar(64) COLLATE "C" NOT NULL,
        "state" varchar(16) NOT NULL,
        "priorities" integer[] NOT NULL,
        "segments" bigint[] NOT NULL,
        "positions" integer[] NOT NULL,
        "items" text[] NOT NULL,
        "deliveries" integer[] NOT NULL,
        "created_at" timestamptz NOT NULL,
        "expires_at" timestamptz NOT NULL,
        CONSTRAINT "PK_shared_locks" PRIMARY KEY ("queue_id", "lock_id"),
        CONSTRAINT "CHK_shared_locks_state" CHECK ("state" IN ('active', 'expired'))
      )`);
    await queryRunner.query(`CREATE INDEX "IDX_shared_locks_live" ON "shared_locks" ("queue_id", "expires_at") WHERE "state" = 'active'`);
    await queryRunner.query(`CREATE INDEX "IDX_shared_locks_expired" ON "shared_locks" ("expires_at") WHERE "state" = 'expired'`);
    await queryRunner.query(`
      CREATE TABLE "returned_items" (
        "queue_id" varchar(200) COLLATE "C" NOT NULL,
        "priority" integer NOT NULL,
        "segment" bigint NOT NULL,
        "position" integer NOT NULL,
        "item" text NOT NULL,
        "deliveries" integer NOT NULL,
        CONSTRAINT "PK_returned_items" PRIMARY KEY ("queue_id", "priority", "segment", "position")
      )`);
    await queryRunner.query(`
      CREATE FUNCTION pushpop_write_turn(${PREVIOUS_PARAMETERS}, ${NEW_PARAMETERS}) RETURNS boolean LANGUAGE plpgsql AS $fn$
      DECLARE
        v_from integer := 1;
        v_seq bigint;
      BEGIN
        -- Dead letters lock two queue rows: both first, in queue_id order (no deadlock between two such turns).
        IF p_dlq_id IS NOT NULL THEN
          PERFORM 1 FROM queues WHERE queue_id IN (p_queue_id, p_dlq_id) ORDER BY queue_id FOR UPDATE;
        END IF;
        -- Null delayed / shared columns: they stay as they are.
        IF p_expected IS NULL THEN
          INSERT INTO queues (queue_id, version, segment_size, buffer_segments, item_count, priorities, delayed_count, next_due_at, delayed_seq,
                              lock_mode, max_deliveries, dead_letter_queue, live_locks, locked_items, next_lock_expiry)
          VALUES (p_queue_id, p_version, p_segment_size, p_buffer_segments, p_item_count, p_priorities,
                  coalesce(p_delayed_count, 0), to_timestamp(p_next_due / 1000.0), coalesce(p_delayed_seq, 0),
                  coalesce(p_lock_mode, 'exclusive'), p_max_deliveries, p_dead_letter_queue,
                  coalesce(p_shared_live, 0), coalesce(p_shared_items, 0), to_timestamp(p_shared_next / 1000.0))
          ON CONFLICT (queue_id) DO NOTHING;
        ELSIF p_delete THEN
          DELETE FROM queues WHERE queue_id = p_queue_id AND version = p_expected;
        ELSE
          UPDATE queues SET version = p_version, item_count = p_item_count, priorities = p_priorities, updated_at = now(),
                 delayed_count = CASE WHEN p_delayed_count IS NULL THEN delayed_count ELSE p_delayed_count END,
                 next_due_at = CASE WHEN p_delayed_count IS NULL THEN next_due_at ELSE to_timestamp(p_next_due / 1000.0) END,
                 delayed_seq = CASE WHEN p_delayed_count IS NULL THEN delayed_seq ELSE p_delayed_seq END,
                 segment_size = CASE WHEN p_settings THEN p_segment_size ELSE segment_size END,
                 buffer_segments = CASE WHEN p_settings THEN p_buffer_segments ELSE buffer_segments END,
                 lock_mode = CASE WHEN p_settings THEN p_lock_mode ELSE lock_mode END,
                 max_deliveries = CASE WHEN p_settings THEN p_max_deliveries ELSE max_deliveries END,
                 dead_letter_queue = CASE WHEN p_settings THEN p_dead_letter_queue ELSE dead_letter_queue END,
                 live_locks = CASE WHEN p_shared_live IS NULL THEN live_locks ELSE p_shared_live END,
                 locked_items = CASE WHEN p_shared_live IS NULL THEN locked_items ELSE p_shared_items END,
                 next_lock_expiry = CASE WHEN p_shared_live IS NULL THEN next_lock_expiry ELSE to_timestamp(p_shared_next / 1000.0) END
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
          DELETE FROM shared_locks WHERE queue_id = p_queue_id;
          DELETE FROM returned_items WHERE queue_id = p_queue_id;
          RETURN true;
        END IF;
        IF cardinality(p_del_priority) > 0 THEN
          DELETE FROM segment_items s
           USING unnest(p_del_priority, p_del_segment, p_del_from, p_del_through) AS d(priority, segment, first, through)
           WHERE s.queue_id = p_queue_id AND s.priority = d.priority AND s.segment = d.segment AND s.position BETWEEN d.first AND d.through;
        END IF;
        IF cardinality(p_ins_priority) > 0 THEN
          -- p_ins_deliveries may be shorter (empty when no item was delivered before): unnest pads it with nulls.
          INSERT INTO segment_items (queue_id, priority, segment, position, item, deliveries)
          SELECT p_queue_id, i.priority, i.segment, i.position, i.item, coalesce(i.deliveries, 0)
            FROM unnest(p_ins_priority, p_ins_segment, p_ins_position, p_ins_item, coalesce(p_ins_deliveries, '{}')) AS i(priority, segment, position, item, deliveries)
           WHERE i.priority IS NOT NULL;
        END IF;
        IF p_lock_op = 'upsert' THEN
          INSERT INTO queue_locks (queue_id, lock_id, state, priorities, items, created_at, expires_at, segments, positions, deliveries)
          VALUES (p_queue_id, p_lock_id, p_lock_state, p_lock_priorities, p_lock_items, to_timestamp(p_lock_created / 1000.0), to_timestamp(p_lock_expires / 1000.0),
                  p_lock_segments, p_lock_positions, p_lock_deliveries)
          ON CONFLICT (queue_id) DO UPDATE SET lock_id = EXCLUDED.lock_id, state = EXCLUDED.state, priorities = EXCLUDED.priorities,
            items = EXCLUDED.items, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at,
            segments = EXCLUDED.segments, positions = EXCLUDED.positions, deliveries = EXCLUDED.deliveries;
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
        IF p_dl_through_due IS NOT NULL THEN
          DELETE FROM delayed_items
           WHERE queue_id = p_queue_id AND (due_at, seq) <= (to_timestamp(p_dl_through_due / 1000.0), p_dl_through_seq);
        END IF;
        IF cardinality(p_dl_due) > 0 THEN
          INSERT INTO delayed_items (queue_id, due_at, seq, priority, item)
          SELECT p_queue_id, to_timestamp(d.due / 1000.0), d.seq, d.priority, d.item
            FROM unnest(p_dl_due, p_dl_seq, p_dl_priority, p_dl_item) AS d(due, seq, priority, item);
        END IF;
        IF cardinality(p_dedup_ids) > 0 THEN
          INSERT INTO dedup_ids (queue_id, dedup_id, expires_at)
          SELECT p_queue_id, d.id, to_timestamp(d.expires / 1000.0) FROM unnest(p_dedup_ids, p_dedup_expires) AS d(id, expires)
          ON CONFLICT (queue_id, dedup_id) DO UPDATE SET expires_at = EXCLUDED.expires_at;
        END IF;
        IF cardinality(p_sl_deletes) > 0 THEN
          DELETE FROM shared_locks WHERE queue_id = p_queue_id AND lock_id = ANY(p_sl_deletes);
        END IF;
        IF jsonb_array_length(coalesce(p_sl_upserts, '[]')) > 0 THEN
          INSERT INTO shared_locks (queue_id, lock_id, state, priorities, segments, positions, items, deliveries, created_at, expires_at)
          SELECT p_queue_id, l.id, l.state, l.priorities, l.segments, l.positions, l.items, l.deliveries,
                 to_timestamp(l.created / 1000.0), to_timestamp(l.expires / 1000.0)
            FROM jsonb_to_recordset(p_sl_upserts) AS l(id varchar, state varchar, priorities integer[], segments bigint[], positions integer[],
                                                        items text[], deliveries integer[], created double precision, expires double precision)
          ON CONFLICT (queue_id, lock_id) DO UPDATE SET state = EXCLUDED.state, priorities = EXCLUDED.priorities, segments = EXCLUDED.segments,
            positions = EXCLUDED.positions, items = EXCLUDED.items, deliveries = EXCLUDED.deliveries, expires_at = EXCLUDED.expires_at;
        END IF;
        -- Given-back items popped again go before those given back (an item may be both in one turn).
        IF cardinality(p_retdel_priority) > 0 THEN
          DELETE FROM returned_items r
           USING unnest(p_retdel_priority, p_retdel_segment, p_retdel_position) AS d(priority, segment, position)
           WHERE r.queue_id = p_queue_id AND r.priority = d.priority AND r.segment = d.segment AND r.position = d.position;
        END IF;
        IF cardinality(p_ret_priority) > 0 THEN
          INSERT INTO returned_items (queue_id, priority, segment, position, item, deliveries)
          SELECT p_queue_id, r.priority, r.segment, r.position, r.item, r.deliveries
            FROM unnest(p_ret_priority, p_ret_segment, p_ret_position, p_ret_item, p_ret_deliveries) AS r(priority, segment, position, item, deliveries);
        END IF;
        -- Dead letters: due at once on the dead-letter queue (created if need be), whose version moves on.
        IF p_dlq_id IS NOT NULL AND cardinality(p_dlq_item) > 0 THEN
          INSERT INTO queues (queue_id, version, segment_size, buffer_segments, item_count, priorities, delayed_count, next_due_at, delayed_seq)
          VALUES (p_dlq_id, p_dlq_version, p_dlq_segment_size, p_dlq_buffer_segments, 0, '{}', cardinality(p_dlq_item), to_timestamp(p_now / 1000.0), cardinality(p_dlq_item))
          ON CONFLICT (queue_id) DO UPDATE SET version = queues.version + 1, updated_at = now(),
            delayed_count = queues.delayed_count + EXCLUDED.delayed_count,
            next_due_at = least(coalesce(queues.next_due_at, EXCLUDED.next_due_at), EXCLUDED.next_due_at),
            delayed_seq = queues.delayed_seq + EXCLUDED.delayed_seq
          RETURNING delayed_seq INTO v_seq;
          INSERT INTO delayed_items (queue_id, due_at, seq, priority, item)
          SELECT p_dlq_id, to_timestamp(p_now / 1000.0), v_seq - cardinality(p_dlq_item) + d.ord - 1, d.priority, d.item
            FROM unnest(p_dlq_priority, p_dlq_item) WITH ORDINALITY AS d(priority, item, ord);
        END IF;
        RETURN true;
      END
      $fn$`);
  }

  /** Back to the previous schema: shared locks, given-back items and the new columns are dropped. */
  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP FUNCTION pushpop_write_turn(${PREVIOUS_TYPES}, ${NEW_PARAMETERS.replace(/p_\w+ /g, '')})`);
    await queryRunner.query(`DROP TABLE "returned_items"`);
    await queryRunner.query(`DROP TABLE "shared_locks"`);
    await queryRunner.query(`ALTER TABLE "queue_locks" DROP COLUMN "segments", DROP COLUMN "positions", DROP COLUMN "deliveries"`);
    await queryRunner.query(`ALTER TABLE "segment_items" DROP COLUMN "deliveries"`);
    await queryRunner.query(`DROP INDEX "IDX_queues_next_lock_expiry"`);
    await queryRunner.query(`
      ALTER TABLE "queues" DROP CONSTRAINT "CHK_queues_lock_mode", DROP COLUMN "lock_mode", DROP COLUMN "max_deliveries", DROP COLUMN "dead_letter_queue",
        DROP COLUMN "live_locks", DROP COLUMN "locked_items", DROP COLUMN "next_lock_expiry"`);
  }
}
