import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * A deduplication id accepted on a queue: another push with it is skipped until `expires_at`
 * (`DEDUP_WINDOW_SECONDS` after it was accepted). Written only by the queue's turns, in their
 * statement; expired rows are deleted by a sweep through the `expires_at` index.
 */
@Entity('dedup_ids')
@Index('IDX_dedup_ids_expires', ['expiresAt'])
export class DedupIdEntity {
  @PrimaryColumn({ name: 'queue_id', type: 'varchar', length: 200, collation: 'C' })
  queueId: string;

  @PrimaryColumn({ name: 'dedup_id', type: 'varchar', length: 128, collation: 'C' })
  dedupId: string;

  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt: Date;
}
