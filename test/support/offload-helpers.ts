import type TestAgent from 'supertest/lib/agent.js';
import { DataSource } from 'typeorm';
import { expect, vi } from 'vitest';
import type { OffloadStore } from '../../src/offload/offload-store.js';
import type { Item, QueueModel } from './queue-model.js';

/**
 * Helpers for the offloading tests (CONTRACT.md "Segments and offloading", seed 003
 * "Segment Offloading").
 */

/** One priority as `GET /queue/{id}` shows it. */
export interface PriorityInfo {
  count: number;
  head_segment: number;
  tail_segment: number;
  head_offloaded_segment: number | null;
  tail_offloaded_segment: number | null;
}

export interface QueueInfoBody {
  queue_id: string;
  count: number;
  priorities: Record<string, PriorityInfo>;
  config: { segment_size: number; buffer_segments: number };
  lock: unknown;
}

/** `GET /queue/{id}` (checks 200). */
export async function inspectQueue(http: TestAgent, queueId: string, label = ''): Promise<QueueInfoBody> {
  const res = await http.get(`/queue/${queueId}`);
  expect(res.status, `${label} GET /queue/${queueId}: ${JSON.stringify(res.body)}`).toBe(200);
  return res.body as QueueInfoBody;
}

/** `GET /queue/{id}/state/{key}`: the body on 200, undefined on 404 STATE_KEY_NOT_FOUND; anything else fails. */
export async function stateKey(http: TestAgent, queueId: string, key: string, label = ''): Promise<unknown> {
  const res = await http.get(`/queue/${queueId}/state/${key}`);
  if (res.status === 404) {
    expect(res.body, `${label} GET state/${key}`).toMatchObject({ statusCode: 404, error_code: 'STATE_KEY_NOT_FOUND' });
    return undefined;
  }
  expect(res.status, `${label} GET state/${key}: ${JSON.stringify(res.body)}`).toBe(200);
  return res.body;
}

/**
 * How strictly the offloaded range is checked:
 * - `at-rest`: no failures happened: the range lies strictly inside (head + buffer, tail), and it
 *   starts right after the buffer (`head + buffer + 1`): a head move loads back exactly the
 *   segments that came into the buffer, and offloading always starts after the buffer;
 * - `after-push`: as `at-rest`, and for a priority the push wrote to, every full middle
 *   segment is offloaded: the range is exactly `head + buffer + 1 .. tail - 1` (or absent when
 *   that is empty);
 * - `degraded`: loads may have failed: the range may start at or after the head (a segment in
 *   the buffer or the head itself that could not be loaded back), never before it.
 */
export type OffloadCheck = 'at-rest' | 'after-push' | 'degraded';

/** Problems of one priority's offloaded range; empty when it keeps the invariant. */
export function offloadRangeProblems(info: PriorityInfo, buffer: number, check: OffloadCheck): string[] {
  const { head_segment: head, tail_segment: tail, head_offloaded_segment: hos, tail_offloaded_segment: tos } = info;
  const problems: string[] = [];
  if ((hos === null) !== (tos === null)) return [`offloaded pair half set: ${hos}..${tos}`];
  if (hos === null || tos === null) {
    if (check === 'after-push' && head + buffer + 1 <= tail - 1)
      problems.push(`segments ${head + buffer + 1}..${tail - 1} are full middle segments but nothing is offloaded`);
    return problems;
  }
  if (!Number.isInteger(hos) || !Number.isInteger(tos)) problems.push(`offloaded range not integers: ${hos}..${tos}`);
  if (hos > tos) problems.push(`offloaded range ${hos}..${tos} is not a range`);
  if (tos >= tail) problems.push(`offloaded range ${hos}..${tos} reaches the tail ${tail}`);
  if (check === 'degraded') {
    if (hos < head) problems.push(`offloaded range ${hos}..${tos} starts before the head ${head}`);
  } else {
    if (hos <= head + buffer) problems.push(`segment ${hos} <= head ${head} + buffer ${buffer} is offloaded at rest`);
    else if (hos !== head + buffer + 1) problems.push(`offloaded range ${hos}..${tos} does not start right after the buffer (${head + buffer + 1})`);
  }
  if (check === 'after-push' && tos !== tail - 1) problems.push(`after a push the offloaded range ${hos}..${tos} should end at tail - 1 = ${tail - 1}`);
  return problems;
}

