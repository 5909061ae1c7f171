import { ApiProperty, ApiPropertyOptional, IntersectionType, PickType } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { Allow, ArrayMaxSize, ArrayMinSize, IsArray, IsBoolean, IsInt, IsObject, IsString, Max, Min, ValidateNested } from 'class-validator';
import { ArrayDistinct, IsOmittable } from '../../common/validation.js';

export class LockRequestDto {
  /**
   * The `lock_id` returned by `pop?require_ack=true`. Missing, empty or not a string answers
   * 400 `LOCK_ID_REQUIRED`.
   * @example "Xb3kQ9_zA1c"
   */
  @Allow()
  lock_id?: string;
}

/** The pop an acknowledgement makes after it (always with `require_ack=true`, never waiting): the query parameters of a pop, each optional. */
export class NextPopDto {
  /**
   * How many items at most, 1 to 100.
   * @example 1
   */
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 100 })
  @IsOmittable()
  @IsInt()
  @Min(1)
  @Max(100)
  depth?: number;

  /**
   * Lock time to live in seconds, 1 to 300.
   * @example 30
   */
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 300 })
  @IsOmittable()
  @IsInt()
  @Min(1)
  @Max(300)
  ttl_seconds?: number;

  /**
   * Each item under a lock of its own (a queue in `lock_mode: "shared"` only).
   * @example false
   */
  @IsOmittable()
  @IsBoolean()
  lock_per_item?: boolean;

  /**
   * Answer each item's headers too.
   * @example false
   */
  @IsOmittable()
  @IsBoolean()
  include_headers?: boolean;
}

export class AcknowledgeRequestDto extends LockRequestDto {
  /**
   * When the acknowledgement succeeds, pop this queue with these parameters in the same request
   * (`require_ack=true`, no waiting); the answer carries that pop's answer as `next`.
   * @example {"depth": 1, "ttl_seconds": 30}
   */
  @IsOmittable()
  @IsObject()
  @ValidateNested()
  @Type(() => NextPopDto)
  next?: NextPopDto;
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
   * Not with `dead_letter: true`.
   * @example 10
   */
  @ApiPropertyOptional({ type: 'integer', minimum: 0, maximum: 900 })
  @IsOmittable()
  @IsInt()
  @Min(0)
  @Max(900)
  delay_seconds?: number;

  /**
   * Send the lock's items to the tail of the queue's `dead_letter_queue` at once, at their
   * priorities, whatever their delivery counts (409 `NO_DEAD_LETTER_QUEUE` on a queue without
   * one; the lock stays). Not with `delay_seconds`.
   * @example false
   */
  @IsOmittable()
  @IsBoolean()
  dead_letter?: boolean;
}

/** Lock ids of a batch acknowledge or release. */
export class LockIdsRequestDto {
  /**
   * 1 to 1000 distinct lock ids, each as `pop?require_ack=true` returned it. Each is answered in
   * `results`, in this order, as the single route would answer it.
   * @example ["Xb3kQ9_zA1c", "pQ7_r2LmN0s"]
   */
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(1000)
  @ArrayDistinct()
  @ApiProperty({ uniqueItems: true })
  @IsString({ each: true })
  lock_ids: string[];
}

export class AcknowledgeBatchRequestDto extends LockIdsRequestDto {
  /**
   * When at least one lock was acknowledged, pop this queue with these parameters in the same
   * request (`require_ack=true`, no waiting); the answer carries that pop's answer as `next`.
   * @example {"depth": 10, "lock_per_item": true}
   */
  @IsOmittable()
  @IsObject()
  @ValidateNested()
  @Type(() => NextPopDto)
  next?: NextPopDto;
}

/** A batch release takes the single release's options, with their validation and documentation, for every lock. */
export class ReleaseBatchRequestDto extends IntersectionType(LockIdsRequestDto, PickType(ReleaseRequestDto, ['delay_seconds', 'dead_letter'] as const)) {}
