import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * One row per queue: the actor's metadata. `version` goes up by one with every committed turn
 * and starts at a random number when the queue is created, so a process whose cached copy
 * carries another version knows to reload (and a deleted and re-created queue does not meet
 * an old copy's version).
 */
@Entity('queues')
@Index('IDX_queues_next_due', ['nextDueAt'], { where: `"next_due_at" IS NOT NULL` })
export class QueueEntity {
  @PrimaryColumn({ name: 'queue_id', type: 'varchar', length: 200, collation: 'C' })
  queueId: string;

  @Column({ type: 'bigint' })
  version: string;

  @Column({ name: 'segment_size', type: 'integer' })
  segmentSize: number;

  @Column({ name: 'buffer_segments', type: 'integer' })
  bufferSegments: number;

  /** Items waiting in the queue (not counting items held by an acknowledgement lock). */
  @Column({ name: 'item_count', type: 'bigint', default: 0 })
  itemCount: string;

  /** Per priority: count, segment pointers and the offloaded range; the segment repository's `StoredPriority`. */
  @Column({ type: 'jsonb', default: {} })
  priorities: Record<string, object>;

  /** Delayed items of the queue (in `delayed_items`), not counted in `item_count`. */
  @Column({ name: 'delayed_count', type: 'bigint', default: 0 })
  delayedCount: string;

  /** Due time of the queue's earliest delayed item; null when it has none. A turn reads `delayed_items` only once this has passed. */
  @Column({ name: 'next_due_at', type: 'timestamptz', nullable: true })
  nextDueAt: Date | null;

  /** Sequence number of the queue's next delayed item (orders items due at the same time by push order). */
  @Column({ name: 'delayed_seq', type: 'bigint', default: 0 })
  delayedSeq: string;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt: Date;
}
