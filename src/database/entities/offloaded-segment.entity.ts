import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * A segment moved out of its queue's state by the database offload store (key
 * `offloaded_queue_…`), or a segment brought back into the state and kept packed in one row
 * (key `queue_<p>_seg_<n>`, whatever the offload store; see `storage/packed-segments.ts`).
 */
@Entity('offloaded_segments')
export class OffloadedSegmentEntity {
  @PrimaryColumn({ name: 'queue_id', type: 'varchar', length: 200, collation: 'C' })
  queueId: string;

  /** `offloaded_queue_{priority}_seg_{n}_{queue_id}`, or `queue_{priority}_seg_{n}` for a packed segment */
  @PrimaryColumn({ type: 'varchar', length: 300, collation: 'C' })
  key: string;

  /** The segment's items as JSON texts, in order. */
  @Column({ type: 'text', array: true })
  items: string[];

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;

  /** Per item, parallel to `items`: the queue it was dead-lettered from (null: never); null when none was. */
  @Column({ name: 'dead_lettered_from', type: 'varchar', length: 200, array: true, nullable: true })
  deadLetteredFrom: (string | null)[] | null;

  /** Per item, parallel to `items`: its headers as a JSON object's text (null: none); null when none has any. */
  @Column({ name: 'headers', type: 'text', array: true, nullable: true })
  headers: (string | null)[] | null;
}
