import { Injectable, PipeTransform } from '@nestjs/common';
import { InvalidQueueIdError } from '../common/errors.js';
import { isQueueId } from './core/queue-id.js';

/** Refuses queue ids outside the contract's alphabet, and `.` and `..`, with 400 INVALID_QUEUE_ID. */
@Injectable()
export class QueueIdPipe implements PipeTransform<unknown, string> {
  transform(value: unknown): string {
    if (!isQueueId(value)) throw new InvalidQueueIdError();
    return value;
  }
}
