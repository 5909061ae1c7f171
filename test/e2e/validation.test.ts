import fc from 'fast-check';
import type { Response } from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeDataDir, startService, TestService, uniqueQueueId } from '../support/service.js';
import { propertyRuns } from '../support/queue-helpers.js';

/** Every error response carries the contract's body: `statusCode`, a stable `error_code`, a message for people. */
function expectError(res: Response, status: number, errorCode: string): void {
  expect({ status: res.status, error_code: res.body?.error_code }).toEqual({ status, error_code: errorCode });
  expect(res.body.statusCode).toBe(status);
  expect(typeof res.body.message).toBe('string');
  expect(res.body.message.length).toBeGreaterThan(0);
}

/** `levels` nested objects: the item itself is level 1. */
function nestedObject(levels: number): Record<string, unknown> {
  let value: Record<string, unknown> = { leaf: true };
  for (let i = 1; i < levels; i++) value = { n: value };
  return value;
}

const ALLOWED_ID_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:@-';

describe('bad input', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startService();
  });
  afterAll(async () => {
    await svc.close();
    removeDataDir(svc.dataDir);
  });

  /** The queue was never created: nothing was pushed to it. */
  async function expectNothingPushed(q: string): Promise<void> {
    expectError(await svc.http.get(`/queue/${q}`), 404, 'QUEUE_NOT_FOUND');
    const pop = await svc.http.post(`/queue/${q}/pop?depth=100`);
    expect(pop.status).toBe(200);
    expect(pop.body).toEqual({ items: [], count: 0 });
  }

  /** Pushes one item to a fresh queue and pops it back. */
  async function roundTrip(item: unknown): Promise<Response> {
    const q = uniqueQueueId('rt');
    const push = await svc.http.post(`/queue/${q}/push`).send({ item });
    expect(push.status).toBe(200);
    const pop = await svc.http.post(`/queue/${q}/pop`);
    expect(pop.status).toBe(200);
    return pop;
  }

  describe('queue ids', () => {
    const badIds: [string, string][] = [
      ['201 characters', 'a'.repeat(201)],
      ['a space', 'a%20b'],
      ['an encoded slash', 'a%2Fb'],
      ['a non-ASCII letter', encodeURIComponent('ä')],
      ['an asterisk', 'a*'],
      ['a plus', 'a+b'],
      ['a percent sign', 'a%25b'],
      ['a comma', 'a,b'],
      ['an emoji', encodeURIComponent('q😀')],
      ['only a dot', '.'],
      ['only two dots', '..'],
    ];

    it.each(badIds)('refuses an id with %s on every queue endpoint with 400 INVALID_QUEUE_ID', async (_label, id) => {
      expectError(await svc.http.post(`/queue/${id}/push`).send({ item: { a: 1 } }), 400, 'INVALID_QUEUE_ID');
      expectError(await svc.http.post(`/queue/${id}/push/batch`).send({ items: [{ item: { a: 1 } }] }), 400, 'INVALID_QUEUE_ID');
      expectError(await svc.http.post(`/queue/${id}/pop`), 400, 'INVALID_QUEUE_ID');
      expectError(await svc.http.get(`/queue/${id}`), 400, 'INVALID_QUEUE_ID');
      expectError(await svc.http.get(`/queue/${id}/state/metadata`), 400, 'INVALID_QUEUE_ID');
      expectError(await svc.http.delete(`/queue/${id}`), 400, 'INVALID_QUEUE_ID');
    });

    it('refuses a bad id before looking at the body', async () => {
      expectError(await svc.http.post(`/queue/a*/push`).send({ item: 'not an object' }), 400, 'INVALID_QUEUE_ID');
    });

    it('accepts a 200-character id made of every allowed character on every endpoint', async () => {
      const prefix = uniqueQueueId('max');
      let q = prefix;
      while (q.length < 200) q += ALLOWED_ID_CHARS[(q.length - prefix.length) % ALLOWED_ID_CHARS.length];
      expect(q).toHaveLength(200);
      for (const c of ALLOWED_ID_CHARS) expect(q).toContain(c);

      const push = await svc.http.post(`/queue/${q}/push`).send({ item: { a: 1 } });
      expect(push.status).toBe(200);
      expect(push.body.message).toContain(q);
      expect((await svc.http.post(`/queue/${q}/push/batch`).send({ items: [{ item: { b: 2 } }] })).status).toBe(200);
      const info = await svc.http.get(`/queue/${q}`);
      expect(info.status).toBe(200);
      expect(info.body).toMatchObject({ queue_id: q, count: 2 });
      const meta = await svc.http.get(`/queue/${q}/state/metadata`);
      expect(meta.status).toBe(200);
      expect(meta.body.queues.queue_0.metadata.count).toBe(2);
      const listed = await svc.http.get('/queues').query({ prefix: q });
      expect(listed.status).toBe(200);
      expect(listed.body.queues).toEqual([{ queue_id: q, count: 2, locked: false, paused: false }]);
      const pop = await svc.http.post(`/queue/${q}/pop`);
      expect(pop.body).toEqual({ items: [{ a: 1 }], count: 1 });
      const del = await svc.http.delete(`/queue/${q}`);
      expect(del.status).toBe(200);
      expect(del.body).toEqual({ success: true, items_deleted: 1 });
      expectError(await svc.http.get(`/queue/${q}`), 404, 'QUEUE_NOT_FOUND');
    });
  });

  describe('the item', () => {
    const notObjects: [string, unknown][] = [
      ['an array', [1, 2]],
      ['an empty array', []],
      ['a string', 'hello'],
      ['a number', 42],
      ['null', null],
      ['true', true],
      ['false', false],
    ];

    it.each(notObjects)('refuses %s as the item with 400 VALIDATION_FAILED and pushes nothing', async (_label, item) => {
      const q = uniqueQueueId('notobj');
      expectError(await svc.http.post(`/queue/${q}/push`).send({ item }), 400, 'VALIDATION_FAILED');
      expectError(await svc.http.post(`/queue/${q}/push/batch`).send({ items: [{ item }] }), 400, 'VALIDATION_FAILED');
      await expectNothingPushed(q);
    });

    it('refuses a missing item with 400 VALIDATION_FAILED naming the field', async () => {
      const q = uniqueQueueId('noitem');
      const res = await svc.http.post(`/queue/${q}/push`).send({ priority: 1 });
      expectError(res, 400, 'VALIDATION_FAILED');
      expect(res.body.message).toContain('item');
      expectError(await svc.http.post(`/queue/${q}/push`).send({}), 400, 'VALIDATION_FAILED');
      expectError(await svc.http.post(`/queue/${q}/push`), 400, 'VALIDATION_FAILED');
      expectError(await svc.http.post(`/queue/${q}/push/batch`).send({ items: [{ priority: 1 }] }), 400, 'VALIDATION_FAILED');
      await expectNothingPushed(q);
    });

    it('accepts the empty object as an item', async () => {
      const pop = await roundTrip({});
      expect(pop.body).toEqual({ items: [{}], count: 1 });
    });

    it('refuses a body that is not a JSON object', async () => {
      const q = uniqueQueueId('arrbody');
      const arrayBody = await svc.http.post(`/queue/${q}/push`).send([{ item: { a: 1 } }]);
      expect(arrayBody.status).toBe(400);
      expect(arrayBody.body.statusCode).toBe(400);
      expect(['VALIDATION_FAILED', 'MALFORMED_JSON']).toContain(arrayBody.body.error_code);
      expectError(await svc.http.post(`/queue/${q}/push`).set('content-type', 'application/json').send('"text"'), 400, 'MALFORMED_JSON');
      // CONTRACT.md "Request hygiene": a JSON null body is a validation failure, not malformed JSON.
      expectError(await svc.http.post(`/queue/${q}/push`).set('content-type', 'application/json').send('null'), 400, 'VALIDATION_FAILED');
      await expectNothingPushed(q);
    });
  });

  describe('priority', () => {
    const badPriorities: [string, unknown][] = [
      ['negative', -1],
      ['fractional', 1.5],
      ['a numeric string', '1'],
      ['above MAX_PRIORITY', 256],
      ['far above MAX_PRIORITY', 1e9],
      ['a boolean', true],
      ['an object', { p: 1 }],
      ['null (not the same as leaving it out)', null],
    ];

    it.each(badPriorities)('refuses a %s priority with 400 VALIDATION_FAILED on push and batch push', async (_label, priority) => {
      const q = uniqueQueueId('prio');
      expectError(await svc.http.post(`/queue/${q}/push`).send({ item: { a: 1 }, priority }), 400, 'VALIDATION_FAILED');
      expectError(await svc.http.post(`/queue/${q}/push/batch`).send({ items: [{ item: { a: 1 }, priority }] }), 400, 'VALIDATION_FAILED');
      await expectNothingPushed(q);
    });

    it('names the limit 255 when the priority is 256, and the field', async () => {
      const q = uniqueQueueId('prio256');
      const res = await svc.http.post(`/queue/${q}/push`).send({ item: { a: 1 }, priority: 256 });
      expectError(res, 400, 'VALIDATION_FAILED');
      expect(res.body.message).toContain('255');
      expect(res.body.message).toContain('priority');
    });

    it('accepts priority 255 and treats an omitted priority as 0', async () => {
      const q = uniqueQueueId('prio255');
      const high = await svc.http.post(`/queue/${q}/push`).send({ item: { p: 255 }, priority: 255 });
      expect(high.status).toBe(200);
      expect(high.body).toEqual({ success: true, message: `Item pushed to queue ${q} at priority 255` });
      const omitted = await svc.http.post(`/queue/${q}/push`).send({ item: { p: 'default' } });
      expect(omitted.status).toBe(200);
      expect(omitted.body).toEqual({ success: true, message: `Item pushed to queue ${q} at priority 0` });
      const batch = await svc.http
        .post(`/queue/${q}/push/batch`)
        .send({ items: [{ item: { p: 'batch-default' } }, { item: { p: 'batch-255' }, priority: 255 }] });
      expect(batch.status).toBe(200);
      const info = await svc.http.get(`/queue/${q}`);
      expect(Object.keys(info.body.priorities).sort()).toEqual(['0', '255']);
      expect(info.body.priorities['0'].count).toBe(2);
      expect(info.body.priorities['255'].count).toBe(2);
      const pop = await svc.http.post(`/queue/${q}/pop?depth=10`);
      expect(pop.body.items).toEqual([{ p: 'default' }, { p: 'batch-default' }, { p: 255 }, { p: 'batch-255' }]);
    });
  });

  describe('unknown fields', () => {
    it('refuses an unknown top-level field on push with 400 VALIDATION_FAILED naming it', async () => {
      const q = uniqueQueueId('unk');
      const res = await svc.http.post(`/queue/${q}/push`).send({ item: { a: 1 }, priority: 0, colour: 'red' });
      expectError(res, 400, 'VALIDATION_FAILED');
      expect(res.body.message).toContain('colour');
      await expectNothingPushed(q);
    });

    it('refuses an unknown top-level field on batch push', async () => {
      const q = uniqueQueueId('unkb');
      expectError(await svc.http.post(`/queue/${q}/push/batch`).send({ items: [{ item: { a: 1 } }], atomic: true }), 400, 'VALIDATION_FAILED');
      await expectNothingPushed(q);
    });

    it('refuses an unknown field inside a batch entry', async () => {
      const q = uniqueQueueId('unke');
      const res = await svc.http.post(`/queue/${q}/push/batch`).send({ items: [{ item: { a: 1 } }, { item: { a: 2 }, visibility_timeout: 5 }] });
      expectError(res, 400, 'VALIDATION_FAILED');
      expect(res.body.message).toContain('visibility_timeout');
      await expectNothingPushed(q);
    });

    it('keeps unknown fields inside the item: the item is arbitrary JSON', async () => {
      const item = { priority: 7, colour: 'red', items: [1], item: { nested: true }, lock_id: 'x' };
      const q = uniqueQueueId('keep');
      expect((await svc.http.post(`/queue/${q}/push`).send({ item })).status).toBe(200);
      expect((await svc.http.post(`/queue/${q}/push/batch`).send({ items: [{ item }] })).status).toBe(200);
      const pop = await svc.http.post(`/queue/${q}/pop?depth=2`);
      expect(pop.body).toEqual({ items: [item, item], count: 2 });
      // Pushed at priority 0: the item's own "priority" field is data, not the push's priority.
      expect((await svc.http.get(`/queue/${q}/state/metadata`)).body.queues).toEqual({});
    });
  });

  describe('sizes and depth', () => {
    it('refuses an item over MAX_ITEM_BYTES (default 262144) with 413 ITEM_TOO_LARGE', async () => {
      const q = uniqueQueueId('big');
      const item = { s: 'x'.repeat(300_000) };
      const res = await svc.http.post(`/queue/${q}/push`).send({ item });
      expectError(res, 413, 'ITEM_TOO_LARGE');
      expect(res.body.message).toContain('262144');
      expectError(await svc.http.post(`/queue/${q}/push/batch`).send({ items: [{ item }] }), 413, 'ITEM_TOO_LARGE');
      await expectNothingPushed(q);
    });

    it('accepts an item of exactly 262144 bytes of JSON', async () => {
      const overhead = JSON.stringify({ s: '' }).length;
      const item = { s: 'y'.repeat(262_144 - overhead) };
      expect(Buffer.byteLength(JSON.stringify(item))).toBe(262_144);
      const pop = await roundTrip(item);
      expect(pop.body.items[0].s).toHaveLength(262_144 - overhead);
      expect(pop.body.items).toEqual([item]);
    });

    it('refuses a body over 1 MiB with 413 PAYLOAD_TOO_LARGE', async () => {
      const q = uniqueQueueId('body');
      const items = Array.from({ length: 6 }, (_, i) => ({ item: { i, s: 'z'.repeat(200_000) } }));
      expect(Buffer.byteLength(JSON.stringify({ items }))).toBeGreaterThan(1_048_576);
      expectError(await svc.http.post(`/queue/${q}/push/batch`).send({ items }), 413, 'PAYLOAD_TOO_LARGE');
      expectError(await svc.http.post(`/queue/${q}/push`).send({ item: { s: 'z'.repeat(1_100_000) } }), 413, 'PAYLOAD_TOO_LARGE');
      await expectNothingPushed(q);
    });

    it('accepts a batch body just under 1 MiB', async () => {
      const q = uniqueQueueId('body-ok');
      const items = Array.from({ length: 4 }, (_, i) => ({ item: { i, s: 'z'.repeat(250_000) } }));
      expect(Buffer.byteLength(JSON.stringify({ items }))).toBeLessThan(1_048_576);
      const res = await svc.http.post(`/queue/${q}/push/batch`).send({ items });
      expect(res.status).toBe(200);
      expect(res.body.count).toBe(4);
    });

    it('refuses nesting deeper than 64 levels with 400 ITEM_TOO_DEEP, and accepts 64', async () => {
      const q = uniqueQueueId('deep');
      const tooDeep = await svc.http.post(`/queue/${q}/push`).send({ item: nestedObject(65) });
      expectError(tooDeep, 400, 'ITEM_TOO_DEEP');
      expect(tooDeep.body.message).toContain('64');
      expectError(await svc.http.post(`/queue/${q}/push/batch`).send({ items: [{ item: nestedObject(65) }] }), 400, 'ITEM_TOO_DEEP');
      // Arrays count as levels too.
      let mixed: unknown = 1;
      for (let i = 1; i < 65; i++) mixed = [mixed];
      expectError(await svc.http.post(`/queue/${q}/push`).send({ item: { a: mixed } }), 400, 'ITEM_TOO_DEEP');
      await expectNothingPushed(q);

      const ok = nestedObject(64);
      const pop = await roundTrip(ok);
      expect(pop.body.items).toEqual([ok]);
      let mixedOk: unknown = 1;
      for (let i = 1; i < 64; i++) mixedOk = [mixedOk];
      expect((await roundTrip({ a: mixedOk })).body.items).toEqual([{ a: mixedOk }]);
    });
  });

  describe('very deep input', () => {
    // A few kilobytes of brackets: far below the body limit, far beyond the depth limit.
    const cases: [string, string][] = [
      ['2000 nested arrays', '{"a":' + '['.repeat(2000) + '1' + ']'.repeat(2000) + '}'],
      ['5000 nested objects', '{"a":'.repeat(5000) + '1' + '}'.repeat(5000)],
      ['20000 nested arrays', '{"a":' + '['.repeat(20_000) + ']'.repeat(20_000) + '}'],
    ];

    it.each(cases)('refuses an item of %s with 400 ITEM_TOO_DEEP on push, not a 500', async (_label, itemText) => {
      const q = uniqueQueueId('verydeep');
      const res = await svc.http.post(`/queue/${q}/push`).set('content-type', 'application/json').send(`{"item":${itemText}}`);
      expectError(res, 400, 'ITEM_TOO_DEEP');
      await expectNothingPushed(q);
    });

    it.each(cases)('refuses an item of %s with 400 ITEM_TOO_DEEP on batch push, not a 500', async (_label, itemText) => {
      const q = uniqueQueueId('verydeepb');
      const res = await svc.http
        .post(`/queue/${q}/push/batch`)
        .set('content-type', 'application/json')
        .send(`{"items":[{"item":{"ok":1}},{"item":${itemText}}]}`);
      expectError(res, 400, 'ITEM_TOO_DEEP');
      await expectNothingPushed(q);
    });
  });

  describe('malformed JSON', () => {
    const bodies = ['{"item": {', '{item: {}}', "{'item': {}}", '{"item": {}} trailing', '{"item": {"a": 1,}}', '{"item": NaN}'];

    it.each(bodies)('refuses %j with 400 MALFORMED_JSON', async (body) => {
      const q = uniqueQueueId('malformed');
      expectError(await svc.http.post(`/queue/${q}/push`).set('content-type', 'application/json').send(body), 400, 'MALFORMED_JSON');
      await expectNothingPushed(q);
    });
  });

  describe('batch push', () => {
    it('refuses an empty, missing or non-array items with 400 VALIDATION_FAILED', async () => {
      const q = uniqueQueueId('batch');
      expectError(await svc.http.post(`/queue/${q}/push/batch`).send({ items: [] }), 400, 'VALIDATION_FAILED');
      expectError(await svc.http.post(`/queue/${q}/push/batch`).send({}), 400, 'VALIDATION_FAILED');
      expectError(await svc.http.post(`/queue/${q}/push/batch`).send({ items: { item: { a: 1 } } }), 400, 'VALIDATION_FAILED');
      expectError(await svc.http.post(`/queue/${q}/push/batch`).send({ items: [{ a: 1 }] }), 400, 'VALIDATION_FAILED');
      expectError(await svc.http.post(`/queue/${q}/push/batch`).send({ items: [null] }), 400, 'VALIDATION_FAILED');
      expectError(await svc.http.post(`/queue/${q}/push/batch`).send({ items: ['x'] }), 400, 'VALIDATION_FAILED');
      await expectNothingPushed(q);
    });

    it('refuses 1001 entries with 400 VALIDATION_FAILED and accepts 1000', async () => {
      const q = uniqueQueueId('batch1001');
      const entries = Array.from({ length: 1001 }, (_, i) => ({ item: { i } }));
      expectError(await svc.http.post(`/queue/${q}/push/batch`).send({ items: entries }), 400, 'VALIDATION_FAILED');
      await expectNothingPushed(q);

      const ok = await svc.http.post(`/queue/${q}/push/batch`).send({ items: entries.slice(0, 1000) });
      expect(ok.status).toBe(200);
      expect(ok.body).toMatchObject({ success: true, count: 1000 });
      expect((await svc.http.get(`/queue/${q}`)).body.count).toBe(1000);
      const first = await svc.http.post(`/queue/${q}/pop?depth=100`);
      expect(first.body.items).toEqual(entries.slice(0, 100).map((e) => e.item));
    });

    const badEntries: [string, Record<string, unknown>, number, string][] = [
      ['an array item', { item: [1] }, 400, 'VALIDATION_FAILED'],
      ['a negative priority', { item: { a: 1 }, priority: -1 }, 400, 'VALIDATION_FAILED'],
      ['a priority above MAX_PRIORITY', { item: { a: 1 }, priority: 256 }, 400, 'VALIDATION_FAILED'],
      ['an unknown field', { item: { a: 1 }, extra: 1 }, 400, 'VALIDATION_FAILED'],
      ['a too deep item', { item: nestedObject(65) }, 400, 'ITEM_TOO_DEEP'],
      ['a too large item', { item: { s: 'x'.repeat(270_000) } }, 413, 'ITEM_TOO_LARGE'],
    ];

    it.each(badEntries)('pushes nothing of a batch with one entry with %s among good ones', async (_label, bad, status, code) => {
      const q = uniqueQueueId('allornothing');
      const good = Array.from({ length: 5 }, (_, i) => ({ item: { i } }));
      const res = await svc.http.post(`/queue/${q}/push/batch`).send({ items: [...good.slice(0, 3), bad, ...good.slice(3)] });
      expectError(res, status, code);
      await expectNothingPushed(q);
    });

    it('names the bad entry of a batch', async () => {
      const q = uniqueQueueId('which');
      const res = await svc.http.post(`/queue/${q}/push/batch`).send({ items: [{ item: { a: 1 } }, { item: { a: 2 }, priority: 256 }] });
      expectError(res, 400, 'VALIDATION_FAILED');
      expect(res.body.message).toContain('items.1');
    });

    it('leaves an existing queue untouched when a batch is refused', async () => {
      const q = uniqueQueueId('existing');
      expect((await svc.http.post(`/queue/${q}/push`).send({ item: { before: true } })).status).toBe(200);
      const res = await svc.http.post(`/queue/${q}/push/batch`).send({ items: [{ item: { a: 1 } }, { item: { a: 2 }, priority: 999 }] });
      expectError(res, 400, 'VALIDATION_FAILED');
      const big = await svc.http.post(`/queue/${q}/push/batch`).send({ items: [{ item: { a: 1 } }, { item: { s: 'x'.repeat(270_000) } }] });
      expectError(big, 413, 'ITEM_TOO_LARGE');
      expect((await svc.http.get(`/queue/${q}`)).body.count).toBe(1);
      expect((await svc.http.post(`/queue/${q}/pop?depth=100`)).body).toEqual({ items: [{ before: true }], count: 1 });
    });
  });

  describe('pop query', () => {
    const badQueries: string[] = [
      'depth=0',
      'depth=101',
      'depth=1.5',
      'depth=abc',
      'depth=-1',
      'depth=',
      'depth=1&depth=2',
      'depth=0x10',
      'depth=1e1',
      'depth=%205',
      'wait_seconds=0x1',
      'ttl_seconds=0',
      'ttl_seconds=301',
      'ttl_seconds=1.5',
      'wait_seconds=21',
      'wait_seconds=-1',
      'wait_seconds=x',
      'require_ack=maybe',
      'require_ack=yes',
      'require_ack=TRUE2',
    ];

    it.each(badQueries)('refuses ?%s with 400 VALIDATION_FAILED and pops nothing', async (query) => {
      const q = uniqueQueueId('popq');
      expect((await svc.http.post(`/queue/${q}/push`).send({ item: { keep: 1 } })).status).toBe(200);
      expectError(await svc.http.post(`/queue/${q}/pop?${query}`), 400, 'VALIDATION_FAILED');
      expect((await svc.http.get(`/queue/${q}`)).body.count).toBe(1);
    });

    it('names the bad parameter', async () => {
      const q = uniqueQueueId('popname');
      const res = await svc.http.post(`/queue/${q}/pop?wait_seconds=21`);
      expectError(res, 400, 'VALIDATION_FAILED');
      expect(res.body.message).toContain('wait_seconds');
    });

    it('accepts the bounds of every parameter', async () => {
      const q = uniqueQueueId('popok');
      expect((await svc.http.post(`/queue/${q}/push/batch`).send({ items: [{ item: { n: 1 } }, { item: { n: 2 } }, { item: { n: 3 } }] })).status).toBe(200);
      const one = await svc.http.post(`/queue/${q}/pop?depth=1&ttl_seconds=1&wait_seconds=0&require_ack=false`);
      expect(one.status).toBe(200);
      expect(one.body).toEqual({ items: [{ n: 1 }], count: 1 });
      const rest = await svc.http.post(`/queue/${q}/pop?depth=100&ttl_seconds=300&wait_seconds=20&require_ack=0`);
      expect(rest.status).toBe(200);
      expect(rest.body).toEqual({ items: [{ n: 2 }, { n: 3 }], count: 2 });
    });
  });

  describe('listing queues', () => {
    it.each(['limit=0', 'limit=1001', 'limit=abc', 'limit=1.5'])('refuses ?%s with 400 VALIDATION_FAILED', async (query) => {
      expectError(await svc.http.get(`/queues?${query}`), 400, 'VALIDATION_FAILED');
    });

    it.each(['!!!', 'not-a-cursor', 'AAAA', 'x'.repeat(401)])('refuses the cursor %s with 400 VALIDATION_FAILED', async (cursor) => {
      expectError(await svc.http.get('/queues').query({ cursor }), 400, 'VALIDATION_FAILED');
    });

    it('accepts limit 1 and 1000 and its own cursor', async () => {
      const prefix = uniqueQueueId('list');
      for (const n of [1, 2]) expect((await svc.http.post(`/queue/${prefix}-${n}/push`).send({ item: { n } })).status).toBe(200);
      const page1 = await svc.http.get('/queues').query({ prefix, limit: 1 });
      expect(page1.status).toBe(200);
      expect(page1.body.queues).toEqual([{ queue_id: `${prefix}-1`, count: 1, locked: false, paused: false }]);
      expect(typeof page1.body.next_cursor).toBe('string');
      const page2 = await svc.http.get('/queues').query({ prefix, limit: 1000, cursor: page1.body.next_cursor });
      expect(page2.status).toBe(200);
      expect(page2.body).toEqual({ queues: [{ queue_id: `${prefix}-2`, count: 1, locked: false, paused: false }], next_cursor: null });
    });
  });

  describe('not found', () => {
    it('answers 404 QUEUE_NOT_FOUND for a queue never pushed to', async () => {
      const q = uniqueQueueId('never');
      const res = await svc.http.get(`/queue/${q}`);
      expectError(res, 404, 'QUEUE_NOT_FOUND');
      expect(res.body.message).toContain(q);
    });

    it('answers 404 STATE_KEY_NOT_FOUND for an unknown state key, on a known and an unknown queue', async () => {
      const unknownQueue = uniqueQueueId('nostate');
      expectError(await svc.http.get(`/queue/${unknownQueue}/state/metadata`), 404, 'STATE_KEY_NOT_FOUND');
      expectError(await svc.http.get(`/queue/${unknownQueue}/state/queue_0_seg_0`), 404, 'STATE_KEY_NOT_FOUND');
      const q = uniqueQueueId('somestate');
      expect((await svc.http.post(`/queue/${q}/push`).send({ item: { a: 1 } })).status).toBe(200);
      for (const key of ['nonsense', 'queue_0_seg_1', 'queue_1_seg_0', 'queue_0_seg_99999999999999999999', 'metadata2', `offloaded_queue_0_seg_5_${q}`]) {
        expectError(await svc.http.get(`/queue/${q}/state/${key}`), 404, 'STATE_KEY_NOT_FOUND');
      }
    });

    it('answers 404 QUEUE_NOT_FOUND when deleting a queue never pushed to, and does not create it', async () => {
      const q = uniqueQueueId('nodelete');
      expectError(await svc.http.delete(`/queue/${q}`), 404, 'QUEUE_NOT_FOUND');
      expectError(await svc.http.get(`/queue/${q}`), 404, 'QUEUE_NOT_FOUND');
      expectError(await svc.http.delete(`/queue/${q}`), 404, 'QUEUE_NOT_FOUND');
    });

    it('answers 404 with the error body for an unknown route, and 405 for a known path with the wrong method', async () => {
      expectError(await svc.http.get('/no/such/route'), 404, 'NOT_FOUND');
      expectError(await svc.http.post('/queue/abc/shove').send({ item: {} }), 404, 'NOT_FOUND');
      // CONTRACT.md "Request hygiene" (test/e2e/http-hygiene.test.ts has every path).
      expectError(await svc.http.put(`/queue/${uniqueQueueId()}`).send({}), 405, 'METHOD_NOT_ALLOWED');
    });
  });

  describe('items round-trip exactly', () => {
    it('keeps \\u0000, emoji, other Unicode, nested arrays, big and small numbers', async () => {
      const item = {
        nul: 'a\u0000b\u0000',
        emoji: '😀👩‍👩‍👧‍👦🏳️‍🌈',
        scripts: 'Ωμέγα 日本語 עברית العربية ﷽ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢',
        controls: '\t\n\r\b\f\u001f\u007f\u2028\u2029',
        quotes: '"\'\\/',
        nested: [
          [1, [2, [3, []]]],
          [{}, { a: [null, true, false] }],
        ],
        big: 1e300,
        small: 5e-324,
        negative: -1.5e-10,
        maxSafe: Number.MAX_SAFE_INTEGER,
        zero: 0,
        empty: '',
        '': 'empty key',
        'key with spaces and ünïcödé 🔑': 1,
      };
      const pop = await roundTrip(item);
      expect(pop.body.items).toEqual([item]);
      expect(JSON.stringify(pop.body.items[0])).toBe(JSON.stringify(item));
    });

    it('keeps the order of keys, numeric-looking keys included', async () => {
      const text = '{"item":{"z":1,"a":2,"m":{"y":1,"b":2},"10":"ten","2":"two"}}';
      const q = uniqueQueueId('order');
      expect((await svc.http.post(`/queue/${q}/push`).set('content-type', 'application/json').send(text)).status).toBe(200);
      const pop = await svc.http.post(`/queue/${q}/pop`);
      // JavaScript objects put integer-like keys first; the text between the service's brackets is what counts.
      expect(pop.text).toBe(`{"items":[${JSON.stringify(JSON.parse(text).item)}],"count":1}`);
      expect(Object.keys(pop.body.items[0].m)).toEqual(['y', 'b']);
      expect(Object.keys(pop.body.items[0]).slice(2)).toEqual(['z', 'a', 'm']);
    });

    it('keeps keys named __proto__, constructor and prototype', async () => {
      const q = uniqueQueueId('proto');
      const itemText = '{"__proto__":{"x":1},"a":1,"constructor":{"prototype":{"y":2}},"inner":{"__proto__":[1]}}';
      const push = await svc.http.post(`/queue/${q}/push`).set('content-type', 'application/json').send(`{"item":${itemText}}`);
      expect(push.status).toBe(200);
      const pop = await svc.http.post(`/queue/${q}/pop`);
      expect(pop.status).toBe(200);
      expect(pop.text).toBe(`{"items":[${itemText}],"count":1}`);
    });

    it('never takes a prototype from a body: __proto__ keys are data in items and ignored around them', async () => {
      const q = uniqueQueueId('protosafe');
      const itemText = '{"__proto__":{"polluted":1,"priority":9},"a":1}';
      const push = await svc.http
        .post(`/queue/${q}/push`)
        .set('content-type', 'application/json')
        .send(`{"item":${itemText},"__proto__":{"priority":7,"polluted":2}}`);
      expect(push.status).toBe(200);
      expect(push.body.message).toContain('at priority 0');
      // The service runs in this process: nothing reached Object.prototype.
      expect(Object.prototype).not.toHaveProperty('polluted');
      expect(Object.prototype).not.toHaveProperty('priority');
      const pop = await svc.http.post(`/queue/${q}/pop`);
      expect(pop.text).toBe(`{"items":[${itemText}],"count":1}`);
    });

    it('keeps a __proto__ key inside a batch entry', async () => {
      const q = uniqueQueueId('protob');
      const itemText = '{"__proto__":{"x":1},"a":1}';
      const push = await svc.http.post(`/queue/${q}/push/batch`).set('content-type', 'application/json').send(`{"items":[{"item":${itemText}}]}`);
      expect(push.status).toBe(200);
      const seg = await svc.http.get(`/queue/${q}/state/queue_0_seg_0`);
      expect(seg.text).toBe(`[${itemText}]`);
    });

    it('round-trips arbitrary JSON objects (property)', async () => {
      const q = uniqueQueueId('prop');
      // fast-check likes keys such as "__proto__"; the test above covers those, deterministically.
      const objects = fc
        .dictionary(fc.string(), fc.jsonValue({ maxDepth: 4 }), { maxKeys: 6 })
        .filter((item) => !/"(__proto__|constructor|prototype)":/.test(JSON.stringify(item)));
      await fc.assert(
        fc.asyncProperty(objects, async (item) => {
          const expected = JSON.parse(JSON.stringify(item)) as unknown;
          const push = await svc.http.post(`/queue/${q}/push`).send({ item });
          expect(push.status).toBe(200);
          const pop = await svc.http.post(`/queue/${q}/pop`);
          expect(pop.body).toEqual({ items: [expected], count: 1 });
          expect(JSON.stringify(pop.body.items[0])).toBe(JSON.stringify(expected));
        }),
        { numRuns: propertyRuns(60) },
      );
    });
  });

  describe('no 500 on garbage', () => {
    it('answers every random JSON body to push and batch push with a status below 500', async () => {
      const q = uniqueQueueId('garbage');
      await fc.assert(
        fc.asyncProperty(fc.json({ maxDepth: 4 }), fc.boolean(), async (body, batch) => {
          const res = await svc.http
            .post(`/queue/${q}/push${batch ? '/batch' : ''}`)
            .set('content-type', 'application/json')
            .send(body);
          expect(res.status, `${res.status} for ${body}: ${res.text}`).toBeLessThan(500);
          if (res.status >= 400) {
            expect(res.body.statusCode).toBe(res.status);
            expect(typeof res.body.error_code).toBe('string');
          }
        }),
        { numRuns: propertyRuns(100) },
      );
    });

    it('answers random strings as queue ids, query strings and raw bodies with a status below 500', async () => {
      await fc.assert(
        fc.asyncProperty(fc.string({ maxLength: 30 }), fc.string({ maxLength: 30 }), fc.string({ maxLength: 60 }), async (id, query, body) => {
          const path = `/queue/${encodeURIComponent(id)}/pop?${encodeURIComponent(query)}=${encodeURIComponent(body)}`;
          const pop = await svc.http.post(path);
          expect(pop.status, `${pop.status} for POST ${path}: ${pop.text}`).toBeLessThan(500);
          const push = await svc.http
            .post(`/queue/${uniqueQueueId('garbage')}/push`)
            .set('content-type', 'application/json')
            .send(body);
          expect(push.status, `${push.status} for push ${JSON.stringify(body)}: ${push.text}`).toBeLessThan(500);
        }),
        { numRuns: propertyRuns(50) },
      );
    });

    const odd: [string, (q: string) => Promise<Response>][] = [
      ['a text/plain body', (q) => svc.http.post(`/queue/${q}/push`).set('content-type', 'text/plain').send('{"item":{}}')],
      ['a latin1 charset', (q) => svc.http.post(`/queue/${q}/push`).set('content-type', 'application/json; charset=latin1').send('{"item":{}}')],
      [
        'a content-encoding that does not match',
        (q) => svc.http.post(`/queue/${q}/push`).set('content-type', 'application/json').set('content-encoding', 'br').send('{"item":{}}'),
      ],
      ['a bad percent-encoding in the queue id', () => svc.http.post(`/queue/%E0%A4%A/push`).send({ item: {} })],
      ['a bad percent-encoding in the state key', (q) => svc.http.get(`/queue/${q}/state/%E0%A4%A`)],
      ['a bad percent-encoding in the query', (q) => svc.http.post(`/queue/${q}/pop?depth=%E0%A4%A`)],
      ['a nested query parameter', (q) => svc.http.post(`/queue/${q}/pop?depth[a]=1`)],
      [
        'a duplicate key that makes the item an array',
        (q) => svc.http.post(`/queue/${q}/push`).set('content-type', 'application/json').send('{"item":{"a":1},"item":[1]}'),
      ],
    ];

    it.each(odd)('answers %s with a 4xx error body', async (_label, send) => {
      const q = uniqueQueueId('odd');
      const res = await send(q);
      expect(res.status, `${res.status}: ${res.text}`).toBeLessThan(500);
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.body.statusCode).toBe(res.status);
      expect(typeof res.body.error_code).toBe('string');
      await expectNothingPushed(q);
    });
  });
});

