import type { Response } from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeDataDir, startService, TestService, uniqueQueueId } from '../support/service.js';

/**
 * CONTRACT.md "Request hygiene": a known path with the wrong method is 405 with `Allow`, and
 * touches no queue.
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
  ['extendLock', 'POST', (q) => `/queue/${q}/extend-lock`],
  ['release', 'POST', (q) => `/queue/${q}/release`],
  ['getQueue and deleteQueue', 'DELETE, GET', (q) => `/queue/${q}`],
  ['getState', 'GET', (q) => `/queue/${q}/state/metadata`],
  ['listQueues', 'GET', () => '/queues'],
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
});