/** Asserts the offloaded range invariant for every priority of an inspection. */
export function expectOffloadInvariant(info: QueueInfoBody, check: OffloadCheck, label: string, pushedPriorities?: Set<number>): void {
  const buffer = info.config.buffer_segments;
  const problems: string[] = [];
  for (const [p, pi] of Object.entries(info.priorities)) {
    const mode: OffloadCheck = check === 'after-push' && pushedPriorities && !pushedPriorities.has(Number(p)) ? 'at-rest' : check;
    for (const problem of offloadRangeProblems(pi, buffer, mode)) problems.push(`priority ${p} ${JSON.stringify(pi)}: ${problem}`);
  }
  expect(problems, `${label}: offloaded range invariant (${check})`).toEqual([]);
}

/** Asserts that the inspection's counts equal the model's. */
export function expectCountsMatch(info: QueueInfoBody, model: QueueModel, label: string): void {
  expect(info.count, `${label}: count`).toBe(model.count());
  const counts = Object.fromEntries(Object.entries(info.priorities).map(([p, pi]) => [p, pi.count]));
  expect(counts, `${label}: count per priority`).toStrictEqual(model.countsByPriority());
}

/**
 * Reads the raw state of every priority and compares it with the model: the head segment is a
 * prefix of the model's items; each offloaded segment is absent under `queue_<p>_seg_<n>`, and
 * its `offloaded_…` key holds exactly the model's items at that place; the segment right
 * before and right after the offloaded range are in the actor's state with the right items.
 * Returns how many offloaded segments were compared.
 */
export async function expectRawStateMatches(
  http: TestAgent,
  queueId: string,
  info: QueueInfoBody,
  model: QueueModel,
  label: string,
  maxSegmentsPerPriority = 3,
): Promise<number> {
  const size = info.config.segment_size;
  let compared = 0;
  for (const [p, pi] of Object.entries(info.priorities)) {
    const items = model.itemsAt(Number(p));
    const where = `${label}, priority ${p} ${JSON.stringify(pi)}`;
    const head = (await stateKey(http, queueId, `queue_${p}_seg_${pi.head_segment}`, where)) as Item[] | undefined;
    expect(head, `${where}: head segment in state`).toBeDefined();
    expect(head, `${where}: head segment`).toStrictEqual(items.slice(0, head!.length));
    const startOf = (n: number): number => head!.length + (n - pi.head_segment - 1) * size;
    const segmentAt = (n: number): Item[] => items.slice(startOf(n), startOf(n) + size);
    if (pi.head_offloaded_segment === null || pi.tail_offloaded_segment === null) continue;
    const hos = pi.head_offloaded_segment;
    const tos = pi.tail_offloaded_segment;
    const numbers = [...new Set([hos, tos, Math.floor((hos + tos) / 2)])].slice(0, maxSegmentsPerPriority);
    for (const n of numbers) {
      expect(
        await stateKey(http, queueId, `queue_${p}_seg_${n}`, where),
        `${where}: offloaded segment ${n} must not be under queue_${p}_seg_${n}`,
      ).toBeUndefined();
      expect(await stateKey(http, queueId, `offloaded_queue_${p}_seg_${n}_${queueId}`, where), `${where}: offloaded segment ${n}`).toStrictEqual(segmentAt(n));
      compared += 1;
    }
    if (hos - 1 > pi.head_segment) {
      expect(await stateKey(http, queueId, `queue_${p}_seg_${hos - 1}`, where), `${where}: segment ${hos - 1} before the offloaded range`).toStrictEqual(
        segmentAt(hos - 1),
      );
      expect(
        await stateKey(http, queueId, `offloaded_queue_${p}_seg_${hos - 1}_${queueId}`, where),
        `${where}: segment ${hos - 1} is not offloaded`,
      ).toBeUndefined();
    }
    if (tos + 1 < pi.tail_segment) {
      expect(await stateKey(http, queueId, `queue_${p}_seg_${tos + 1}`, where), `${where}: segment ${tos + 1} after the offloaded range`).toStrictEqual(
        segmentAt(tos + 1),
      );
    }
  }
  return compared;
}

