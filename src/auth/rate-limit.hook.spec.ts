import fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Scope } from '../auth/principal.js';
import { PushpopError } from '../common/errors.js';
import { parseEnvironment } from '../config/environment.js';
import { clientNetwork, rateLimitKey, registerRateLimit } from './rate-limit.hook.js';

/**
 * A bare Fastify with what the app puts around the hook: an authentication hook added first
 * (a request with `x-test-key: <name>` carries that key's principal), the contract's error body,
 * and a clock the test moves by hand.
 */
function server(env: Record<string, string>): { app: FastifyInstance; advance: (ms: number) => void } {
  let now = 0;
  const app = fastify();
  app.addHook('onRequest', (request, _reply, done) => {
    const name = request.headers['x-test-key'];
    if (typeof name === 'string') request.principal = { name, scopes: new Set<Scope>(['admin']) };
    done();
  });
  registerRateLimit(app, parseEnvironment(env), { now: () => now });
  app.setErrorHandler((error, _request, reply) => {
    const e = error as PushpopError;
    return reply.code(e.status).headers(e.headers).send({ statusCode: e.status, error_code: e.errorCode, message: e.message });
  });
  for (const url of ['/health', '/health/ready', '/queues', '/queue/:id']) app.get(url, () => ({ ok: true }));
  return { app, advance: (ms) => (now += ms) };
}

const rateHeaders = (headers: Record<string, unknown>): Record<string, unknown> =>
  Object.fromEntries(Object.entries(headers).filter(([name]) => name.startsWith('ratelimit-') || name === 'retry-after'));

describe('registerRateLimit', () => {
  let app: FastifyInstance | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it('adds nothing at all when RATE_LIMIT_PER_SECOND is 0 (the default)', () => {
    const bare = fastify();
    const addHook = vi.spyOn(bare, 'addHook');
    registerRateLimit(bare, parseEnvironment({}));
    registerRateLimit(bare, parseEnvironment({ RATE_LIMIT_PER_SECOND: '0', RATE_LIMIT_BURST: '5' }));
    expect(addHook).not.toHaveBeenCalled();
  });

  it('answers 429 RATE_LIMITED with Retry-After past the burst, and RateLimit-* on every answer', async () => {
    let advance: (ms: number) => void;
    ({ app, advance } = server({ RATE_LIMIT_PER_SECOND: '0.5', RATE_LIMIT_BURST: '2' }));
    const first = await app.inject('/queues');
    expect(first.statusCode).toBe(200);
    expect(rateHeaders(first.headers)).toEqual({ 'ratelimit-limit': '2', 'ratelimit-remaining': '1', 'ratelimit-reset': '2' });
    const second = await app.inject('/nowhere');
    expect(second.statusCode).toBe(404);
    expect(rateHeaders(second.headers)).toEqual({ 'ratelimit-limit': '2', 'ratelimit-remaining': '0', 'ratelimit-reset': '4' });
    const refused = await app.inject('/queue/q1');
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toEqual({
      statusCode: 429,
      error_code: 'RATE_LIMITED',
      message: 'Rate limit exceeded (0.5 requests per second, bursts of 2); retry in 2 s',
    });
    expect(rateHeaders(refused.headers)).toEqual({ 'ratelimit-limit': '2', 'ratelimit-remaining': '0', 'ratelimit-reset': '4', 'retry-after': '2' });
    advance(1_000);
    expect(rateHeaders((await app.inject('/queues')).headers)).toMatchObject({ 'ratelimit-reset': '3', 'retry-after': '1' });
    advance(1_000);
    const again = await app.inject('/queues');
    expect(again.statusCode).toBe(200);
    expect(rateHeaders(again.headers)).toEqual({ 'ratelimit-limit': '2', 'ratelimit-remaining': '0', 'ratelimit-reset': '4' });
  });

  it('never limits /health and /health/ready, nor tells them a limit', async () => {
    ({ app } = server({ RATE_LIMIT_PER_SECOND: '1', RATE_LIMIT_BURST: '1' }));
    expect((await app.inject('/queues')).statusCode).toBe(200);
    expect((await app.inject('/queues')).statusCode).toBe(429);
    for (let i = 0; i < 20; i++) {
      for (const url of ['/health', '/health/ready', '/health?x=1']) {
        const res = await app.inject(url);
        expect(res.statusCode, url).toBe(200);
        expect(rateHeaders(res.headers), url).toEqual({});
      }
    }
    // Unknown paths under /health are limited like any other.
    expect((await app.inject('/health/nope')).statusCode).toBe(429);
  });

  it('one bucket per API key name, whatever the address; one per address without a key', async () => {
    ({ app } = server({ RATE_LIMIT_PER_SECOND: '1', RATE_LIMIT_BURST: '1' }));
    const get = (remoteAddress: string, key?: string): Promise<number> =>
      app!.inject({ url: '/queues', remoteAddress, headers: key ? { 'x-test-key': key } : {} }).then((res) => res.statusCode);
    expect(await get('192.0.2.1', 'billing')).toBe(200);
    expect(await get('192.0.2.2', 'billing')).toBe(429); // same key, another machine
    expect(await get('192.0.2.1', 'ops')).toBe(200);
    expect(await get('192.0.2.1')).toBe(200); // the address's own bucket
    expect(await get('192.0.2.1')).toBe(429);
    expect(await get('192.0.2.2')).toBe(200);
    expect(await get('::ffff:192.0.2.2')).toBe(429); // the same IPv4 client
    expect(await get('2001:db8:1:2::1')).toBe(200);
    expect(await get('2001:db8:1:2:ffff::9')).toBe(429); // the same /64
    expect(await get('2001:db8:1:3::1')).toBe(200);
  });
});

describe('rateLimitKey', () => {
  it('names the key when the request carries one, else the address', () => {
    expect(rateLimitKey({ ip: '192.0.2.7', principal: { name: 'billing', scopes: new Set() } })).toBe('key:billing');
    expect(rateLimitKey({ ip: '192.0.2.7' })).toBe('ip:192.0.2.7');
    expect(rateLimitKey({ ip: '2001:db8::7' })).toBe('ip:2001:db8:0:0::/64');
  });
});

describe('clientNetwork', () => {
  it.each([
    ['127.0.0.1', '127.0.0.1'],
    ['::ffff:127.0.0.1', '127.0.0.1'],
    ['::FFFF:192.0.2.1', '192.0.2.1'],
    ['0:0:0:0:0:ffff:192.0.2.1', '192.0.2.1'],
    ['::1', '0:0:0:0::/64'],
    ['::', '0:0:0:0::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['2001:0DB8:0000:0001:0002:0003:0004:0005', '2001:db8:0:1::/64'],
    ['2001:db8:0:1::', '2001:db8:0:1::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['64:ff9b::192.0.2.1', '64:ff9b:0:0::/64'],
    ['::ffff:abcd:192.0.2.1', '0:0:0:0::/64'],
  ])('%s → %s', (ip, expected) => {
    expect(clientNetwork(ip)).toBe(expected);
  });
});
