import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsInt, IsOptional, IsString, Max, Min } from 'class-validator';
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
}
