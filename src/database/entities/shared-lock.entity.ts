import { Check, Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * A lock of a queue in shared mode (any number per queue). `active`: holds popped items until
 * acknowledged, released or expired. `expired`: its items went back; the row stays (without
 * items) so that its id answers 410, and is forgotten an hour after expiry.
 */
@Entity('shared_locks')
@Check('CHK_shared_locks_state', `"state" IN ('active', 'expired')`)
@Index('IDX_shared_locks_live', ['queueId', 'expiresAt'], { where: `"state" = 'active'` })
@Index('IDX_shared_locks_expired', ['expiresAt'], { where: `"state" = 'expired'` })
export class SharedLockEntity {
  @PrimaryColumn({ name: 'queue_id', type: 'varchar', length: 200, collation: 'C' })
  queueId: string;

  @PrimaryColumn({ name: 'lock_id', type: 'varchar', length: 64, collation: 'C' })
  lockId: string;

  @Column({ type: 'varchar', length: 16 })
  state: 'active' | 'expired';

  /** Per held item, parallel to `items`: its priority, where it was pushed, and its deliveries counting this lock. */
  @Column({ type: 'integer', array: true })
  priorities: number[];

  @Column({ type: 'bigint', array: true })
  segments: string[];

  @Column({ type: 'integer', array: true })
  positions: number[];

  @Column({ type: 'text', array: true })
  items: string[];

  @Column({ type: 'integer', array: true })
  deliveries: number[];

  @Column({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt: Date;

  /** Per item, parallel to `items`: the queue it was dead-lettered from (null: never); null when none was. */
  @Column({ name: 'dead_lettered_from', type: 'varchar', length: 200, array: true, nullable: true })
  deadLetteredFrom: (string | null)[] | null;

  /** Per item, parallel to `items`: its headers as a JSON object's text (null: none); null when none has any. */
  @Column({ name: 'headers', type: 'text', array: true, nullable: true })
  headers: (string | null)[] | null;
}
