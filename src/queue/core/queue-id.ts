/** The contract's alphabet of queue ids. */
export const QUEUE_ID_PATTERN = /^[A-Za-z0-9._:@-]{1,200}$/;

/** Whether a queue id is valid: the contract's alphabet, and not `.` or `..` (URL normalisation in clients and proxies makes those unreachable). */
export function isQueueId(value: unknown): value is string {
  return typeof value === 'string' && QUEUE_ID_PATTERN.test(value) && value !== '.' && value !== '..';
}
