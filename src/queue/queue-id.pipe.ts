import { Injectable, PipeTransform } from '@nestjs/common';
import { InvalidQueueIdError } from '../common/errors.js';

export const QUEUE_ID_PATTERN = /^[A-Za-z0-9._:@-]{1,200}$/;

/** Refuses queue ids outside the contract's alphabet with 400 INVALID_QUEUE_ID. */
@Injectable()
export class QueueIdPipe implements PipeTransform<unknown, string> {
  transform(value: unknown): string {
    if (typeof value !== 'string' || !QUEUE_ID_PATTERN.test(value)) throw new InvalidQueueIdError();
    return value;
  }
}
