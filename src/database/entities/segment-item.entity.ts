import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * One item of one segment. A segment is the set of rows sharing (queue_id, priority, segment):
 * at most `segment_size` items pushed into it (more only while returned items of an expired
 * lock sit at the head), clustered under one primary-key range, so loading a segment is one
 * index range scan and a push is one row insert whatever the depth of the queue.
 * `position` orders items within a segment; items returned to the front get positions below
 * the current head.
 */
@Entity('segment_items')
export class SegmentItemEntity {
  @PrimaryColumn({ name: 'queue_id', type: 'varchar', length: 200, collation: 'C' })
  queueId: string;

  @PrimaryColumn({ type: 'integer' })
  priority: number;

  @PrimaryColumn({ type: 'bigint' })
  segment: string;

  @PrimaryColumn({ type: 'integer' })
  position: number;

  /**
   * The item as JSON text. Not jsonb: jsonb rejects `\u0000` in strings and reorders keys,
   * and an item must come back exactly as it was pushed.
   */
  @Column({ type: 'text' })
  item: string;

  /** Times the item was handed out under a lock (items given back to the front by an exclusive lock); 0 for items never delivered. */
  @Column({ type: 'integer', default: 0 })
  deliveries: number;

  /** The queue the item was dead-lettered from; null: never dead-lettered. */
  @Column({ name: 'dead_lettered_from', type: 'varchar', length: 200, collation: 'C', nullable: true })
  deadLetteredFrom: string | null;

  /** The item's headers as a JSON object's text; null: none. */
  @Column({ name: 'headers', type: 'text', nullable: true })
  headers: string | null;
}
