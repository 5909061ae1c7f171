import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * An item pushed with a delay, kept apart from the segments until it is due: then a turn of its
 * queue moves it to the tail of its priority (deleting this row in the same statement). The
 * primary key orders a queue's delayed items by due time, ties by push order (`seq` counts per
 * queue, `queues.delayed_seq`), so a turn reads its due items as one index range.
 */
@Entity('delayed_items')
export class DelayedItemEntity {
  @PrimaryColumn({ name: 'queue_id', type: 'varchar', length: 200, collation: 'C' })
  queueId: string;

  @PrimaryColumn({ name: 'due_at', type: 'timestamptz' })
  dueAt: Date;

  @PrimaryColumn({ type: 'bigint' })
  seq: string;

  @Column({ type: 'integer' })
  priority: number;

  /** The item as JSON text, exactly as pushed (see `segment_items.item`). */
  @Column({ type: 'text' })
  item: string;

  /** The queue the item was dead-lettered from; null: never dead-lettered. */
  @Column({ name: 'dead_lettered_from', type: 'varchar', length: 200, collation: 'C', nullable: true })
  deadLetteredFrom: string | null;

  /** The item's headers as a JSON object's text; null: none. */
  @Column({ name: 'headers', type: 'text', nullable: true })
  headers: string | null;

  /** An item given back and waiting out its retry delay: where it was pushed (it returns to the front of its priority in push order) and its deliveries; null for a pushed item. */
  @Column({ name: 'origin_segment', type: 'bigint', nullable: true })
  originSegment: string | null;

  @Column({ name: 'origin_position', type: 'integer', nullable: true })
  originPosition: number | null;

  @Column({ type: 'integer', nullable: true })
  deliveries: number | null;
}
