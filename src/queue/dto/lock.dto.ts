import { ApiPropertyOptional } from '@nestjs/swagger';
import { Allow, IsInt, Max, Min } from 'class-validator';
import { IsOmittable } from '../../common/validation.js';

export class LockRequestDto {
  /**
   * The `lock_id` returned by `pop?require_ack=true`. Missing, empty or not a string answers
   * 400 `LOCK_ID_REQUIRED`.
   * @example "Xb3kQ9_zA1c"
   */
  @Allow()
  lock_id?: string;
}

export class ExtendLockRequestDto extends LockRequestDto {
  /**
   * New time to live from now, 1 to 300 seconds.
   * @example 30
   */
  @ApiPropertyOptional({ type: 'integer' })
  @IsOmittable()
  @IsInt()
  @Min(1)
  @Max(300)
  ttl_seconds?: number = 30;
}

export class ReleaseRequestDto extends LockRequestDto {
  /**
   * Seconds the released items wait before they are visible again, 0 to 900; replaces the
   * queue's retry delay for this release (0: back at once). Left out: the queue's retry delay.
   * @example 10
   */
  @ApiPropertyOptional({ type: 'integer', minimum: 0, maximum: 900 })
  @IsOmittable()
  @IsInt()
  @Min(0)
  @Max(900)
  delay_seconds?: number;
}
