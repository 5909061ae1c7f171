import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createPushpopClient } from '@pushpop/api-client';
import type { Response } from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../src/bootstrap.js';
import { EnvironmentError } from '../../src/config/environment.js';
import { repoRoot } from '../support/child-service.js';
import { databaseKind, removeDataDir, startService, TestService, uniqueQueueId } from '../support/service.js';

/**
 * CONTRACT.md "Authentication and authorisation": every route × every scope, open routes,
 * 401/403 before the body is read and without touching a queue, the OpenAPI security of every
 * operation, boot refusals.
 */

type Scope = 'produce' | 'consume' | 'read' | 'admin';
const KEYS: Record<string, { key: string; scopes: Scope[] }> = {
  producer: { key: 'producer-key-0123456789', scopes: ['produce'] },
  consumer: { key: 'consumer-key-0123456789', scopes: ['consume'] },
  reader: { key: 'reader-key-0123456789ab', scopes: ['read'] },
  ops: { key: 'ops-key-0123456789abcdef', scopes: ['admin'] },
  worker: { key: 'worker+key/0123456789==', scopes: ['produce', 'consume'] },
};
const API_KEYS = Object.entries(KEYS)
  .map(([name, { key, scopes }]) => `${name}:${key}:${scopes.join('+')}`)
  .join(',');

type Method = 'get' | 'post' | 'put' | 'delete';
interface Route {
  operation: string;
  method: Method;
  path: (q: string) => string;
  /** The scope that lets a key in besides admin; null: any known key. */
  scope: Scope | null;
  body?: Record<string, unknown>;
}
const ROUTES: Route[] = [
  { operation: 'push', method: 'post', path: (q) => `/queue/${q}/push`, scope: 'produce', body: { item: { a: 1 } } },
  { operation: 'pushBatch', method: 'post', path: (q) => `/queue/${q}/push/batch`, scope: 'produce', body: { items: [{ item: { a: 1 } }] } },
  { operation: 'pop', method: 'post', path: (q) => `/queue/${q}/pop?depth=1`, scope: 'consume' },
  { operation: 'acknowledge', method: 'post', path: (q) => `/queue/${q}/acknowledge`, scope: 'consume', body: { lock_id: 'abcdefghijk' } },
  { operation: 'extendLock', method: 'post', path: (q) => `/queue/${q}/extend-lock`, scope: 'consume', body: { lock_id: 'abcdefghijk' } },
  { operation: 'release', method: 'post', path: (q) => `/queue/${q}/release`, scope: 'consume', body: { lock_id: 'abcdefghijk' } },
  { operation: 'acknowledgeBatch', method: 'post', path: (q) => `/queue/${q}/acknowledge/batch`, scope: 'consume', body: { lock_ids: ['abcdefghijk'] } },
  { operation: 'releaseBatch', method: 'post', path: (q) => `/queue/${q}/release/batch`, scope: 'consume', body: { lock_ids: ['abcdefghijk'] } },
  { operation: 'getQueue', method: 'get', path: (q) => `/queue/${q}`, scope: 'read' },
  { operation: 'getState', method: 'get', path: (q) => `/queue/${q}/state/metadata`, scope: 'read' },
  { operation: 'listQueues', method: 'get', path: () => '/queues', scope: 'read' },
  { operation: 'deleteQueue', method: 'delete', path: (q) => `/queue/${q}`, scope: 'admin' },
  { operation: 'redrive', method: 'post', path: (q) => `/queue/${q}/redrive`, scope: 'admin', body: { max_items: 1 } },
  { operation: 'listSchedules', method: 'get', path: () => '/schedules', scope: 'read' },
  { operation: 'getSchedule', method: 'get', path: (q) => `/schedules/${q}`, scope: 'read' },
  { operation: 'putSchedule', method: 'put', path: (q) => `/schedules/${q}`, scope: 'admin', body: { queue_id: 'q', cron: '0 0 1 1 *', item: {} } },
  { operation: 'deleteSchedule', method: 'delete', path: (q) => `/schedules/${q}`, scope: 'admin' },
  { operation: 'metrics', method: 'get', path: () => '/metrics', scope: 'read' },
  { operation: 'whoami', method: 'get', path: () => '/whoami', scope: null },
];
const OPEN_PATHS = ['/health', '/health/ready', '/docs', '/openapi.json', '/admin/'];

function expectRefused(res: Response, status: 401 | 403, label: string): void {
  expect({ status: res.status, error_code: res.body?.error_code }, label).toEqual({ status, error_code: status === 401 ? 'UNAUTHORIZED' : 'FORBIDDEN' });
  expect(res.body.statusCode, label).toBe(status);
  if (status === 401) expect(res.headers['www-authenticate'], label).toMatch(/^Bearer\b/);
  // Never the key, in any answer.
  for (const { key } of Object.values(KEYS)) expect(JSON.stringify(res.body), label).not.toContain(key);
}

