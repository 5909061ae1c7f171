import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsInt, IsString, Max, Min } from 'class-validator';
import { IsOmittable } from '../../common/validation.js';

/** `POST /queue/{queue_id}/redrive`: where the items go and how many at most; both optional. */
export class RedriveRequestDto {
  /**
   * The queue every moved item goes to (to the tail of its priority), not this queue itself.
   * Absent: each item goes back to the queue it was dead-lettered from, and items that were
   * never dead-lettered stay where they are.
   * @example "orders"
   */
  @ApiPropertyOptional({ type: 'string', maxLength: 200 })
  @IsOmittable()
  @IsString()
  destination?: string;

  /**
   * Items to move at most, 1-100000, taken from the front (lowest priority first, FIFO).
   * @example 10000
   */
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 100000, default: 10000 })
  @IsOmittable()
  @IsInt()
  @Min(1)
  @Max(100000)
  max_items?: number;
}
