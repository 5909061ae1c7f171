import { ApiPropertyOptional } from '@nestjs/swagger';
import { QueryInt } from '../../common/validation.js';
import { IsInt, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';

export class ListQueuesQueryDto {
  /** Only queues whose id starts with this. */
  @ApiPropertyOptional()
  @IsOptional()
  @IsString()
  @MaxLength(200)
  prefix?: string = '';

  /**
   * Page size, 1 to 1000.
   * @example 100
   */
  @ApiPropertyOptional({ type: 'integer' })
  @IsOptional()
  @QueryInt()
  @IsInt()
  @Min(1)
  @Max(1000)
  limit?: number = 100;

  /** `next_cursor` of the previous page. */
  @ApiPropertyOptional()
  @IsOptional()
  @IsString()
  @MaxLength(400)
  cursor?: string;
}