describe(`API keys and scopes (${databaseKind})`, () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startService({ env: { API_KEYS } });
  });
  afterAll(async () => {
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  const send = (route: Route, q: string, headers: Record<string, string>) => {
    let req = svc.http[route.method](route.path(q));
    for (const [name, value] of Object.entries(headers)) req = req.set(name, value);
    return route.body ? req.send(route.body) : req;
  };
  /** A queue holding one item, and a way to see it unchanged. */
  const queueWithItem = async (): Promise<{ q: string; snapshot: () => Promise<unknown> }> => {
    const q = uniqueQueueId('auth');
    expect(
      (
        await svc.http
          .post(`/queue/${q}/push`)
          .set('x-api-key', KEYS.ops.key)
          .send({ item: { n: 1 } })
      ).status,
    ).toBe(200);
    return { q, snapshot: async () => (await svc.http.get(`/queue/${q}/state/metadata`).set('x-api-key', KEYS.ops.key)).body };
  };

  it.each(ROUTES.map((r) => [r.operation, r] as const))(
    '%s: allowed for its scope and admin; 401 without a key or with an unknown one; 403 for the other scopes',
    async (_op, route) => {
      const { q, snapshot } = await queueWithItem();
      const before = await snapshot();
      for (const [label, headers] of [
        ['no key', {}],
        ['unknown key', { authorization: 'Bearer not-a-known-key-0123456789' }],
        ['a known key in the wrong scheme', { authorization: `Basic ${KEYS.ops.key}` }],
        ['an empty X-API-Key', { 'x-api-key': '' }],
        ['a prefix of a known key', { 'x-api-key': KEYS.ops.key.slice(0, -1) }],
      ] as [string, Record<string, string>][]) {
        expectRefused(await send(route, q, headers), 401, `${route.operation}, ${label}`);
      }
      for (const [name, { key, scopes }] of Object.entries(KEYS)) {
        const allowed = route.scope === null || scopes.includes('admin') || scopes.includes(route.scope);
        for (const headers of [{ authorization: `Bearer ${key}` }, { 'x-api-key': key }] as Record<string, string>[]) {
          const res = await send(route, q, headers);
          const label = `${route.operation} with ${name} (${scopes.join('+')}) as ${Object.keys(headers)[0]}`;
          if (allowed) expect([401, 403], `${label}: ${res.status} ${JSON.stringify(res.body)}`).not.toContain(res.status);
          else expectRefused(res, 403, label);
          if (allowed && route.operation !== 'deleteQueue') expect(res.status, label).toBeLessThan(500);
        }
      }
      if (
        route.method !== 'get' &&
        route.operation !== 'deleteQueue' &&
        route.operation !== 'push' &&
        route.operation !== 'pushBatch' &&
        route.operation !== 'pop'
      ) {
        expect(await snapshot(), `${route.operation}: refusals left the queue as it was`).toEqual(before);
      }
    },
  );

  it('answers 401/403 before reading the body: no 413 for a huge body, no 415 for a wrong type, nothing queued', async () => {
    const { q, snapshot } = await queueWithItem();
    const before = await snapshot();
    const huge = JSON.stringify({ item: { s: 'x'.repeat(2 * 1024 * 1024) } });
    expectRefused(await svc.http.post(`/queue/${q}/push`).set('content-type', 'application/json').send(huge), 401, 'huge body, no key');
    expectRefused(
      await svc.http.post(`/queue/${q}/push`).set('x-api-key', KEYS.reader.key).set('content-type', 'application/json').send(huge),
      403,
      'huge body, read key',
    );
    expectRefused(await svc.http.post(`/queue/${q}/push`).set('content-type', 'text/plain').send('hello'), 401, 'text body, no key');
    expectRefused(await svc.http.post(`/queue/${q}/push`).set('content-type', 'application/json').send('{not json'), 401, 'malformed JSON, no key');
    expect(await snapshot()).toEqual(before);
    // With the right key the same bodies get their own answers.
    expect((await svc.http.post(`/queue/${q}/push`).set('x-api-key', KEYS.producer.key).set('content-type', 'text/plain').send('hello')).status).toBe(415);
  });

  it('leaves the open routes open: health, Swagger UI, the document, the console files', async () => {
    for (const path of OPEN_PATHS) {
      const res = await svc.http.get(path);
      expect([401, 403], `${path}: ${res.status}`).not.toContain(res.status);
    }
  });

  it('GET /whoami names the key and its scopes, never the key', async () => {
    const res = await svc.http.get('/whoami').set('authorization', `Bearer ${KEYS.worker.key}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ authentication: true, name: 'worker', scopes: ['produce', 'consume'] });
  });

  it('the generated client sends its apiKey with every call', async () => {
    const q = uniqueQueueId('client');
    const worker = createPushpopClient(svc.url, { apiKey: KEYS.worker.key });
    const pushed = await worker.POST('/queue/{queue_id}/push', { params: { path: { queue_id: q } }, body: { item: { n: 1 } } });
    expect(pushed.response.status).toBe(200);
    expect((await worker.GET('/whoami')).data).toEqual({ authentication: true, name: 'worker', scopes: ['produce', 'consume'] });
    const refused = await worker.DELETE('/queue/{queue_id}', { params: { path: { queue_id: q } } });
    expect(refused.response.status).toBe(403);
    const anonymous = await createPushpopClient(svc.url).GET('/queues');
    expect(anonymous.response.status).toBe(401);
  });

  it('counts refusals in pushpop_operations_total by their error code', async () => {
    const metrics = async (): Promise<string> => (await svc.http.get('/metrics').set('x-api-key', KEYS.reader.key)).text;
    const count = (text: string, outcome: string): number =>
      Number(new RegExp(`pushpop_operations_total\\{operation="deleteQueue",outcome="${outcome}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
    const before = await metrics();
    const q = uniqueQueueId('count');
    await svc.http.delete(`/queue/${q}`);
    await svc.http.delete(`/queue/${q}`).set('x-api-key', KEYS.reader.key);
    await svc.http.delete(`/queue/${q}`).set('x-api-key', KEYS.reader.key);
    const after = await metrics();
    expect(count(after, 'UNAUTHORIZED') - count(before, 'UNAUTHORIZED')).toBe(1);
    expect(count(after, 'FORBIDDEN') - count(before, 'FORBIDDEN')).toBe(2);
  });

  it('the OpenAPI document: a bearer and an X-API-Key scheme, and every operation but the health checks needs a key with its scopes', () => {
    const doc = JSON.parse(readFileSync(join(repoRoot, 'openapi.json'), 'utf8')) as {
      components: { securitySchemes: Record<string, { type: string; scheme?: string; in?: string; name?: string }> };
      paths: Record<string, Record<string, { operationId: string; security?: Record<string, string[]>[]; 'x-pushpop-scopes'?: string[] }>>;
    };
    expect(doc.components.securitySchemes).toMatchObject({
      bearer: { type: 'http', scheme: 'bearer' },
      'api-key': { type: 'apiKey', in: 'header', name: 'X-API-Key' },
    });
    const byOperation = new Map(Object.values(doc.paths).flatMap((item) => Object.values(item).map((op) => [op.operationId, op] as const)));
    for (const route of ROUTES) {
      const op = byOperation.get(route.operation)!;
      expect(op, route.operation).toBeDefined();
      expect(op.security, route.operation).toEqual(expect.arrayContaining([{ bearer: [] }, { 'api-key': [] }]));
      expect(op['x-pushpop-scopes'], route.operation).toEqual(route.scope === null ? [] : route.scope === 'admin' ? ['admin'] : [route.scope, 'admin']);
    }
    // Nothing else is left open by mistake; the open ones say so with an empty requirement.
    const open = [...byOperation.values()].filter((op) => !op.security?.length).map((op) => op.operationId);
    expect(open.sort()).toEqual(['live', 'ready']);
    for (const name of open) expect(byOperation.get(name)!.security, name).toEqual([]);
  });
});

describe(`without keys, and METRICS_PUBLIC (${databaseKind})`, () => {
  let open: TestService;
  let metricsPublic: TestService;
  beforeAll(async () => {
    open = await startService();
    metricsPublic = await startService({ env: { API_KEYS, METRICS_PUBLIC: 'true' } });
  });
  afterAll(async () => {
    for (const s of [open, metricsPublic]) {
      await s?.close();
      if (s) removeDataDir(s.dataDir);
    }
  });

  it('with no keys configured every route is open, and /whoami says so', async () => {
    const q = uniqueQueueId('open');
    expect((await open.http.post(`/queue/${q}/push`).send({ item: { a: 1 } })).status).toBe(200);
    expect((await open.http.delete(`/queue/${q}`)).status).toBe(200);
    expect((await open.http.get('/whoami')).body).toEqual({ authentication: false, name: null, scopes: ['produce', 'consume', 'read', 'admin'] });
  });

  it('METRICS_PUBLIC=true opens /metrics alone', async () => {
    expect((await metricsPublic.http.get('/metrics')).status).toBe(200);
    expectRefused(await metricsPublic.http.get('/queues'), 401, '/queues');
  });
});

describe('boot refusals', () => {
  const refusal = async (env: Record<string, string>): Promise<string> => {
    try {
      const app = await createApp(env, false);
      await app.close();
    } catch (error) {
      expect(error).toBeInstanceOf(EnvironmentError);
      return (error as Error).message;
    }
    throw new Error(`the service started with ${JSON.stringify(env)}`);
  };

  it('refuses a non-loopback HOST without keys, unless ALLOW_UNAUTHENTICATED=true', async () => {
    expect(await refusal({ HOST: '0.0.0.0', ALLOW_UNAUTHENTICATED: 'false' })).toMatch(
      /HOST="0\.0\.0\.0" serves other machines, and no API keys are configured/,
    );
    expect(await refusal({ HOST: '::', ALLOW_UNAUTHENTICATED: 'false' })).toMatch(/no API keys are configured/);
  });

  it('refuses a malformed API_KEYS naming the entry, never the key', async () => {
    const message = await refusal({ API_KEYS: `ok:${KEYS.ops.key}:admin,broken-entry-with-secret-SECRET123456:admin` });
    expect(message).toMatch(/API_KEYS entry 2/);
    expect(message).not.toContain('SECRET');
    expect(message).not.toContain(KEYS.ops.key);
  });
});
