import { Injectable } from '@nestjs/common';

/** Counters of lock events, kept as turns commit and read by the metrics module. */
@Injectable()
export class LockStats {
  lockExpirations = 0;
  /** Items put back at the front of their queue, by reason. */
  readonly itemsRedelivered = { expired: 0, released: 0 };
}
