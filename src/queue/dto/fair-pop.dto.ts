import { ApiProperty } from '@nestjs/swagger';
import { IsString, Matches } from 'class-validator';
import { QUEUE_ID_PATTERN } from '../core/queue-id.js';
import { PopQueryDto } from './pop-query.dto.js';
import { PopResponseDto } from './queue-responses.dto.js';

/** A fair pop's query: a queue pop's parameters, and the prefix of the queues to pop from. */
export class FairPopQueryDto extends PopQueryDto {
  /**
   * Pop from the queues whose ids start with this: 1-200 characters of A-Z a-z 0-9 . _ : @ -.
   * @example tenant-
   */
  @ApiProperty({ minLength: 1, maxLength: 200, pattern: QUEUE_ID_PATTERN.source })
  @IsString()
  @Matches(QUEUE_ID_PATTERN, { message: 'prefix must be 1-200 characters of A-Z a-z 0-9 . _ : @ -' })
  prefix: string;
}

/** Answer to a fair pop: a queue pop's answer, and the queue its items come from. */
export class FairPopResponseDto extends PopResponseDto {
  /**
   * The queue the items come from (absent when nothing was found): acknowledge, extend or
   * release the lock under `/queue/{queue_id}/…`.
   * @example tenant-42
   */
  @ApiProperty({ required: false })
  queue_id?: string;
}
