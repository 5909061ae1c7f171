import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsOmittable } from '../../common/validation.js';
import { Type } from 'class-transformer';
import { ArrayMaxSize, ArrayMinSize, IsArray, IsDefined, IsInt, IsNumber, IsObject, IsString, Matches, Max, Min, ValidateNested } from 'class-validator';

/** Longest delay a push may ask for, in seconds: one year (365 days). */
export const MAX_DELAY_SECONDS = 31_536_000;

/** A deduplication id: 1-128 characters of the queue id alphabet. */
export const DEDUP_ID_PATTERN = /^[A-Za-z0-9._:@-]{1,128}$/;

export class PushItemDto {
  /**
   * The item: any JSON object (`{}` allowed), returned exactly as pushed. Arrays, strings,
   * numbers and null are refused; nesting deeper than 64 levels is refused (400 `ITEM_TOO_DEEP`);
   * more than `MAX_ITEM_BYTES` (default 262144) of JSON is refused (413 `ITEM_TOO_LARGE`).
   * @example {"task": "send-email", "to": "ada@example.com"}
   */
  @IsDefined()
  @IsObject()
  item: Record<string, unknown>;

  /**
   * Priority, 0 (popped first) to `MAX_PRIORITY` (default 255).
   * @example 0
   */
  @ApiPropertyOptional({ type: 'integer' })
  @IsOmittable()
  @IsInt()
  @Min(0)
  priority?: number = 0;

  /**
   * Seconds before the item becomes visible, 0 (at once, the default) to 31536000 (one year).
   * Until then it is not popped and not counted in `count` (`GET /queue/{queue_id}` shows it
   * under `delayed`); when it is due it joins the tail of its priority, due items in due-time
   * order, ties in push order. Not together with `deliver_at` (400, even `0`).
   * @example 30
   */
  @ApiPropertyOptional({ type: 'integer', minimum: 0, maximum: MAX_DELAY_SECONDS })
  @IsOmittable()
  @IsInt()
  @Min(0)
  @Max(MAX_DELAY_SECONDS)
  delay_seconds?: number;

  /**
   * When the item becomes visible, in unix seconds (fractions allowed), at most one year ahead;
   * a time in the past delivers at once. Instead of `delay_seconds`: giving both is 400.
   * @example 1767225600
   */
  @ApiPropertyOptional({ type: 'number', minimum: 0 })
  @IsOmittable()
  @IsNumber({ allowNaN: false, allowInfinity: false })
  @Min(0)
  deliver_at?: number;

  /**
   * Deduplication id, 1-128 characters of A-Z a-z 0-9 . _ : @ -. A push whose `dedup_id` was
   * accepted on the same queue within `DEDUP_WINDOW_SECONDS` (default 300) enqueues nothing and
   * answers `duplicate: true`; the window runs from the first accepted push and holds across
   * restarts and processes.
   * @example "order-1001-created"
   */
  @ApiPropertyOptional({ pattern: DEDUP_ID_PATTERN.source, minLength: 1, maxLength: 128 })
  @IsOmittable()
  @IsString()
  @Matches(DEDUP_ID_PATTERN, { message: 'dedup_id must be 1-128 characters of A-Z a-z 0-9 . _ : @ -' })
  dedup_id?: string;
}

export class PushBatchDto {
  /**
   * 1 to 1000 entries, pushed all or nothing, in this order. An entry whose `dedup_id` is a
   * duplicate (of an earlier push, or of an earlier entry of this batch) is skipped and counted
   * in `duplicates`.
   */
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(1000)
  @ValidateNested({ each: true })
  @Type(() => PushItemDto)
  items: PushItemDto[];
}