describe('a smaller MAX_ITEM_BYTES', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startService({ env: { MAX_ITEM_BYTES: '1000' } });
  });
  afterAll(async () => {
    await svc.close();
    removeDataDir(svc.dataDir);
  });

  /** An item whose JSON is exactly `bytes` UTF-8 bytes, padded with `unit` (1 to 4 bytes each). */
  function itemOfBytes(bytes: number, unit: string): { s: string } {
    const overhead = Buffer.byteLength(JSON.stringify({ s: '' }));
    const unitBytes = Buffer.byteLength(unit);
    const room = bytes - overhead;
    const item = { s: unit.repeat(Math.floor(room / unitBytes)) + 'x'.repeat(room % unitBytes) };
    expect(Buffer.byteLength(JSON.stringify(item))).toBe(bytes);
    return item;
  }

  it.each([
    ['ASCII', 'a'],
    ['2-byte', 'é'],
    ['3-byte', '€'],
    ['4-byte', '😀'],
  ])('counts %s characters in UTF-8 bytes: 1000 bytes pass, 1001 are 413 ITEM_TOO_LARGE', async (_label, unit) => {
    const q = uniqueQueueId('limit');
    const atLimit = itemOfBytes(1000, unit);
    expect((await svc.http.post(`/queue/${q}/push`).send({ item: atLimit })).status).toBe(200);
    const over = itemOfBytes(1001, unit);
    const res = await svc.http.post(`/queue/${q}/push`).send({ item: over });
    expectError(res, 413, 'ITEM_TOO_LARGE');
    expect(res.body.message).toContain('1000');
    expectError(await svc.http.post(`/queue/${q}/push/batch`).send({ items: [{ item: { a: 1 } }, { item: over }] }), 413, 'ITEM_TOO_LARGE');
    const pop = await svc.http.post(`/queue/${q}/pop?depth=10`);
    expect(pop.body).toEqual({ items: [atLimit], count: 1 });
  });

  it('counts a \\u0000 as the 6 bytes of its JSON escape', async () => {
    const q = uniqueQueueId('nul');
    const overhead = Buffer.byteLength(JSON.stringify({ s: '' }));
    const fits = { s: '\u0000'.repeat(Math.floor((1000 - overhead) / 6)) };
    expect((await svc.http.post(`/queue/${q}/push`).send({ item: fits })).status).toBe(200);
    const over = { s: '\u0000'.repeat(Math.floor((1000 - overhead) / 6) + 1) };
    expectError(await svc.http.post(`/queue/${q}/push`).send({ item: over }), 413, 'ITEM_TOO_LARGE');
    expect((await svc.http.post(`/queue/${q}/pop?depth=10`)).body).toEqual({ items: [fits], count: 1 });
  });
});
