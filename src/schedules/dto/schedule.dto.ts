import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsBoolean, IsDefined, IsInt, IsObject, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { IsOmittable, QueryInt } from '../../common/validation.js';

/** The body of `PUT /schedules/{schedule_id}`. */
export class PutScheduleDto {
  /**
   * The queue each firing pushes to (a queue id: 1-200 characters of A-Z a-z 0-9 . _ : @ -).
   * @example "reports"
   */
  @IsString()
  queue_id: string;

  /**
   * A cron expression: 5 fields (minute hour day-of-month month day-of-week), or 6 with seconds
   * first. Ranges, lists, steps and names (`mon`, `jan`) as in cron; when both day fields are
   * restricted, either one matching fires. An invalid expression is 400 `VALIDATION_FAILED`.
   * @example "0 6 * * 1-5"
   */
  @IsString()
  @MaxLength(1000)
  cron: string;

  /**
   * The IANA time zone the expression is read in (default `UTC`). A local time skipped by a
   * daylight-saving change fires at the first local time after the gap; a local time that
   * happens twice fires once, at its first occurrence. An unknown zone is 400 `VALIDATION_FAILED`.
   * @example "Europe/Berlin"
   */
  @ApiPropertyOptional({ default: 'UTC' })
  @IsOmittable()
  @IsString()
  @MaxLength(100)
  timezone?: string;

  /**
   * The item each firing pushes: any JSON object, checked as a push's item (nesting, `MAX_ITEM_BYTES`).
   * @example {"report": "daily-sales"}
   */
  @IsDefined()
  @IsObject()
  item: Record<string, unknown>;

  /**
   * The priority it is pushed at, 0 (default) to `MAX_PRIORITY`.
   * @example 0
   */
  @ApiPropertyOptional({ type: 'integer', default: 0 })
  @IsOmittable()
  @IsInt()
  @Min(0)
  priority?: number;

  /**
   * A paused schedule fires nothing (and `next_run_at` is null); unpaused, it goes on from the
   * first firing after that moment, without making up the firings it skipped.
   * @example false
   */
  @ApiPropertyOptional({ default: false })
  @IsOmittable()
  @IsBoolean()
  paused?: boolean;
}

/** A schedule as the service answers it. */
export class ScheduleDto {
  /** @example "nightly-report" */
  schedule_id: string;
  /** @example "reports" */
  queue_id: string;
  /** @example "0 6 * * 1-5" */
  cron: string;
  /** @example "Europe/Berlin" */
  timezone: string;
  /** @example {"report": "daily-sales"} */
  @ApiProperty({ type: 'object', additionalProperties: true })
  item: Record<string, unknown>;
  /** @example 0 */
  @ApiProperty({ type: 'integer' })
  priority: number;
  /** @example false */
  paused: boolean;
  /**
   * The next firing, unix seconds; null while paused or when the expression fires no more.
   * @example 1767247200
   */
  @ApiProperty({ type: 'number', nullable: true })
  next_run_at: number | null;
  /**
   * The last firing pushed (its scheduled time, unix seconds); null before the first.
   * @example 1767160800
   */
  @ApiProperty({ type: 'number', nullable: true })
  last_run_at: number | null;
}

/** A page of schedules, in schedule id order. */
export class ScheduleListDto {
  schedules: ScheduleDto[];
  /** Pass as `cursor` for the next page; null on the last page. */
  next_cursor: string | null;
}

export class DeleteScheduleResponseDto {
  /** @example true */
  success: boolean;
}

export class ListSchedulesQueryDto {
  /**
   * Page size, 1 to 1000 (default 1000).
   * @example 100
   */
  @ApiPropertyOptional({ type: 'integer' })
  @IsOptional()
  @QueryInt()
  @IsInt()
  @Min(1)
  @Max(1000)
  limit?: number = 1000;

  /** `next_cursor` of the previous page. */
  @ApiPropertyOptional()
  @IsOptional()
  @IsString()
  @MaxLength(400)
  cursor?: string;
}
