import { Injectable, PipeTransform } from '@nestjs/common';
import { InvalidScheduleIdError } from '../common/errors.js';
import { isQueueId } from '../queue/core/queue-id.js';

/** Refuses schedule ids that break the queue id rules (alphabet, length, `.` and `..`) with 400 INVALID_SCHEDULE_ID. */
@Injectable()
export class ScheduleIdPipe implements PipeTransform<unknown, string> {
  transform(value: unknown): string {
    if (!isQueueId(value)) throw new InvalidScheduleIdError();
    return value;
  }
}
