import type { Response, Test } from 'supertest';
import type TestAgent from 'supertest/lib/agent.js';
import { expect, vi } from 'vitest';
import { Clock } from '../../src/common/clock.js';

/**
 * Helpers for acknowledgement locks (CONTRACT.md "pop" with `require_ack`, "acknowledge",
 * "extend-lock", "release", "Lock expiry").
 */

/** A lock id: at least 11 characters of the URL-safe alphabet. */
/** The items of the lock tests: `{ id }`, with ids like `a0` (the letter the priority's, by convention). */
export type IdItem = { id: string };
/** The ids of `items`, in order. */
export const ids = (items: IdItem[]): string[] => items.map((i) => i.id);
/** Push entries of the items named, at `priority`. */
export const entries = (priority: number, ...names: string[]): { item: IdItem; priority: number }[] => names.map((id) => ({ item: { id }, priority }));

export const LOCK_ID_PATTERN = /^[A-Za-z0-9_-]{11,}$/;

export type LockEndpoint = 'acknowledge' | 'extend-lock' | 'release';
export const LOCK_ENDPOINTS: LockEndpoint[] = ['acknowledge', 'extend-lock', 'release'];

/** The contract's acknowledge table (the same errors for extend-lock and release), word for word. */
export const LOCK_ERRORS = {
  LOCK_ID_REQUIRED: { statusCode: 400, success: false, error_code: 'LOCK_ID_REQUIRED', message: 'lock_id is required' },
  LOCK_NOT_FOUND: { statusCode: 404, success: false, error_code: 'LOCK_NOT_FOUND', message: 'No active lock found' },
  LOCK_EXPIRED: { statusCode: 410, success: false, error_code: 'LOCK_EXPIRED', message: 'Lock has expired' },
  INVALID_LOCK_ID: { statusCode: 400, success: false, error_code: 'INVALID_LOCK_ID', message: 'Invalid lock_id' },
} as const;
export type LockErrorCode = keyof typeof LOCK_ERRORS;

/** Asserts the status and the whole error body of a lock endpoint's error. */
export function expectLockError(res: Response, code: LockErrorCode, label = ''): void {
  const want = LOCK_ERRORS[code];
  expect({ status: res.status, body: res.body }, `${label} expected ${want.statusCode} ${code}`).toMatchObject({ status: want.statusCode, body: want });
}

/** Asserts a 423 QUEUE_LOCKED answer; returns its lock_expires_at. */
export function expectQueueLocked(res: Response, label = ''): number {
  expect({ status: res.status, body: res.body }, `${label} expected 423 QUEUE_LOCKED`).toMatchObject({
    status: 423,
    body: { statusCode: 423, error_code: 'QUEUE_LOCKED', message: 'Queue is locked pending acknowledgement' },
  });
  expect(typeof res.body.lock_expires_at, `${label} lock_expires_at`).toBe('number');
  return res.body.lock_expires_at as number;
}

/** Asserts a 400 VALIDATION_FAILED answer. */
export function expectValidationFailed(res: Response, label = ''): void {
  expect({ status: res.status, error_code: res.body?.error_code, statusCode: res.body?.statusCode }, label).toEqual({
    status: 400,
    error_code: 'VALIDATION_FAILED',
    statusCode: 400,
  });
  expect(typeof res.body.message).toBe('string');
}

/**
 * Every request of these helpers gives up after this long (a hung request then fails the test
 * with a timeout error instead of hanging it).
 */
export const REQUEST_DEADLINE_MS = 20_000;
const bounded = (test: Test): Test => test.timeout({ deadline: REQUEST_DEADLINE_MS });

export interface PopAckOptions {
  depth?: number;
  ttl?: number;
}

export function popAck(http: TestAgent, queueId: string, options: PopAckOptions = {}): Test {
  const params = ['require_ack=true'];
  if (options.depth !== undefined) params.push(`depth=${options.depth}`);
  if (options.ttl !== undefined) params.push(`ttl_seconds=${options.ttl}`);
  return bounded(http.post(`/queue/${queueId}/pop?${params.join('&')}`));
}

/** A successful pop with require_ack that found items: checks the shape, returns the lock. */
export interface Lock<T = Record<string, unknown>> {
  lockId: string;
  expiresAt: number;
  items: T[];
}

export async function lockItems<T = Record<string, unknown>>(http: TestAgent, queueId: string, options: PopAckOptions = {}): Promise<Lock<T>> {
  const res = await popAck(http, queueId, options);
  expect({ status: res.status, locked: res.body?.locked }, `pop?require_ack on ${queueId}: ${JSON.stringify(res.body)}`).toEqual({ status: 200, locked: true });
  expect(res.body.lock_id).toMatch(LOCK_ID_PATTERN);
  expect(res.body.count).toBe(res.body.items.length);
  return { lockId: res.body.lock_id as string, expiresAt: res.body.lock_expires_at as number, items: res.body.items as T[] };
}

export function lockCall(http: TestAgent, endpoint: LockEndpoint, queueId: string, body: unknown): Test {
  return bounded(http.post(`/queue/${queueId}/${endpoint}`)).send(body as object);
}

export function acknowledge(http: TestAgent, queueId: string, lockId: unknown): Test {
  return lockCall(http, 'acknowledge', queueId, { lock_id: lockId });
}

export function release(http: TestAgent, queueId: string, lockId: unknown): Test {
  return lockCall(http, 'release', queueId, { lock_id: lockId });
}

export function extendLock(http: TestAgent, queueId: string, lockId: unknown, ttlSeconds?: number): Test {
  return lockCall(http, 'extend-lock', queueId, ttlSeconds === undefined ? { lock_id: lockId } : { lock_id: lockId, ttl_seconds: ttlSeconds });
}

/** Closes a service, giving up after `ms` (a connection stuck in a hung query would keep close() waiting forever). */
export async function closeWithin(close: () => Promise<void>, ms = 15_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([close(), new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

/** Pushes `{item, priority}` entries as one batch (checks 200). */
export async function pushAll(http: TestAgent, queueId: string, entries: { item: Record<string, unknown>; priority?: number }[]): Promise<void> {
  const res = await bounded(http.post(`/queue/${queueId}/push/batch`)).send({ items: entries });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
}

/** The queue's row in `GET /queues?prefix=<id>` (a listing runs no turn on the queue). */
export async function listed(http: TestAgent, queueId: string): Promise<{ queue_id: string; count: number; locked: boolean } | undefined> {
  const res = await bounded(http.get(`/queues?prefix=${encodeURIComponent(queueId)}`));
  expect(res.status).toBe(200);
  return (res.body.queues as { queue_id: string; count: number; locked: boolean }[]).find((r) => r.queue_id === queueId);
}

/**
 * A simulated clock: the service's Clock runs `offset` ms ahead of real time (undo with
 * `vi.restoreAllMocks()`, e.g. in an afterEach).
 */
export function timeTravel(app: { get(token: typeof Clock): Clock }): { advance(ms: number): void; nowSeconds(): number } {
  let offset = 0;
  vi.spyOn(app.get(Clock), 'now').mockImplementation(() => Date.now() + offset);
  return {
    advance: (ms) => {
      offset += ms;
    },
    nowSeconds: () => (Date.now() + offset) / 1000,
  };
}
