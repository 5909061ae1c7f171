import { setTimeout as sleep } from 'node:timers/promises';
import type { Response } from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeDataDir, sharedDatabase, startService, TestService, uniqueQueueId } from '../support/service.js';

/**
 * Rate limits over HTTP (CONTRACT.md "Rate limiting"). Every request of a test comes from
 * 127.0.0.1, so each limit gets a service of its own, all on one database. The rates are slow
 * enough that a stalled machine does not refill a bucket between two requests of a test.
 */

/** The RateLimit-* and Retry-After headers of an answer, as numbers. */
function limits(res: Response): { limit?: number; remaining?: number; reset?: number; retryAfter?: number } {
  const number = (name: string): number | undefined => (res.headers[name] === undefined ? undefined : Number(res.headers[name]));
  const all = {
    limit: number('ratelimit-limit'),
    remaining: number('ratelimit-remaining'),
    reset: number('ratelimit-reset'),
    retryAfter: number('retry-after'),
  };
  return Object.fromEntries(Object.entries(all).filter(([, v]) => v !== undefined));
}

function sample(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1).split(' ')[0]);
}

describe('rate limits', () => {
  /** One token per 20 s, bursts of 4. */
  let slow: TestService;
  /** One token per 4 s, bursts of 1. */
  let refilling: TestService;
  /** No RATE_LIMIT_* at all. */
  let unlimited: TestService;

  beforeAll(async () => {
    slow = await startService({ env: { RATE_LIMIT_PER_SECOND: '0.05', RATE_LIMIT_BURST: '4' } });
    refilling = await startService({ env: { RATE_LIMIT_PER_SECOND: '0.25', RATE_LIMIT_BURST: '1', ...sharedDatabase(slow) } });
    unlimited = await startService({ env: sharedDatabase(slow) });
  });
  afterAll(async () => {
    await unlimited?.close();
    await refilling?.close();
    await slow?.close();
    if (slow) removeDataDir(slow.dataDir);
  });

  it('lets a burst through, then answers 429 RATE_LIMITED with Retry-After; every answer tells the limit', async () => {
    const q = uniqueQueueId('limited');
    const answers: Response[] = [];
    answers.push(await slow.http.post(`/queue/${q}/push`).send({ item: { n: 1 } }));
    answers.push(await slow.http.get('/queues'));
    answers.push(await slow.http.get('/no/such/path'));
    answers.push(await slow.http.get(`/queue/${q}/push`)); // a known path, another method
    expect(answers.map((res) => res.status)).toEqual([200, 200, 404, 405]);
    expect(answers.map((res) => limits(res).limit)).toEqual([4, 4, 4, 4]);
    expect(answers.map((res) => limits(res).remaining)).toEqual([3, 2, 1, 0]);
    // Seconds until the bucket is full again: 20 s per missing token.
    expect(answers.map((res) => limits(res).reset)).toEqual([20, 40, 60, 80].map((s) => expect.toSatisfy((v: number) => v > s - 5 && v <= s)));
    for (const res of answers) expect(res.headers['retry-after']).toBeUndefined();

    const refused = await slow.http.post(`/queue/${q}/pop`);
    expect(refused.status).toBe(429);
    expect(refused.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(refused.body).toEqual({
      statusCode: 429,
      error_code: 'RATE_LIMITED',
      message: expect.stringMatching(/^Rate limit exceeded \(0\.05 requests per second, bursts of 4\); retry in \d+ s$/),
    });
    const { limit, remaining, reset, retryAfter } = limits(refused);
    expect({ limit, remaining }).toEqual({ limit: 4, remaining: 0 });
    // The next token comes 20 s after the first request: whole seconds, at least 1.
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThan(10);
    expect(retryAfter).toBeLessThanOrEqual(20);
    expect(refused.body.message).toContain(`retry in ${retryAfter} s`);
    expect(reset).toBeGreaterThan(retryAfter!);

    // Everything else is refused alike, /metrics included; nothing was popped.
    for (const res of [await slow.http.get('/metrics'), await slow.http.get(`/queue/${q}`), await slow.http.get('/admin/')]) {
      expect(res.status).toBe(429);
      expect(res.body.error_code).toBe('RATE_LIMITED');
      expect(limits(res)).toMatchObject({ limit: 4, remaining: 0 });
    }
  });

  it('never limits /health and /health/ready, and does not count them', async () => {
    for (let i = 0; i < 10; i++) {
      for (const path of ['/health', '/health/ready']) {
        const res = await slow.http.get(path);
        expect(res.status, path).toBe(200);
        expect(limits(res), path).toEqual({});
      }
    }
  });

  it('lets requests through again once Retry-After has passed, and counts the refusals in /metrics', async () => {
    const q = uniqueQueueId('refill');
    expect((await refilling.http.post(`/queue/${q}/push`).send({ item: { n: 1 } })).status).toBe(200);
    const refused = await refilling.http.post(`/queue/${q}/push`).send({ item: { n: 2 } });
    expect(refused.status).toBe(429);
    const { retryAfter } = limits(refused);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(4);

    // The bucket refills in real time: this waits out Retry-After on purpose.
    await sleep(retryAfter! * 1000 + 100);
    const metrics = await refilling.http.get('/metrics');
    expect(metrics.status).toBe(200);
    expect(limits(metrics)).toMatchObject({ limit: 1, remaining: 0 });
    expect({
      pushOk: sample(metrics.text, 'pushpop_operations_total{operation="push",outcome="ok"}'),
      pushRateLimited: sample(metrics.text, 'pushpop_operations_total{operation="push",outcome="RATE_LIMITED"}'),
      pushed: sample(metrics.text, 'pushpop_items_pushed_total'),
    }).toEqual({ pushOk: 1, pushRateLimited: 1, pushed: 1 });
  });

  it('is off by default: no RateLimit-* headers, never 429', async () => {
    const q = uniqueQueueId('unlimited');
    for (let i = 0; i < 30; i++) {
      const res = await unlimited.http.post(`/queue/${q}/push`).send({ item: { i } });
      expect(res.status).toBe(200);
      expect(limits(res)).toEqual({});
    }
    expect(limits(await unlimited.http.get('/no/such/path'))).toEqual({});
  });

  describe('with API keys', () => {
    const A = 'alpha-key-0123456789abcdef';
    const B = 'beta-key-0123456789abcdefg';
    let keyed: TestService;
    beforeAll(async () => {
      keyed = await startService({
        env: { RATE_LIMIT_PER_SECOND: '0.05', RATE_LIMIT_BURST: '2', API_KEYS: `alpha:${A}:produce,beta:${B}:read`, ...sharedDatabase(slow) },
      });
    });
    afterAll(async () => {
      await keyed?.close();
    });

    it('gives each key its own bucket, limits its 403s too, and limits requests without a known key by address', async () => {
      const q = uniqueQueueId('keyed');
      // alpha: one push, then a 403 (it may not read), then 429.
      const alpha = [
        await keyed.http
          .post(`/queue/${q}/push`)
          .set('x-api-key', A)
          .send({ item: { n: 1 } }),
        await keyed.http.get(`/queue/${q}`).set('x-api-key', A),
        await keyed.http
          .post(`/queue/${q}/push`)
          .set('x-api-key', A)
          .send({ item: { n: 2 } }),
      ];
      expect(alpha.map((r) => r.status)).toEqual([200, 403, 429]);
      expect(alpha.map((r) => limits(r).remaining)).toEqual([1, 0, 0]);
      expect(alpha[2].body.error_code).toBe('RATE_LIMITED');
      // beta, from the same address, has a full bucket of its own.
      const beta = await keyed.http.get(`/queue/${q}`).set('authorization', `Bearer ${B}`);
      expect(beta.status).toBe(200);
      expect(limits(beta)).toMatchObject({ limit: 2, remaining: 1 });
      // No key, or an unknown one: the address's bucket, so 401s cannot be sent without end.
      const anonymous = [
        await keyed.http.get('/queues'),
        await keyed.http.get('/queues').set('x-api-key', 'unknown-key-0123456789'),
        await keyed.http.get('/queues'),
      ];
      expect(anonymous.map((r) => r.status)).toEqual([401, 401, 429]);
      expect(anonymous.map((r) => limits(r).remaining)).toEqual([1, 0, 0]);
      expect((await keyed.http.get('/health')).status).toBe(200);
    });
  });
});
