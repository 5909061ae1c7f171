import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * An item a shared lock gave back (expired or released), waiting to be popped again. Keyed by
 * where it was pushed, so a priority's given-back items are one index range in push order; a
 * pop takes them before the items still in the segments.
 */
@Entity('returned_items')
export class ReturnedItemEntity {
  @PrimaryColumn({ name: 'queue_id', type: 'varchar', length: 200, collation: 'C' })
  queueId: string;

  @PrimaryColumn({ type: 'integer' })
  priority: number;

  @PrimaryColumn({ type: 'bigint' })
  segment: string;

  @PrimaryColumn({ type: 'integer' })
  position: number;

  @Column({ type: 'text' })
  item: string;

  @Column({ type: 'integer' })
  deliveries: number;

  /** The queue the item was dead-lettered from; null: never dead-lettered. */
  @Column({ name: 'dead_lettered_from', type: 'varchar', length: 200, collation: 'C', nullable: true })
  deadLetteredFrom: string | null;

  /** The item's headers as a JSON object's text; null: none. */
  @Column({ name: 'headers', type: 'text', nullable: true })
  headers: string | null;
}
