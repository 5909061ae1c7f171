import { expect } from 'vitest';
import type TestAgent from 'supertest/lib/agent.js';

/** A small seeded PRNG (mulberry32): the same seed gives the same run, so failures reproduce. */
export function seededRandom(seed: number): { next(): number; int(min: number, max: number): number; seed: number } {
  let a = seed >>> 0;
  const next = (): number => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, int: (min, max) => min + Math.floor(next() * (max - min + 1)), seed };
}

/** The seed for this run: TEST_SEED when set, else the clock (print it in failure messages). */
export function testSeed(): number {
  return process.env.TEST_SEED ? Number(process.env.TEST_SEED) : Date.now() % 1_000_000_007;
}

/**
 * Runs of a property test: `n` scaled by `PROPERTY_RUNS_SCALE` (default 1), at least 1. CI runs
 * the suite three times (embedded PostgreSQL, the machine's PostgreSQL, Node 24): the first pass
 * runs every property in full, the repeats a third of the runs with other seeds.
 */
export function propertyRuns(n: number): number {
  const scale = Number(process.env.PROPERTY_RUNS_SCALE ?? 1);
  return Math.max(1, Math.round(n * (Number.isFinite(scale) && scale > 0 ? scale : 1)));
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Resolves once `condition()` holds (polled every `pollMs`), or after `timeoutMs` regardless. */
export async function until(condition: () => boolean, timeoutMs = 30_000, pollMs = 2): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) return false;
    await sleep(pollMs);
  }
  return true;
}

export const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

/**
 * Pops a queue empty with `depth=100` pops, returning the items in pop order. Fails (throws)
 * on a non-200 answer or when more than `maxPops` pops are needed.
 */
export async function drain<T = Record<string, unknown>>(http: TestAgent, queueId: string, maxPops = 1000): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < maxPops; i++) {
    const res = await answer(http.post(`/queue/${queueId}/pop?depth=100`));
    if (res.status !== 200) throw new Error(`pop on ${queueId} answered ${res.status}: ${JSON.stringify(res.body)}`);
    if (res.body.count === 0) return out;
    out.push(...(res.body.items as T[]));
  }
  throw new Error(`queue ${queueId} not empty after ${maxPops} pops`);
}

/** Groups values by a key, keeping their order. */
export function groupBy<T>(values: T[], key: (v: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const v of values) {
    const k = key(v);
    const list = out.get(k);
    if (list) list.push(v);
    else out.set(k, [v]);
  }
  return out;
}

/** What {@link answer} resolves to: the response, or status 0 when no answer came in time. */
export interface Answer {
  status: number;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  headers: Record<string, string>;
}

/**
 * Sends a supertest request with a deadline and never rejects: a request that gets no answer
 * within `ms` (a stalled queue) or fails at the socket level resolves with status 0 and the
 * error in `body.error`, so concurrent loops can record it and stop instead of hanging the test.
 */
export async function answer(req: { timeout(ms: number | { response?: number; deadline?: number }): PromiseLike<unknown> }, ms = 10_000): Promise<Answer> {
  try {
    const res = (await req.timeout({ deadline: ms })) as { status: number; body: unknown; headers: Record<string, string> };
    return { status: res.status, body: res.body, headers: res.headers };
  } catch (error) {
    const e = error as { status?: number; response?: { status: number; body: unknown; headers: Record<string, string> }; message?: string; timeout?: number };
    if (e.response) return { status: e.response.status, body: e.response.body, headers: e.response.headers };
    return { status: 0, body: { error: e.timeout ? `no answer within ${ms} ms` : String(e.message ?? error) }, headers: {} };
  }
}

/** Resolves with `p`'s value, or with `fallback` once `ms` passed (for shutdowns that may hang). */
export async function within<T>(p: Promise<T>, ms: number, fallback: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<T>((r) => (timer = setTimeout(() => r(fallback), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** What {@link callService} got: a status and JSON body, or 'no answer' (refused, dropped or timed out). */
export interface CallOutcome<B = Record<string, unknown>> {
  status: number | 'no answer';
  body?: B;
  retryAfter?: string | null;
}

/**
 * One request with fetch, for tests that stop or restart what answers: a refused or dropped
 * connection (or no answer within `timeoutMs`) is 'no answer', never an exception.
 */
export async function callService<B = Record<string, unknown>>(
  url: string,
  method: string,
  path: string,
  body?: unknown,
  timeoutMs = 20_000,
): Promise<CallOutcome<B>> {
  try {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    return { status: res.status, body: (await res.json()) as B, retryAfter: res.headers.get('retry-after') };
  } catch {
    return { status: 'no answer' };
  }
}

/**
 * Exactly once, for a load whose pushes may go unanswered: no key popped twice, every push
 * acknowledged popped, and nothing popped that was neither acknowledged nor maybe pushed (a
 * push left without an answer may or may not have committed).
 */
export function expectPoppedExactlyOnce(popped: readonly string[], acked: ReadonlySet<string>, maybe: ReadonlySet<string>): void {
  const seen = new Set<string>();
  const duplicates = popped.filter((k) => (seen.has(k) ? true : (seen.add(k), false)));
  expect(duplicates, 'no item popped twice').toEqual([]);
  expect(
    [...acked].filter((k) => !seen.has(k)),
    'every acknowledged push popped',
  ).toEqual([]);
  expect(
    popped.filter((k) => !acked.has(k) && !maybe.has(k)),
    'nothing popped that was never pushed',
  ).toEqual([]);
}
