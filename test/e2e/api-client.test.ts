import { createPushpopClient, type ErrorCode, type ErrorResponse, type PopResponse, type PushpopClient, type QueueInfo } from '@pushpop/api-client';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { databaseKind, removeDataDir, startService, type TestService, uniqueQueueId } from '../support/service.js';

/**
 * The main flows through the client generated from the committed openapi.json
 * (libs/api-client). A document that no longer describes the service breaks this file twice:
 * at type-check (`npx tsc -p tsconfig.eslint.json`), where paths, parameters, bodies and
 * `error_code` unions come from the document, and at run time, where the answers must have
 * the documented shapes.
 */

/** The 2xx body of a client call; fails the test with the error body otherwise. */
function ok<T>(result: { data?: T; error?: unknown; response: Response }): T {
  if (result.error !== undefined || result.data === undefined) {
    throw new Error(`expected a 2xx answer, got ${result.response.status}: ${JSON.stringify(result.error)}`);
  }
  return result.data;
}

/** The error body of a client call, which must have answered `status`. */
function failed<E>(result: { data?: unknown; error?: E; response: Response }, status: number): E {
  expect(result.response.status, JSON.stringify(result.data ?? result.error)).toBe(status);
  expect(result.data).toBeUndefined();
  if (result.error === undefined) throw new Error(`expected an error body with ${status}`);
  return result.error;
}

