import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Cross-process wake-ups: when a committed write makes a queue go from no items to some (a
 * push to an empty queue, a lock's items coming back, a queue created by its first push), the
 * same statement queues a `NOTIFY` with the queue id as payload, delivered at commit to every
 * pushpop process listening on the schema's channel. Pushes to a queue that already has items
 * notify nothing: a long poll only waits on a queue it found empty, so the transition is the
 * only moment another process can be waiting for.
 *
 * The trigger lives on `queues`, whose `item_count` every turn's one statement writes, so the
 * turn statement itself (`pushpop_write_turn`) needs no change and costs no extra round trip.
 *
 * The channel is per schema (`pushpop_items` in `public`, `pushpop_items.<schema>` elsewhere,
 * a digest of the schema when that would pass PostgreSQL's 63-byte limit), so services and test
 * runs sharing one database in different schemas never wake each other.
 * `pushpop_items_channel` is the one place that rule is written; listeners ask it for their
 * channel.
 */
export class ItemNotifications1764200000000 implements MigrationInterface {
  name = 'ItemNotifications1764200000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE FUNCTION pushpop_items_channel(p_schema text) RETURNS text LANGUAGE sql IMMUTABLE AS $fn$
        SELECT CASE
          WHEN p_schema = 'public' THEN 'pushpop_items'
          WHEN octet_length('pushpop_items.' || p_schema) <= 63 THEN 'pushpop_items.' || p_schema
          ELSE 'pushpop_items.' || md5(p_schema)
        END
      $fn$`);
    await queryRunner.query(`
      CREATE FUNCTION pushpop_notify_items() RETURNS trigger LANGUAGE plpgsql AS $fn$
      BEGIN
        PERFORM pg_notify(pushpop_items_channel(TG_TABLE_SCHEMA), NEW.queue_id);
        RETURN NULL;
      END
      $fn$`);
    await queryRunner.query(`
      CREATE TRIGGER pushpop_items_created AFTER INSERT ON queues
        FOR EACH ROW WHEN (NEW.item_count > 0) EXECUTE FUNCTION pushpop_notify_items()`);
    await queryRunner.query(`
      CREATE TRIGGER pushpop_items_arrived AFTER UPDATE ON queues
        FOR EACH ROW WHEN (OLD.item_count = 0 AND NEW.item_count > 0) EXECUTE FUNCTION pushpop_notify_items()`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TRIGGER pushpop_items_arrived ON queues`);
    await queryRunner.query(`DROP TRIGGER pushpop_items_created ON queues`);
    await queryRunner.query(`DROP FUNCTION pushpop_notify_items()`);
    await queryRunner.query(`DROP FUNCTION pushpop_items_channel(text)`);
  }
}
