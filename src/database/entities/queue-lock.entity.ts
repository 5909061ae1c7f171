import { Check, Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * The acknowledgement lock of a queue (at most one). `active`: holds popped items with their
 * original priorities until acknowledged, released or expired. `expired`: its items have gone
 * back to the queue; the row stays only so the old lock id answers 410 until a new lock
 * replaces it.
 */
@Entity('queue_locks')
@Check('CHK_queue_locks_state', `"state" IN ('active', 'expired')`)
@Index('IDX_queue_locks_due', ['expiresAt'], { where: `"state" = 'active'` })
export class QueueLockEntity {
  @PrimaryColumn({ name: 'queue_id', type: 'varchar', length: 200, collation: 'C' })
  queueId: string;

  @Column({ name: 'lock_id', type: 'varchar', length: 64 })
  lockId: string;

  @Column({ type: 'varchar', length: 16 })
  state: 'active' | 'expired';

  /** Original priority of each held item, parallel to `items`. */
  @Column({ type: 'integer', array: true })
  priorities: number[];

  /** The held items' JSON text, in pop order. */
  @Column({ type: 'text', array: true })
  items: string[];

  @Column({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt: Date;

  /** Where each held item was pushed (segment and position), parallel to `items`; null for locks written before these were kept. */
  @Column({ type: 'bigint', array: true, nullable: true })
  segments: string[] | null;

  @Column({ type: 'integer', array: true, nullable: true })
  positions: number[] | null;

  /** Deliveries of each held item, counting this lock. */
  @Column({ type: 'integer', array: true, nullable: true })
  deliveries: number[] | null;

  /** Per item, parallel to `items`: the queue it was dead-lettered from (null: never); null when none was. */
  @Column({ name: 'dead_lettered_from', type: 'varchar', length: 200, array: true, nullable: true })
  deadLetteredFrom: (string | null)[] | null;

  /** Per item, parallel to `items`: its headers as a JSON object's text (null: none); null when none has any. */
  @Column({ name: 'headers', type: 'text', array: true, nullable: true })
  headers: (string | null)[] | null;
}