describe(`generated API client (${databaseKind})`, () => {
  let svc: TestService;
  let client: PushpopClient;

  beforeAll(async () => {
    svc = await startService();
    client = createPushpopClient(svc.url);
  });
  afterAll(async () => {
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  const path = (queue_id: string) => ({ params: { path: { queue_id } } });

  it('push, batch push, pop with depth spilling over priorities, inspect, delete', async () => {
    const q = uniqueQueueId('client-flow');

    const pushed = ok(await client.POST('/queue/{queue_id}/push', { ...path(q), body: { item: { n: 1, tags: ['a'] }, priority: 2 } }));
    expect(pushed).toEqual({ success: true, message: `Item pushed to queue ${q} at priority 2` });

    const batch = ok(
      await client.POST('/queue/{queue_id}/push/batch', {
        ...path(q),
        body: { items: [{ item: { n: 2 } }, { item: { n: 3 }, priority: 1 }, { item: { n: 4 }, priority: 2 }, { item: { n: 5 } }] },
      }),
    );
    expect(batch).toMatchObject({ success: true, count: 4 });

    const info: QueueInfo = ok(await client.GET('/queue/{queue_id}', path(q)));
    expect(info).toMatchObject({ queue_id: q, count: 5, lock: null, config: { segment_size: expect.any(Number), buffer_segments: expect.any(Number) } });
    expect(Object.keys(info.priorities).sort()).toEqual(['0', '1', '2']);
    // Typed per priority through PriorityInfoDto.
    const p2 = info.priorities['2'];
    expect(p2.count).toBe(2);
    expect(p2.head_segment).toBe(p2.tail_segment);
    expect(p2.head_offloaded_segment).toBeNull();

    const metadata = ok(await client.GET('/queue/{queue_id}/state/{key}', { params: { path: { queue_id: q, key: 'metadata' } } }));
    expect(Array.isArray(metadata)).toBe(false);
    expect(metadata).toMatchObject({
      config: { segment_size: info.config.segment_size, buffer_segments: info.config.buffer_segments },
      queues: { queue_0: { metadata: { count: 2 } }, queue_1: { metadata: { count: 1 } }, queue_2: { metadata: { count: 2 } } },
    });
    const segment = ok(await client.GET('/queue/{queue_id}/state/{key}', { params: { path: { queue_id: q, key: 'queue_0_seg_0' } } }));
    expect(segment).toEqual([{ n: 2 }, { n: 5 }]);

    // depth=4 takes priority 0 (2 items), then 1 (1 item), then the first of priority 2.
    const popped: PopResponse = ok(await client.POST('/queue/{queue_id}/pop', { params: { path: { queue_id: q }, query: { depth: 4 } } }));
    expect(popped).toEqual({ items: [{ n: 2 }, { n: 5 }, { n: 3 }, { n: 1, tags: ['a'] }], count: 4 });

    const deleted = ok(await client.DELETE('/queue/{queue_id}', path(q)));
    expect(deleted).toEqual({ success: true, items_deleted: 1 });
    const gone = failed(await client.GET('/queue/{queue_id}', path(q)), 404);
    expect(gone.error_code).toBe('QUEUE_NOT_FOUND');

    const empty = ok(await client.POST('/queue/{queue_id}/pop', path(q)));
    expect(empty).toEqual({ items: [], count: 0 });
  });

  it('pop with require_ack holds the items under a lock: 423 while locked, extend-lock, release, acknowledge', async () => {
    const q = uniqueQueueId('client-ack');
    ok(
      await client.POST('/queue/{queue_id}/push/batch', {
        ...path(q),
        body: { items: [{ item: { id: 'a' } }, { item: { id: 'b' } }, { item: { id: 'c' }, priority: 3 }] },
      }),
    );

    const locked = ok(
      await client.POST('/queue/{queue_id}/pop', { params: { path: { queue_id: q }, query: { depth: 2, require_ack: true, ttl_seconds: 30 } } }),
    );
    expect(locked).toMatchObject({ items: [{ id: 'a' }, { id: 'b' }], count: 2, locked: true });
    expect(locked.lock_id).toMatch(/^[A-Za-z0-9_-]{11,}$/);
    const lockId = locked.lock_id!;
    expect(locked.lock_expires_at).toBeGreaterThan(Date.now() / 1000);

    // Any pop while the lock exists: 423 QUEUE_LOCKED with the lock's expiry.
    const busy = failed(await client.POST('/queue/{queue_id}/pop', path(q)), 423);
    expect(busy.error_code).toBe('QUEUE_LOCKED');
    if (busy.error_code !== 'QUEUE_LOCKED') throw new Error('unreachable');
    // Narrowed by error_code to the 423 body, which documents lock_expires_at.
    expect(busy.lock_expires_at).toBeCloseTo(locked.lock_expires_at!, 3);
    expect(busy).toMatchObject({ statusCode: 423, message: expect.any(String) });

    const info = ok(await client.GET('/queue/{queue_id}', path(q)));
    expect(info.count).toBe(1);
    expect(info.lock).toMatchObject({ item_count: 2 });
    expect(info.lock).not.toHaveProperty('lock_id');

    const extended = ok(await client.POST('/queue/{queue_id}/extend-lock', { ...path(q), body: { lock_id: lockId, ttl_seconds: 120 } }));
    expect(extended).toMatchObject({ success: true, lock_id: lockId });
    expect(extended.lock_expires_at).toBeGreaterThan(locked.lock_expires_at!);

    // Release: the items go back to the front of priority 0.
    const released = ok(await client.POST('/queue/{queue_id}/release', { ...path(q), body: { lock_id: lockId } }));
    expect(released).toEqual({ success: true, items_returned: 2, items_delayed: 0 });

    const again = ok(await client.POST('/queue/{queue_id}/pop', { params: { path: { queue_id: q }, query: { depth: 10, require_ack: true } } }));
    expect(again.items).toEqual([{ id: 'a' }, { id: 'b' }, { id: 'c' }]);
    expect(again.lock_id).not.toBe(lockId);

    // A lock id that does not match: 400 INVALID_LOCK_ID, the lock stays.
    const wrong = failed(await client.POST('/queue/{queue_id}/acknowledge', { ...path(q), body: { lock_id: 'AAAAAAAAAAA' } }), 400);
    expect(wrong).toMatchObject({ statusCode: 400, error_code: 'INVALID_LOCK_ID', success: false });
    if (wrong.error_code !== 'INVALID_LOCK_ID') throw new Error('unreachable');
    // Narrowed by error_code to the lock error body, which documents success.
    expectTypeOf(wrong.success).toEqualTypeOf<boolean>();

    const acked = ok(await client.POST('/queue/{queue_id}/acknowledge', { ...path(q), body: { lock_id: again.lock_id } }));
    expect(acked).toMatchObject({ success: true, items_acknowledged: 3 });

    // No lock any more: 404 LOCK_NOT_FOUND.
    const noLock = failed(await client.POST('/queue/{queue_id}/acknowledge', { ...path(q), body: { lock_id: again.lock_id } }), 404);
    expect(noLock).toMatchObject({ error_code: 'LOCK_NOT_FOUND', success: false });
    expect(ok(await client.POST('/queue/{queue_id}/pop', path(q)))).toEqual({ items: [], count: 0 });
  });

  it('GET /queues lists by prefix, a page at a time through next_cursor', async () => {
    const prefix = uniqueQueueId('client-list');
    const ids = [`${prefix}-c`, `${prefix}-a`, `${prefix}-b`];
    for (const [i, q] of ids.entries()) {
      ok(await client.POST('/queue/{queue_id}/push/batch', { ...path(q), body: { items: Array.from({ length: i + 1 }, (_, n) => ({ item: { n } })) } }));
    }
    ok(await client.POST('/queue/{queue_id}/pop', { params: { path: { queue_id: `${prefix}-b` }, query: { require_ack: true } } }));

    const first = ok(await client.GET('/queues', { params: { query: { prefix, limit: 2 } } }));
    expect(first.queues).toEqual([
      { queue_id: `${prefix}-a`, count: 2, locked: false, paused: false },
      { queue_id: `${prefix}-b`, count: 2, locked: true, paused: false },
    ]);
    expect(first.next_cursor).toEqual(expect.any(String));

    const second = ok(await client.GET('/queues', { params: { query: { prefix, limit: 2, cursor: first.next_cursor! } } }));
    expect(second).toEqual({ queues: [{ queue_id: `${prefix}-c`, count: 1, locked: false, paused: false }], next_cursor: null });

    const all = ok(await client.GET('/queues', { params: { query: { prefix } } }));
    expect(all.queues.map((s) => s.queue_id)).toEqual([`${prefix}-a`, `${prefix}-b`, `${prefix}-c`]);
    expect(all.next_cursor).toBeNull();
  });

  it('error answers come back typed: error_code is the union the document lists for the endpoint', async () => {
    /** What every operation behind an API key can answer once keys or a rate limit are configured. */
    type Auth = 'UNAUTHORIZED' | 'FORBIDDEN' | 'RATE_LIMITED';
    const q = uniqueQueueId('client-errors');

    // 400: a value outside the documented range.
    const badPriority = failed(await client.POST('/queue/{queue_id}/push', { ...path(q), body: { item: {}, priority: -1 } }), 400);
    expect(badPriority).toMatchObject({ statusCode: 400, error_code: 'VALIDATION_FAILED', message: expect.any(String) });
    expectTypeOf(badPriority.error_code).toEqualTypeOf<
      | 'INVALID_QUEUE_ID'
      | 'VALIDATION_FAILED'
      | 'ITEM_TOO_DEEP'
      | 'MALFORMED_JSON'
      | 'ITEM_TOO_LARGE'
      | 'PAYLOAD_TOO_LARGE'
      | 'UNSUPPORTED_MEDIA_TYPE'
      | 'QUEUE_BUSY'
      | 'STORE_UNAVAILABLE'
      | Auth
    >();
    expectTypeOf(badPriority.error_code).toExtend<ErrorCode>();

    const badDepth = failed(await client.POST('/queue/{queue_id}/pop', { params: { path: { queue_id: q }, query: { depth: 101 } } }), 400);
    expect(badDepth.error_code).toBe('VALIDATION_FAILED');
    expectTypeOf(badDepth.error_code).toEqualTypeOf<'INVALID_QUEUE_ID' | 'VALIDATION_FAILED' | 'QUEUE_LOCKED' | 'QUEUE_BUSY' | 'STORE_UNAVAILABLE' | Auth>();

    // 400: a queue id outside the documented alphabet (the client percent-encodes it).
    const badId = failed(await client.GET('/queue/{queue_id}', path('no spaces allowed')), 400);
    expect(badId.error_code).toBe('INVALID_QUEUE_ID');

    // 404s.
    const missing = failed(await client.GET('/queue/{queue_id}', path(q)), 404);
    expect(missing).toMatchObject({ statusCode: 404, error_code: 'QUEUE_NOT_FOUND' });
    expectTypeOf(missing.error_code).toEqualTypeOf<'INVALID_QUEUE_ID' | 'VALIDATION_FAILED' | 'QUEUE_NOT_FOUND' | 'QUEUE_BUSY' | 'STORE_UNAVAILABLE' | Auth>();
    ok(await client.POST('/queue/{queue_id}/push', { ...path(q), body: { item: { x: 1 } } }));
    const noKey = failed(await client.GET('/queue/{queue_id}/state/{key}', { params: { path: { queue_id: q, key: 'queue_9_seg_0' } } }), 404);
    expect(noKey.error_code).toBe('STATE_KEY_NOT_FOUND');
    const noLock = failed(await client.POST('/queue/{queue_id}/release', { ...path(q), body: { lock_id: 'AAAAAAAAAAA' } }), 404);
    expect(noLock.error_code).toBe('LOCK_NOT_FOUND');

    // 423 on a locked queue, with or without require_ack.
    ok(await client.POST('/queue/{queue_id}/pop', { params: { path: { queue_id: q }, query: { require_ack: true } } }));
    for (const require_ack of [false, true]) {
      const locked = failed(await client.POST('/queue/{queue_id}/pop', { params: { path: { queue_id: q }, query: { require_ack } } }), 423);
      if (locked.error_code !== 'QUEUE_LOCKED') throw new Error(`expected QUEUE_LOCKED, got ${JSON.stringify(locked)}`);
      expect(locked.lock_expires_at).toBeGreaterThan(Date.now() / 1000);
    }

    // Every error body has the common fields.
    const common: ErrorResponse = missing;
    expect(Object.keys(common).sort()).toEqual(expect.arrayContaining(['error_code', 'message', 'statusCode']));
  });
});
