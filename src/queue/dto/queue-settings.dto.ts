import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsBoolean, IsIn, IsInt, IsNumber, IsOptional, IsString, Max, Min } from 'class-validator';
import { IsOmittable } from '../../common/validation.js';

/** `PUT /queue/{queue_id}/settings`: any of the settings; those left out stay as they are. */
export class QueueSettingsRequestDto {
  /**
   * Items per segment, 1-10000. Changes only while the queue holds no items and no lock (else 409 `QUEUE_NOT_EMPTY`).
   * @example 100
   */
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 10000 })
  @IsOmittable()
  @IsInt()
  @Min(1)
  @Max(10000)
  segment_size?: number;

  /**
   * Segments after the head kept out of the offload store, 1-1000. Same rule as `segment_size`.
   * @example 1
   */
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 1000 })
  @IsOmittable()
  @IsInt()
  @Min(1)
  @Max(1000)
  buffer_segments?: number;

  /**
   * `exclusive` (one lock at a time; every pop 423 while it lives) or `shared` (competing
   * consumers: each pop with ack takes the next items under a lock of its own). Changes only
   * while no lock lives (else 409 `QUEUE_LOCKED`).
   * @example "shared"
   */
  @ApiPropertyOptional({ enum: ['exclusive', 'shared'] })
  @IsOmittable()
  @IsString()
  @IsIn(['exclusive', 'shared'])
  lock_mode?: 'exclusive' | 'shared';

  /**
   * Deliveries after which an item whose lock expires or is released goes to the tail of
   * `dead_letter_queue` instead of back, 1-1000; null: no limit. Needs `dead_letter_queue`.
   * @example 5
   */
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 1000, nullable: true })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(1000)
  max_deliveries?: number | null;

  /**
   * The queue that items reaching `max_deliveries` go to (an ordinary queue, created when the
   * first item arrives), not this queue itself; null: none.
   * @example "orders.dead"
   */
  @ApiPropertyOptional({ type: 'string', nullable: true, maxLength: 200 })
  @IsOptional()
  @IsString()
  dead_letter_queue?: string | null;

  /**
   * While true, pops hand out nothing (they answer `paused: true`; a long poll waits and is
   * answered within 200 ms of the resume). Pushes, locks, expiry, dead letters and delayed
   * items go on as usual. Never null.
   * @example true
   */
  @ApiPropertyOptional({ type: 'boolean' })
  @IsOmittable()
  @IsBoolean()
  paused?: boolean;

  /**
   * Seconds an item given back by a lock's expiry or release (and not dead-lettered) waits
   * before it is visible again, 0-900; 0: at once. Never above `retry_delay_max_seconds` (400,
   * judged by the settings the request would leave). Never null.
   * @example 5
   */
  @ApiPropertyOptional({ type: 'integer', minimum: 0, maximum: 900 })
  @IsOmittable()
  @IsInt()
  @Min(0)
  @Max(900)
  retry_delay_seconds?: number;

  /**
   * `fixed`: every retry waits `retry_delay_seconds`; `exponential`: `retry_delay_seconds ×
   * 2^(deliveries−1)`, at most `retry_delay_max_seconds`. Never null.
   * @example "exponential"
   */
  @ApiPropertyOptional({ enum: ['fixed', 'exponential'] })
  @IsOmittable()
  @IsString()
  @IsIn(['fixed', 'exponential'])
  retry_backoff?: 'fixed' | 'exponential';

  /**
   * Ceiling of an exponential retry delay, 1-900 seconds, at least `retry_delay_seconds`. Never null.
   * @example 300
   */
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 900 })
  @IsOmittable()
  @IsInt()
  @Min(1)
  @Max(900)
  retry_delay_max_seconds?: number;

  /**
   * Items held by live locks (exclusive or shared) at most, 1-100000; a pop with `require_ack`
   * takes at most the room left, and answers `limited: true` with none. null: no limit.
   * @example 100
   */
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 100000, nullable: true })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(100000)
  max_in_flight?: number | null;

  /**
   * Items handed out by pops per second at most, all processes together, 0.1-100000 (bursts up
   * to one second's worth, at least 1); a pop with no budget left answers `limited: true`.
   * null: no limit.
   * @example 50
   */
  @ApiPropertyOptional({ type: 'number', minimum: 0.1, maximum: 100000, nullable: true })
  @IsOptional()
  @IsNumber({ allowNaN: false, allowInfinity: false })
  @Min(0.1)
  @Max(100000)
  max_pops_per_second?: number | null;
}
