import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * One row per queue: the actor's metadata. `version` goes up by one with every committed turn
 * and starts at a random number when the queue is created, so a process whose cached copy
 * carries another version knows to reload (and a deleted and re-created queue does not meet
 * an old copy's version).
 */
@Entity('queues')
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

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt: Date;
}
