import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * One row per queue: the actor's metadata. `version` goes up by one with every committed turn
 * and starts at a random number when the queue is created, so a process whose cached copy
 * carries another version knows to reload (and a deleted and re-created queue does not meet
 * an old copy's version).
 */
@Entity('queues')
@Index('IDX_queues_next_due', ['nextDueAt'], { where: `"next_due_at" IS NOT NULL` })
@Index('IDX_queues_next_lock_expiry', ['nextLockExpiry'], { where: `"next_lock_expiry" IS NOT NULL` })
@Index('IDX_queues_paused', ['paused'], { where: `"paused"` })
@Index('IDX_queues_ready', ['queueId'], { where: `"ready"` })
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

  /** Per priority: count, segment pointers and the offloaded range; the queue core's `PriorityMetadata`. */
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

  /** `exclusive` (one lock at a time, the seeds) or `shared` (competing consumers, locks in `shared_locks`). */
  @Column({ name: 'lock_mode', type: 'varchar', length: 16, default: 'exclusive' })
  lockMode: 'exclusive' | 'shared';

  /** Deliveries after which an item given back goes to `dead_letter_queue`; null: no limit. */
  @Column({ name: 'max_deliveries', type: 'integer', nullable: true })
  maxDeliveries: number | null;

  @Column({ name: 'dead_letter_queue', type: 'varchar', length: 200, collation: 'C', nullable: true })
  deadLetterQueue: string | null;

  /** Live shared locks and the items they hold. */
  @Column({ name: 'live_locks', type: 'integer', default: 0 })
  liveLocks: number;

  @Column({ name: 'locked_items', type: 'bigint', default: 0 })
  lockedItems: string;

  /** No live shared lock expires before this (a lower bound: extending a lock leaves it); null: no live shared lock. */
  @Column({ name: 'next_lock_expiry', type: 'timestamptz', nullable: true })
  nextLockExpiry: Date | null;

  /** Pops hand out nothing while set. */
  @Column({ type: 'boolean', default: false })
  paused: boolean;

  /** Base retry delay of items given back (0: at once), `retry_backoff` `fixed` or `exponential`, capped by `retry_delay_max_seconds`. */
  @Column({ name: 'retry_delay_seconds', type: 'integer', default: 0 })
  retryDelaySeconds: number;

  @Column({ name: 'retry_backoff', type: 'varchar', length: 16, default: 'exponential' })
  retryBackoff: 'fixed' | 'exponential';

  @Column({ name: 'retry_delay_max_seconds', type: 'integer', default: 900 })
  retryDelayMaxSeconds: number;

  /** Items held by live locks at most; null: no limit. */
  @Column({ name: 'max_in_flight', type: 'integer', nullable: true })
  maxInFlight: number | null;

  /** Items handed out by pops per second at most; null: no limit. */
  @Column({ name: 'max_pops_per_second', type: 'double precision', nullable: true })
  maxPopsPerSecond: number | null;

  /** The pop budget (a token bucket shared by every process): tokens left at `pop_tokens_at` (epoch ms); null: full. */
  @Column({ name: 'pop_tokens', type: 'double precision', nullable: true })
  popTokens: number | null;

  @Column({ name: 'pop_tokens_at', type: 'double precision', nullable: true })
  popTokensAt: number | null;

  /**
   * The ready set of fair pops: items to hand out (`item_count > 0`) and not paused. Kept by the
   * trigger `queues_ready` on the transitions only; never written by the service.
   */
  @Column({ type: 'boolean', default: false, insert: false, update: false })
  ready: boolean;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt: Date;
}
