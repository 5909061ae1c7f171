import { Injectable } from '@nestjs/common';

/** The service's notion of now (epoch milliseconds). One injectable so lock expiry can be tested without waiting. */
@Injectable()
export class Clock {
  now(): number {
    return Date.now();
  }
}
