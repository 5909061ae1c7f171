import type { QueueSnapshot } from '../core/types.js';
import type { LoadedQueue } from '../../database/stored-queue.js';
import { isQueueId } from '../core/queue-id.js';

/** The form of the payload; a receiver ignores any other. */
const FORMAT = 1;

/**
 * A queue's committed state as a notification payload (see {@link ItemNotifications}): a JSON
 * object `{"v":1,"q":queueId,"s":{"queue":…,"front":…}}`, the row and front segment a load would
 * read. It starts with `{`, which no queue id does.
 */
export function encodeQueueState(queueId: string, snapshot: QueueSnapshot): string {
  return JSON.stringify({ v: FORMAT, q: queueId, s: { queue: snapshot.record, front: snapshot.front } });
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const isInteger = (value: unknown): value is number => Number.isSafeInteger(value);

/**
 * The queue id and state of a payload made by {@link encodeQueueState}; undefined for anything
 * else (another form, from another version of pushpop, or not JSON at all).
 */
export function decodeQueueState(payload: string): { queueId: string; state: LoadedQueue } | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(payload);
  } catch {
    return undefined;
  }
  if (!isObject(parsed) || parsed.v !== FORMAT || !isQueueId(parsed.q) || !isObject(parsed.s)) return undefined;
  const { queue, front } = parsed.s;
  if (
    !isObject(queue) ||
    !isInteger(queue.version) ||
    !isObject(queue.settings) ||
    !isObject(queue.priorities) ||
    !isObject(queue.delayed) ||
    !isObject(queue.shared) ||
    queue.lock !== null
  )
    return undefined;
  if (!isObject(front) || !isInteger(front.priority) || !isInteger(front.segment) || !Array.isArray(front.entries)) return undefined;
  if (
    !front.entries.every(
      (e) =>
        isObject(e) &&
        isInteger(e.position) &&
        typeof e.json === 'string' &&
        (e.deliveries === undefined || isInteger(e.deliveries)) &&
        (e.from === undefined || typeof e.from === 'string') &&
        (e.headers === undefined || typeof e.headers === 'string'),
    )
  )
    return undefined;
  return { queueId: parsed.q, state: parsed.s as unknown as LoadedQueue };
}
