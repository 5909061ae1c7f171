import { ApiPropertyOptional } from '@nestjs/swagger';
import { QueryInt } from '../../common/validation.js';
import { Transform } from 'class-transformer';
import { IsBoolean, IsInt, IsOptional, Max, Min } from 'class-validator';

const toBoolean = ({ value }: { value: unknown }): unknown => {
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  return value;
};

export class PopQueryDto {
  /**
   * How many items at most, 1 to 100. Spills over into the next priority.
   * @example 1
   */
  @ApiPropertyOptional({ type: 'integer' })
  @IsOptional()
  @QueryInt()
  @IsInt()
  @Min(1)
  @Max(100)
  depth?: number = 1;

  /** Hold the popped items under an acknowledgement lock (`true`/`false`/`1`/`0`). */
  @ApiPropertyOptional()
  @IsOptional()
  @Transform(toBoolean)
  @IsBoolean()
  require_ack?: boolean = false;

  /**
   * With `require_ack=true` on a queue in `lock_mode: "shared"`: each item under a lock of its
   * own, answered as `lock_ids` parallel to `items` (`true`/`false`/`1`/`0`). Without
   * `require_ack=true`, or on a queue in exclusive mode: 400 `VALIDATION_FAILED`.
   */
  @ApiPropertyOptional()
  @IsOptional()
  @Transform(toBoolean)
  @IsBoolean()
  lock_per_item?: boolean = false;

  /**
   * Answer each item's headers too, as `headers`, parallel to `items` (`true`/`false`/`1`/`0`).
   */
  @ApiPropertyOptional()
  @IsOptional()
  @Transform(toBoolean)
  @IsBoolean()
  include_headers?: boolean = false;

  /**
   * Lock time to live in seconds, 1 to 300 (with `require_ack`).
   * @example 30
   */
  @ApiPropertyOptional({ type: 'integer' })
  @IsOptional()
  @QueryInt()
  @IsInt()
  @Min(1)
  @Max(300)
  ttl_seconds?: number = 30;

  /**
   * Long poll: on an empty queue wait up to this many seconds (0 to 20) for an item; the answer
   * comes as soon as one arrives, also when another server process on the same database took
   * the push. A server already holding its maximum of waiting polls (`MAX_WAITING_POLLS`)
   * answers at once, as if this were 0.
   * @example 0
   */
  @ApiPropertyOptional({ type: 'integer' })
  @IsOptional()
  @QueryInt()
  @IsInt()
  @Min(0)
  @Max(20)
  wait_seconds?: number = 0;
}
