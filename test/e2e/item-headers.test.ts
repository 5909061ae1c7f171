import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ActorRegistry } from '../../src/queue/runtime/actor-registry.js';
import { closeWithin, release, timeTravel } from '../support/lock-helpers.js';
import { inspectQueue } from '../support/offload-helpers.js';
import { answer, range } from '../support/queue-helpers.js';
import { databaseKind, removeDataDir, startService, type TestService, uniqueQueueId } from '../support/service.js';

/**
 * Item headers over HTTP (CONTRACT.md, "Item headers" and "Details of the third additions"):
 * validation, `include_headers` on pop, the push request's `traceparent`, and headers staying
 * with their items through locks (exclusive and shared), release, expiry, retry delays, delayed
 * items, dead letters, redrive and offloaded segments (SEGMENT_SIZE 10, BUFFER_SEGMENTS 1).
 */
type Item = { id: string };
type Headers = Record<string, string>;
const ids = (items: Item[]): string[] => items.map((i) => i.id);

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const OTHER_TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

describe(`item headers (${databaseKind})`, () => {
  let svc: TestService;

  beforeAll(async () => {
    svc = await startService({ env: { SEGMENT_SIZE: '10', BUFFER_SEGMENTS: '1', LOCK_SWEEP_INTERVAL_MS: '200' } });
  });
  afterEach(() => vi.restoreAllMocks());
  afterAll(async () => {
    if (svc) await closeWithin(() => svc.close());
    if (svc) removeDataDir(svc.dataDir);
  });

  const push = (q: string, body: Record<string, unknown>, traceparent?: string) => {
    const req = svc.http.post(`/queue/${q}/push`);
    return answer(traceparent === undefined ? req.send(body) : req.set('traceparent', traceparent).send(body));
  };
  const batch = (q: string, items: Record<string, unknown>[], traceparent?: string) => {
    const req = svc.http.post(`/queue/${q}/push/batch`);
    return answer(traceparent === undefined ? req.send({ items }) : req.set('traceparent', traceparent).send({ items }));
  };
  const pop = async (q: string, query: string): Promise<Record<string, unknown> & { items: Item[]; headers?: Headers[] }> => {
    const res = await answer(svc.http.post(`/queue/${q}/pop?${query}`));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body as Record<string, unknown> & { items: Item[]; headers?: Headers[] };
  };
  const settle = async (q: string, body: Record<string, unknown>): Promise<void> => {
    const res = await answer(svc.http.put(`/queue/${q}/settings`).send(body));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  };
  const ok = async (p: Promise<{ status: number; body: unknown }>): Promise<void> => {
    const res = await p;
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  };

  it('headers: at most 16 string values, names 1-64 characters of A-Z a-z 0-9 . _ -, values at most 1024 characters; else 400 VALIDATION_FAILED', async () => {
    const q = uniqueQueueId('hd-valid');
    const sixteen = Object.fromEntries(range(16).map((i) => [`h${i}`, 'v']));
    const refused: [string, unknown][] = [
      ['an array', ['a']],
      ['a string', 'a=b'],
      ['null', null],
      ['a number value', { a: 1 }],
      ['a null value', { a: null }],
      ['an object value', { a: { b: 'c' } }],
      ['17 entries', { ...sixteen, h16: 'v' }],
      ['an empty name', { '': 'v' }],
      ['a name with a space', { 'a b': 'v' }],
      ['a name with a colon', { 'a:b': 'v' }],
      ['a 65-character name', { ['n'.repeat(65)]: 'v' }],
      ['a 1025-character value', { a: 'x'.repeat(1025) }],
      ['1025 characters outside the BMP', { a: '😀'.repeat(1025) }],
    ];
    for (const [label, headers] of refused) {
      const res = await push(q, { item: { id: 'x' }, headers });
      expect({ label, status: res.status, code: (res.body as { error_code?: string }).error_code }).toEqual({ label, status: 400, code: 'VALIDATION_FAILED' });
      expect((res.body as { message: string }).message, label).toContain('headers');
      const inBatch = await batch(q, [{ item: { id: 'ok' } }, { item: { id: 'x' }, headers }]);
      expect({ label, status: inBatch.status, code: (inBatch.body as { error_code?: string }).error_code }).toEqual({
        label,
        status: 400,
        code: 'VALIDATION_FAILED',
      });
      expect((inBatch.body as { message: string }).message, label).toContain('items.1.headers');
    }
    // Nothing of the refused requests was pushed.
    expect((await answer(svc.http.get(`/queue/${q}`))).status).toBe(404);

    const accepted: Headers[] = [
      {},
      sixteen,
      { ['n'.repeat(64)]: 'v', 'A.b_c-9': '' },
      { a: 'x'.repeat(1024) },
      // Measured in characters: 1024 characters, 2048 UTF-16 units.
      { a: '😀'.repeat(1024) },
    ];
    for (const headers of accepted) await ok(push(q, { item: { id: 'x' }, headers }));
    const popped = await pop(q, `depth=10&include_headers=true`);
    expect(popped.headers).toEqual(accepted);

    // Names such as __proto__ and constructor are header names like any other (sent as raw JSON: a JS literal would set a prototype).
    const raw = (q2: string, text: string) => answer(svc.http.post(`/queue/${q2}/push`).set('content-type', 'application/json').send(text));
    const protoRefused = await raw(q, '{"item": {"id": "p"}, "headers": {"__proto__": {"x": "1"}}}');
    expect({ status: protoRefused.status, code: (protoRefused.body as { error_code?: string }).error_code }).toEqual({
      status: 400,
      code: 'VALIDATION_FAILED',
    });
    expect((await raw(q, '{"item": {"id": "p"}, "headers": {"__proto__": "x", "constructor": "y", "b": "c"}}')).status).toBe(200);
    const proto = await svc.http.post(`/queue/${q}/pop?include_headers=true`);
    expect(proto.text).toBe('{"items":[{"id":"p"}],"headers":[{"__proto__":"x","constructor":"y","b":"c"}],"count":1}');

    for (const bad of ['yes', 'TRUE', '2', '']) {
      const res = await answer(svc.http.post(`/queue/${q}/pop?include_headers=${bad}`));
      expect({ bad, status: res.status, code: (res.body as { error_code?: string }).error_code }).toEqual({ bad, status: 400, code: 'VALIDATION_FAILED' });
    }
  });

  it('round trip: push and batch with headers, pop with include_headers (true/1) answers them parallel to items, {} for none; without it no headers field', async () => {
    const q = uniqueQueueId('hd-round');
    await ok(push(q, { item: { id: 'a' }, headers: { tenant: 'acme' } }));
    await ok(push(q, { item: { id: 'b' } }));
    await ok(batch(q, [{ item: { id: 'c' }, headers: { n: '1', 'x-kind': 'order' } }, { item: { id: 'd' } }, { item: { id: 'e' }, headers: { n: '2' } }]));

    const first = await pop(q, 'depth=2&include_headers=1');
    expect(ids(first.items)).toEqual(['a', 'b']);
    expect(first.headers).toEqual([{ tenant: 'acme' }, {}]);
    expect(Object.keys(first)).toEqual(['items', 'headers', 'count']);

    const plain = await pop(q, 'depth=1&include_headers=false');
    expect(plain).toEqual({ items: [{ id: 'c' }], count: 1 });

    const rest = await pop(q, 'depth=5&include_headers=true');
    expect(ids(rest.items)).toEqual(['d', 'e']);
    expect(rest.headers).toEqual([{}, { n: '2' }]);

    const empty = await pop(q, 'include_headers=true');
    expect(empty).toEqual({ items: [], headers: [], count: 0 });
  });

  it("a push request's traceparent is kept as the item header traceparent unless the entry sets one; batch entries too; a malformed one is ignored", async () => {
    const q = uniqueQueueId('hd-trace');
    await ok(push(q, { item: { id: 'a' } }, TRACEPARENT));
    await ok(push(q, { item: { id: 'b' }, headers: { tenant: 'acme' } }, TRACEPARENT));
    await ok(push(q, { item: { id: 'c' }, headers: { traceparent: OTHER_TRACEPARENT } }, TRACEPARENT));
    await ok(push(q, { item: { id: 'd' } }, 'not-a-traceparent'));
    await ok(batch(q, [{ item: { id: 'e' } }, { item: { id: 'f' }, headers: { traceparent: OTHER_TRACEPARENT, n: '1' } }], TRACEPARENT));

    const popped = await pop(q, 'depth=10&include_headers=true');
    expect(ids(popped.items)).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
    expect(popped.headers).toEqual([
      { traceparent: TRACEPARENT },
      { tenant: 'acme', traceparent: TRACEPARENT },
      { traceparent: OTHER_TRACEPARENT },
      {},
      { traceparent: TRACEPARENT },
      { traceparent: OTHER_TRACEPARENT, n: '1' },
    ]);
  });

  it('exclusive lock: the pop with ack answers the headers; released, the items come back with them', async () => {
    const q = uniqueQueueId('hd-excl');
    await ok(batch(q, [{ item: { id: 'a' }, headers: { n: 'a' } }, { item: { id: 'b' } }, { item: { id: 'c' }, headers: { n: 'c' }, priority: 1 }]));
    const locked = await pop(q, 'require_ack=true&depth=10&include_headers=true');
    expect(locked).toMatchObject({ locked: true, count: 3, headers: [{ n: 'a' }, {}, { n: 'c' }] });
    // The lock's items are read back from its row.
    svc.app.get(ActorRegistry).deactivate(q);
    const res = await release(svc.http, q, locked.lock_id);
    expect(res.body).toMatchObject({ success: true, items_returned: 3 });

    const again = await pop(q, 'require_ack=true&depth=10&include_headers=true');
    expect(ids(again.items)).toEqual(['a', 'b', 'c']);
    expect(again.headers).toEqual([{ n: 'a' }, {}, { n: 'c' }]);
    expect(again.delivery_counts).toEqual([2, 2, 2]);
  });

  it('shared lock: headers come back with items of an expired lock', async () => {
    const q = uniqueQueueId('hd-shared');
    await settle(q, { lock_mode: 'shared' });
    await ok(batch(q, [{ item: { id: 'a' }, headers: { n: 'a' } }, { item: { id: 'b' } }, { item: { id: 'c' }, headers: { n: 'c' } }]));
    const first = await pop(q, 'require_ack=true&depth=2&ttl_seconds=5&include_headers=true');
    expect(first.headers).toEqual([{ n: 'a' }, {}]);
    const second = await pop(q, 'require_ack=true&depth=1&ttl_seconds=60&include_headers=true');
    expect(ids(second.items)).toEqual(['c']);
    expect(second.headers).toEqual([{ n: 'c' }]);

    // The expired lock's items are read back from its row, and given back to the table of given-back items.
    svc.app.get(ActorRegistry).deactivate(q);
    const clock = timeTravel(svc.app);
    clock.advance(10_000);
    expect((await pop(q, 'depth=1&include_headers=true')).headers).toEqual([{ n: 'a' }]);
    svc.app.get(ActorRegistry).deactivate(q);
    const back = await pop(q, 'require_ack=true&depth=10&include_headers=true');
    expect(ids(back.items)).toEqual(['b']);
    expect(back.headers).toEqual([{}]);
  });

  it('retry delay: a released item waits out its delay and comes back with its headers', async () => {
    const q = uniqueQueueId('hd-retry');
    await settle(q, { retry_delay_seconds: 5, retry_backoff: 'fixed' });
    await ok(batch(q, [{ item: { id: 'a' }, headers: { n: 'a' } }, { item: { id: 'b' } }]));
    const locked = await pop(q, 'require_ack=true&depth=10');
    const res = await release(svc.http, q, locked.lock_id);
    expect(res.body).toMatchObject({ success: true, items_delayed: 2 });
    expect(await pop(q, 'include_headers=true')).toEqual({ items: [], headers: [], count: 0 });

    const clock = timeTravel(svc.app);
    clock.advance(6_000);
    const back = await pop(q, 'depth=10&include_headers=true');
    expect(ids(back.items)).toEqual(['a', 'b']);
    expect(back.headers).toEqual([{ n: 'a' }, {}]);
  });

  it('delayed items keep their headers (push and batch, with the request traceparent)', async () => {
    const q = uniqueQueueId('hd-delay');
    await ok(push(q, { item: { id: 'a' }, headers: { n: 'a' }, delay_seconds: 5 }));
    await ok(
      batch(
        q,
        [
          { item: { id: 'b' }, delay_seconds: 5 },
          { item: { id: 'c' }, delay_seconds: 5, headers: { n: 'c' } },
        ],
        TRACEPARENT,
      ),
    );
    expect((await pop(q, 'include_headers=true')).items).toEqual([]);

    const clock = timeTravel(svc.app);
    clock.advance(6_000);
    const due = await pop(q, 'depth=10&include_headers=true');
    expect(ids(due.items)).toEqual(['a', 'b', 'c']);
    expect(due.headers).toEqual([{ n: 'a' }, { traceparent: TRACEPARENT }, { n: 'c', traceparent: TRACEPARENT }]);
  });

  it('dead letters keep their headers, under a lock on the dead-letter queue too, and a redrive brings them back with them', async () => {
    const [q, dlq] = [uniqueQueueId('hd-src'), uniqueQueueId('hd-dlq')];
    await settle(q, { max_deliveries: 1, dead_letter_queue: dlq });
    await ok(batch(q, [{ item: { id: 'a' }, headers: { n: 'a' } }, { item: { id: 'b' } }, { item: { id: 'c' }, headers: { n: 'c' }, priority: 2 }]));
    const locked = await pop(q, 'require_ack=true&depth=10');
    expect((await release(svc.http, q, locked.lock_id)).body).toMatchObject({ success: true, items_dead_lettered: 3 });

    const inDlq = await pop(dlq, 'require_ack=true&depth=10&include_headers=true');
    expect(ids(inDlq.items)).toEqual(['a', 'b', 'c']);
    expect(inDlq.headers).toEqual([{ n: 'a' }, {}, { n: 'c' }]);
    expect((await release(svc.http, dlq, inDlq.lock_id)).body).toMatchObject({ success: true, items_returned: 3 });

    const redriven = await answer(svc.http.post(`/queue/${dlq}/redrive`).send({}));
    expect(redriven.body).toEqual({ success: true, items_moved: 3, items_left: 0 });
    const back = await pop(q, 'depth=10&include_headers=true');
    expect(ids(back.items)).toEqual(['a', 'b', 'c']);
    expect(back.headers).toEqual([{ n: 'a' }, {}, { n: 'c' }]);
  });

  it('offloaded segments (SEGMENT_SIZE 10) keep the headers of their items, also after the queue is loaded afresh', async () => {
    const q = uniqueQueueId('hd-offload');
    const n = 95;
    const headersOf = (i: number): Headers => (i % 3 === 0 ? {} : { n: String(i), ...(i % 2 === 0 ? { even: 'yes' } : {}) });
    const entries = range(n).map((i) => ({ item: { id: String(i) }, ...(i % 3 === 0 ? {} : { headers: headersOf(i) }) }));
    // In several batches, so that later pushes offload segments written by earlier ones.
    for (let from = 0; from < n; from += 20) await ok(batch(q, entries.slice(from, from + 20)));
    const info = await inspectQueue(svc.http, q);
    expect(info.priorities['0'].tail_offloaded_segment, JSON.stringify(info)).not.toBeNull();

    // A fresh activation reads the queue, its front segment and the offloaded ones from the database.
    svc.app.get(ActorRegistry).deactivate(q);
    const popped: Item[] = [];
    const headers: Headers[] = [];
    for (;;) {
      const res = await pop(q, 'depth=7&include_headers=true');
      if (res.items.length === 0) break;
      popped.push(...res.items);
      headers.push(...res.headers!);
    }
    expect(ids(popped)).toEqual(range(n).map(String));
    expect(headers).toEqual(range(n).map(headersOf));
  });
});
