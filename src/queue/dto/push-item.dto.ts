import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsOmittable } from '../../common/validation.js';
import { Type } from 'class-transformer';
import { ArrayMaxSize, ArrayMinSize, IsArray, IsDefined, IsInt, IsObject, Min, ValidateNested } from 'class-validator';

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
}

export class PushBatchDto {
  /** 1 to 1000 entries, pushed all or nothing, in this order. */
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(1000)
  @ValidateNested({ each: true })
  @Type(() => PushItemDto)
  items: PushItemDto[];
}
