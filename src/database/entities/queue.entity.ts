import { Column, Entity, PrimaryColumn } from 'typeorm';
import type { PriorityMetadata } from './queue-metadata.js';

/**
 * One row per queue: the actor's metadata. `version` takes a new value from the
 * `queue_versions` sequence on every committed change, so a process whose cached copy carries
 * another version knows to reload (never equal across a delete and re-create either).
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

  /** Per priority: count, segment pointers and the offloaded range; see {@link PriorityMetadata}. */
  @Column({ type: 'jsonb', default: {} })
  priorities: Record<string, PriorityMetadata>;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt: Date;
}
