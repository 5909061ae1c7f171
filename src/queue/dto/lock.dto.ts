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
