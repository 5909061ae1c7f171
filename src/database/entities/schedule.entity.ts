import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * A schedule: a recurring push of `item` to `queue_id` at the times of a cron expression in a
 * time zone. `next_run_at` is the firing the sweep waits for (null while paused, or when the
 * expression fires no more); a process claims a firing by moving it on with a conditional
 * update (`… WHERE next_run_at = <the firing>`), so each firing is taken once. The sweep finds
 * due schedules through the partial index on `next_run_at`; schedules not due cost nothing.
 */
@Entity('schedules')
@Index('IDX_schedules_next_run', ['nextRunAt'], { where: `NOT "paused" AND "next_run_at" IS NOT NULL` })
export class ScheduleEntity {
  @PrimaryColumn({ name: 'schedule_id', type: 'varchar', length: 200, collation: 'C' })
  scheduleId: string;

  @Column({ name: 'queue_id', type: 'varchar', length: 200, collation: 'C' })
  queueId: string;

  @Column({ name: 'cron', type: 'varchar', length: 1000 })
  cron: string;

  @Column({ name: 'timezone', type: 'varchar', length: 100 })
  timezone: string;

  /** The item's JSON text, as a push stores it (text, not jsonb: items may hold `\u0000`). */
  @Column({ name: 'item', type: 'text' })
  item: string;

  @Column({ name: 'priority', type: 'integer', default: 0 })
  priority: number;

  @Column({ name: 'paused', type: 'boolean', default: false })
  paused: boolean;

  @Column({ name: 'next_run_at', type: 'timestamptz', nullable: true })
  nextRunAt: Date | null;

  @Column({ name: 'last_run_at', type: 'timestamptz', nullable: true })
  lastRunAt: Date | null;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt: Date;
}