/**
 * Rows a queue still has in the database: items in `segment_items` and segments in the
 * offload store's table `offloaded_segments` (to check that a drained or deleted queue leaves
 * nothing behind in either place).
 */
export async function storedRows(app: { get(token: typeof DataSource): DataSource }, queueId: string): Promise<{ items: number; offloaded: number }> {
  const db = app.get(DataSource);
  const items = await db.query<{ n: number }[]>(`SELECT count(*)::int AS n FROM segment_items WHERE queue_id = $1`, [queueId]);
  const offloaded = await db.query<{ n: number }[]>(`SELECT count(*)::int AS n FROM offloaded_segments WHERE queue_id = $1`, [queueId]);
  return { items: Number(items[0]?.n), offloaded: Number(offloaded[0]?.n) };
}

export type StoreMethod = 'save' | 'load' | 'delete';

/** Calls and injected failures per store method. */
export interface StoreFaults {
  readonly calls: Record<StoreMethod, number>;
  readonly failures: Record<StoreMethod, number>;
  restore(): void;
}

/**
 * Wraps methods of the (singleton) offload store with `vi.spyOn` so that calls for which
 * `fail(method, n)` (n = 1, 2, … per method) is true throw; the others run the original.
 * `after` makes a failing call run the original first and then throw (the store did the
 * work but reported a failure: the caller must undo it).
 */
export function injectStoreFaults(
  store: OffloadStore,
  methods: StoreMethod[],
  fail: (method: StoreMethod, n: number) => boolean,
  after?: (method: StoreMethod, n: number) => boolean,
): StoreFaults {
  const calls: Record<StoreMethod, number> = { save: 0, load: 0, delete: 0 };
  const failures: Record<StoreMethod, number> = { save: 0, load: 0, delete: 0 };
  const spies: { mockRestore(): void }[] = [];
  const wrap =
    <A extends unknown[], R>(method: StoreMethod, original: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      const n = (calls[method] += 1);
      if (!fail(method, n)) return original(...args);
      failures[method] += 1;
      if (after?.(method, n)) await original(...args);
      throw new Error(`injected ${method} failure #${failures[method]}`);
    };
  if (methods.includes('save')) {
    const original = store.save.bind(store);
    spies.push(vi.spyOn(store, 'save').mockImplementation(wrap('save', original)));
  }
  if (methods.includes('load')) {
    const original = store.load.bind(store);
    spies.push(vi.spyOn(store, 'load').mockImplementation(wrap('load', original)));
  }
  if (methods.includes('delete')) {
    const original = store.delete.bind(store);
    spies.push(vi.spyOn(store, 'delete').mockImplementation(wrap('delete', original)));
  }
  return {
    calls,
    failures,
    restore: () => {
      for (const spy of spies) spy.mockRestore();
    },
  };
}

/** Push entries `{item: {p, s}, priority: p}` with per-priority sequence numbers. */
export function sequencedEntries(priorities: number[], n: number, next: Map<number, number>, pick: () => number): { item: Item; priority: number }[] {
  const out: { item: Item; priority: number }[] = [];
  for (let i = 0; i < n; i++) {
    const p = priorities[pick()];
    const s = next.get(p) ?? 0;
    next.set(p, s + 1);
    out.push({ item: { p, s }, priority: p });
  }
  return out;
}
