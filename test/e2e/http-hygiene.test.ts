import { gzipSync } from 'node:zlib';
import type { Response } from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeDataDir, startService, TestService, uniqueQueueId } from '../support/service.js';

/**
 * CONTRACT.md "Request hygiene": a known path with the wrong method is 405 with `Allow`; a body
 * that is not JSON on a route that takes one is 415; a JSON `null` body is 400
 * VALIDATION_FAILED. None of them touches a queue.
 */

function expectError(res: Response, status: number, errorCode: string, label = ''): void {
  expect({ status: res.status, error_code: res.body?.error_code }, label).toEqual({ status, error_code: errorCode });
  expect(res.body.statusCode, label).toBe(status);
  expect(typeof res.body.message, label).toBe('string');
}

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS';
const METHODS: Method[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/** Every queue path, with the methods it takes, as `Allow` lists them. */
const QUEUE_PATHS: [string, string, (q: string) => string][] = [
  ['push', 'POST', (q) => `/queue/${q}/push`],
  ['pushBatch', 'POST', (q) => `/queue/${q}/push/batch`],
  ['pop', 'POST', (q) => `/queue/${q}/pop`],
  ['acknowledge', 'POST', (q) => `/queue/${q}/acknowledge`],
  ['acknowledgeBatch', 'POST', (q) => `/queue/${q}/acknowledge/batch`],
  ['extendLock', 'POST', (q) => `/queue/${q}/extend-lock`],
  ['release', 'POST', (q) => `/queue/${q}/release`],
  ['releaseBatch', 'POST', (q) => `/queue/${q}/release/batch`],
  ['getQueue and deleteQueue', 'DELETE, GET', (q) => `/queue/${q}`],
  ['getState', 'GET', (q) => `/queue/${q}/state/metadata`],
  ['listQueues', 'GET', () => '/queues'],
];

/** The routes that take a JSON body, each with a body it would accept. */
const BODY_ROUTES: [string, string, Record<string, unknown>][] = [
  ['push', 'push', { item: { a: 1 } }],
  ['pushBatch', 'push/batch', { items: [{ item: { a: 1 } }] }],
  ['acknowledge', 'acknowledge', { lock_id: 'abcdefghijk' }],
  ['extendLock', 'extend-lock', { lock_id: 'abcdefghijk', ttl_seconds: 30 }],
  ['release', 'release', { lock_id: 'abcdefghijk' }],
  ['acknowledgeBatch', 'acknowledge/batch', { lock_ids: ['abcdefghijk'] }],
  ['releaseBatch', 'release/batch', { lock_ids: ['abcdefghijk'] }],
];

describe('request hygiene', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startService();
  });
  afterAll(async () => {
    await svc.close();
    removeDataDir(svc.dataDir);
  });

  function send(method: Method | 'HEAD', path: string) {
    return svc.http[method.toLowerCase() as 'get'](path);
  }

  /** A queue holding `items`, and what `GET /queue/{id}` says about it. */
  async function queueWith(items: number): Promise<{ q: string; state: () => Promise<unknown> }> {
    const q = uniqueQueueId('hyg');
    const entries = Array.from({ length: items }, (_, i) => ({ item: { i } }));
    expect((await svc.http.post(`/queue/${q}/push/batch`).send({ items: entries })).status).toBe(200);
    return { q, state: async () => (await svc.http.get(`/queue/${q}`)).body };
  }

  describe('405 METHOD_NOT_ALLOWED', () => {
    it.each(QUEUE_PATHS)('answers every other method on the path of %s with 405 and Allow: %s', async (_label, allow, path) => {
      const { q, state } = await queueWith(3);
      const before = await state();
      for (const method of METHODS.filter((m) => !allow.split(', ').includes(m))) {
        const res = await send(method, path(q)).set('content-type', 'application/json').send('{"item":{"x":1}}');
        expectError(res, 405, 'METHOD_NOT_ALLOWED', `${method} ${path(q)}`);
        expect(res.headers.allow, `${method} ${path(q)}`).toBe(allow);
      }
      expect(await state()).toEqual(before);
    });

    it('answers HEAD as GET where GET is allowed, and 405 where it is not', async () => {
      const { q } = await queueWith(1);
      for (const path of [`/queue/${q}`, `/queue/${q}/state/metadata`, '/queues', '/health', '/metrics']) {
        const res = await svc.http.head(path);
        expect(res.status, path).toBe(200);
        expect(res.headers['content-type'], path).toBe((await svc.http.get(path)).headers['content-type']);
      }
      const head = await svc.http.head(`/queue/${q}/push`);
      expect(head.status).toBe(405);
      expect(head.headers.allow).toBe('POST');
      // HEAD on a POST-only path pops nothing.
      expect((await svc.http.head(`/queue/${q}/pop`)).status).toBe(405);
      expect((await svc.http.get(`/queue/${q}`)).body.count).toBe(1);
    });

    it('covers the operations endpoints too', async () => {
      for (const path of ['/health', '/health/ready', '/metrics']) {
        const res = await svc.http.post(path).send({});
        expectError(res, 405, 'METHOD_NOT_ALLOWED', path);
        expect(res.headers.allow, path).toBe('GET');
      }
    });

    it('leaves unknown paths 404, whatever the method', async () => {
      const q = uniqueQueueId('hyg');
      for (const path of ['/no/such/route', `/queue/${q}/shove`, `/queue/${q}/state`, '/queue', `/queue/${q}/push/batch/more`, '/QUEUES']) {
        for (const method of ['GET', 'POST', 'PUT'] as const) {
          expectError(await send(method, path).send({}), 404, 'NOT_FOUND', `${method} ${path}`);
        }
      }
    });

    it('checks the path before the queue id and the body', async () => {
      const res = await svc.http.get('/queue/a*b/push').set('content-type', 'text/plain').send('not json');
      expectError(res, 405, 'METHOD_NOT_ALLOWED');
      expect(res.headers.allow).toBe('POST');
    });
  });

  describe('415 UNSUPPORTED_MEDIA_TYPE', () => {
    const notJson: [string, string | undefined][] = [
      ['text/plain', 'text/plain'],
      ['a form', 'application/x-www-form-urlencoded'],
      ['XML', 'application/xml'],
      ['a JSON-looking type that is not JSON', 'application/jsonx'],
      ['JSON in a charset other than UTF-8', 'application/json; charset=latin1'],
      ['no content type', undefined],
    ];

    it.each(BODY_ROUTES)('refuses a body that is not JSON on %s, and changes nothing', async (_label, route, body) => {
      const { q, state } = await queueWith(2);
      const lock = await svc.http.post(`/queue/${q}/pop?require_ack=true&depth=1`);
      expect(lock.body.locked).toBe(true);
      const text = JSON.stringify('lock_id' in body ? { ...body, lock_id: lock.body.lock_id } : body);
      const before = await state();
      for (const [label, type] of notJson) {
        if (type) {
          expectError(await svc.http.post(`/queue/${q}/${route}`).set('content-type', type).send(text), 415, 'UNSUPPORTED_MEDIA_TYPE', label);
        } else {
          // supertest always sends a content type with a body; fetch sends none with bytes.
          const res = await fetch(`${svc.url}/queue/${q}/${route}`, { method: 'POST', body: new TextEncoder().encode(text) });
          const json = (await res.json()) as { statusCode: number; error_code: string };
          expect({ status: res.status, statusCode: json.statusCode, error_code: json.error_code }, label).toEqual({
            status: 415,
            statusCode: 415,
            error_code: 'UNSUPPORTED_MEDIA_TYPE',
          });
        }
      }
      expect(await state()).toEqual(before);
    });

    it.each(BODY_ROUTES)('reads JSON under application/json with a UTF-8 charset, in any case, and any +json type on %s', async (_label, route, body) => {
      for (const type of [
        'application/json',
        'application/json; charset=utf-8',
        'Application/JSON; Charset="UTF-8"',
        'application/vnd.pushpop+json',
        'application/merge-patch+json; charset=utf-8',
      ]) {
        const q = uniqueQueueId('hyg');
        const res = await svc.http.post(`/queue/${q}/${route}`).set('content-type', type).send(JSON.stringify(body));
        // The body was read: push succeeds; the lock endpoints find no lock (404, in its result for
        // a batch), which they can only know from lock_id.
        if (route.startsWith('push')) expect(res.status, type).toBe(200);
        else if (route.endsWith('/batch'))
          expect({ status: res.status, results: res.body.results }, type).toEqual({
            status: 200,
            results: [{ lock_id: 'abcdefghijk', status: 404, error_code: 'LOCK_NOT_FOUND' }],
          });
        else expectError(res, 404, 'LOCK_NOT_FOUND', type);
      }
    });

    it('needs no content type where a route takes no body, and ignores a body sent there', async () => {
      const { q } = await queueWith(4);
      const bare = await fetch(`${svc.url}/queue/${q}/pop`, { method: 'POST' });
      expect(bare.status).toBe(200);
      expect(await bare.json()).toEqual({ items: [{ i: 0 }], count: 1 });
      const form = await svc.http.post(`/queue/${q}/pop`).set('content-type', 'application/x-www-form-urlencoded').send('');
      expect(form.body).toEqual({ items: [{ i: 1 }], count: 1 });
      const text = await svc.http.post(`/queue/${q}/pop`).set('content-type', 'text/plain').send('hello');
      expect(text.body).toEqual({ items: [{ i: 2 }], count: 1 });
      const emptyJson = await svc.http.post(`/queue/${q}/pop`).set('content-type', 'application/json').send('');
      expect(emptyJson.body).toEqual({ items: [{ i: 3 }], count: 1 });
      expect((await svc.http.get(`/queue/${q}`).set('content-type', 'text/plain')).status).toBe(200);
      const del = await svc.http.delete(`/queue/${q}`).set('content-type', 'text/plain').send('x');
      expect(del.body).toEqual({ success: true, items_deleted: 0 });
    });

    /** A gzipped JSON body (supertest would send a Buffer as JSON). */
    async function pushGzip(q: string, text: string): Promise<{ status: number; body: { error_code?: string } }> {
      const res = await fetch(`${svc.url}/queue/${q}/push`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
        body: gzipSync(text),
      });
      return { status: res.status, body: (await res.json()) as { error_code?: string } };
    }

    it('refuses a content coding it cannot decode with 415, and reads gzip', async () => {
      const q = uniqueQueueId('hyg');
      const res = await svc.http.post(`/queue/${q}/push`).set('content-type', 'application/json').set('content-encoding', 'compress').send('{"item":{"a":1}}');
      expectError(res, 415, 'UNSUPPORTED_MEDIA_TYPE');
      expect(res.headers['accept-encoding']).toContain('gzip');
      expect(await pushGzip(q, '{"item":{"a":2}}')).toMatchObject({ status: 200 });
      expect((await svc.http.post(`/queue/${q}/pop?depth=10`)).body).toEqual({ items: [{ a: 2 }], count: 1 });
    });

    it('survives a corrupt compressed body on any route, read or not: an answer below 500, and the service goes on', async () => {
      const q = uniqueQueueId('hyg');
      for (const coding of ['gzip', 'deflate', 'br']) {
        const garbage = Buffer.from('this is not compressed at all');
        const read = await svc.http.post(`/queue/${q}/push`).set('content-type', 'application/json').set('content-encoding', coding).send(garbage);
        expect(read.status, `POST with corrupt ${coding}`).toBeGreaterThanOrEqual(400);
        expect(read.status, `POST with corrupt ${coding}`).toBeLessThan(500);
        // A GET never reads its body: the decoder's error must still be heard.
        const unread = await svc.http.get('/queues').set('content-type', 'application/json').set('content-encoding', coding).send(garbage);
        expect(unread.status, `GET with corrupt ${coding}`).toBe(200);
      }
      // A decoder error heard late must not take the service down: watched for a moment.
      await new Promise((r) => setTimeout(r, 50));
      expect((await svc.http.get('/health')).status).toBe(200);
      expectError(await svc.http.get(`/queue/${q}`), 404, 'QUEUE_NOT_FOUND');
    });

    it('applies the body limit to a compressed body as it is decompressed', async () => {
      const q = uniqueQueueId('hyg');
      const text = JSON.stringify({ item: { s: 'z'.repeat(2_000_000) } });
      expect(gzipSync(text).length).toBeLessThan(100_000);
      expect(await pushGzip(q, text)).toMatchObject({ status: 413, body: { error_code: 'PAYLOAD_TOO_LARGE' } });
      expectError(await svc.http.get(`/queue/${q}`), 404, 'QUEUE_NOT_FOUND');
    });
  });

  describe('a JSON null body', () => {
    it.each(BODY_ROUTES)('is 400 VALIDATION_FAILED on %s', async (_label, route) => {
      const { q, state } = await queueWith(1);
      const before = await state();
      expectError(await svc.http.post(`/queue/${q}/${route}`).set('content-type', 'application/json').send('null'), 400, 'VALIDATION_FAILED');
      expectError(await svc.http.post(`/queue/${q}/${route}`).set('content-type', 'application/json').send(' null\n'), 400, 'VALIDATION_FAILED');
      expect(await state()).toEqual(before);
    });
  });

  describe('cross-origin calls', () => {
    const ORIGIN = 'https://console.example.com';
    let cors: TestService;
    beforeAll(async () => {
      cors = await startService({ env: { CORS_ORIGINS: `${ORIGIN}, http://localhost:5173` } });
    });
    afterAll(async () => {
      await cors?.close();
      if (cors) removeDataDir(cors.dataDir);
    });

    const preflight = (s: TestService, origin: string) =>
      s.http
        .options(`/queue/${uniqueQueueId('cors')}/push`)
        .set('origin', origin)
        .set('access-control-request-method', 'POST')
        .set('access-control-request-headers', 'content-type');

    it('are not allowed by default: no CORS headers, and a preflight is 405 like any OPTIONS', async () => {
      const res = await svc.http.get('/queues').set('origin', ORIGIN);
      expect(res.status).toBe(200);
      expect(res.headers['access-control-allow-origin']).toBeUndefined();
      expectError(await preflight(svc, ORIGIN), 405, 'METHOD_NOT_ALLOWED');
    });

    it('are allowed from the origins in CORS_ORIGINS only', async () => {
      const ok = await preflight(cors, ORIGIN);
      expect(ok.status).toBe(204);
      expect(ok.headers['access-control-allow-origin']).toBe(ORIGIN);
      expect(ok.headers['access-control-allow-methods']).toContain('POST');
      expect(ok.headers['access-control-max-age']).toBe('600');
      expect((await preflight(cors, 'http://localhost:5173')).headers['access-control-allow-origin']).toBe('http://localhost:5173');

      const q = uniqueQueueId('cors');
      const push = await cors.http
        .post(`/queue/${q}/push`)
        .set('origin', ORIGIN)
        .send({ item: { a: 1 } });
      expect(push.status).toBe(200);
      expect(push.headers['access-control-allow-origin']).toBe(ORIGIN);

      for (const other of ['https://evil.example', 'https://console.example.com.evil.example', 'null']) {
        expect((await preflight(cors, other)).headers['access-control-allow-origin'], other).toBeUndefined();
        expect((await cors.http.get(`/queue/${q}`).set('origin', other)).headers['access-control-allow-origin'], other).toBeUndefined();
      }
    });
  });
});
