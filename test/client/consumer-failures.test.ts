import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { capabilitiesOf, type Consumer, type ConsumerOptions, PushpopClient, RetryLater, UnrecoverableError } from '@pushpop/client';
import { afterEach, describe, expect, it } from 'vitest';
import { repoRoot } from '../support/child-service.js';
import { waitFor } from './client-support.js';

/**
 * The consumer's failure rules, against a fake service (a `fetch` of the test's own) that hands
 * out one item again and again, each time with the next delivery count, and records every
 * release: the delays the consumer asks for, when it dead-letters and how. Also the paths of the
 * contract's fourth additions, which the service in this repository does not have yet.
 */

const json = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });

/** An OpenAPI document of a service with the fourth additions (what the consumer reads its capabilities from). */
const FOURTH_ADDITIONS = {
  paths: {
    '/queue/{queue_id}/pop': { post: { parameters: [{ name: 'depth' }, { name: 'lock_per_item' }] } },
    '/queue/{queue_id}/acknowledge/batch': { post: {} },
    '/queue/{queue_id}/release/batch': { post: {} },
    '/queue/{queue_id}/release': { post: { requestBody: { content: { 'application/json': { schema: { $ref: '#/components/schemas/ReleaseRequestDto' } } } } } },
    '/queue/{queue_id}/acknowledge': { post: { requestBody: { content: { 'application/json': { schema: { properties: { lock_id: {}, next: {} } } } } } } },
  },
  components: { schemas: { ReleaseRequestDto: { properties: { lock_id: {}, delay_seconds: {}, dead_letter: {} } } } },
};

interface Fake {
  client: PushpopClient;
  releases: Record<string, unknown>[];
  /** Whether the item is gone (acknowledged or dead-lettered). */
  readonly gone: boolean;
}

function fakeService(
  options: { settings?: Record<string, unknown>; openapi?: unknown; onRelease?: (body: Record<string, unknown>) => Response | undefined } = {},
): Fake {
  const settings = {
    lock_mode: 'shared',
    dead_letter_queue: null,
    max_deliveries: null,
    retry_delay_seconds: 0,
    retry_backoff: 'exponential',
    retry_delay_max_seconds: 900,
    ...options.settings,
  };
  const releases: Record<string, unknown>[] = [];
  let delivery = 0;
  let held = false;
  let gone = false;
  const fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    // An answer comes after I/O, as from a real service: without it the consumer's loop would never let a timer run.
    await new Promise((resolve) => setImmediate(resolve));
    const url = new URL(input instanceof Request ? input.url : input);
    const path = url.pathname;
    if (path === '/openapi.json') return options.openapi ? json(200, options.openapi) : json(404, { statusCode: 404, error_code: 'NOT_FOUND', message: path });
    if (path.endsWith('/settings')) return json(200, settings);
    if (path.endsWith('/pop')) {
      if (held || gone) return json(200, { items: [], count: 0, locked: false });
      held = true;
      delivery++;
      const lockId = `lock-${delivery}-abcdefghijk`;
      return json(200, {
        items: [{ n: 1 }],
        count: 1,
        locked: true,
        // with lock_per_item (fourth additions), each item's lock in lock_ids
        ...(url.searchParams.get('lock_per_item') === 'true' ? { lock_ids: [lockId] } : { lock_id: lockId }),
        lock_expires_at: Date.now() / 1000 + 30,
        delivery_counts: [delivery],
      });
    }
    if (path.endsWith('/release/batch') || path.endsWith('/acknowledge/batch')) {
      // The batch routes answer per lock what the single route answers: recorded and answered as such.
      const { lock_ids: lockIds, ...fields } = JSON.parse(init?.body as string) as { lock_ids: string[] } & Record<string, unknown>;
      const single = path.replace('/batch', '');
      const results = [];
      for (const lockId of lockIds) {
        const answer = await fetch(`http://pushpop.invalid${single}`, { method: 'POST', body: JSON.stringify({ lock_id: lockId, ...fields }) });
        results.push({ lock_id: lockId, status: answer.status, ...((await answer.json()) as Record<string, unknown>) });
      }
      return json(200, { success: true, results });
    }
    if (path.endsWith('/release')) {
      const body = JSON.parse(init?.body as string) as Record<string, unknown>;
      releases.push(body);
      const answer = options.onRelease?.(body);
      if (answer) return answer;
      held = false;
      const deadLettered = body.dead_letter === true || (settings.max_deliveries !== null && delivery >= Number(settings.max_deliveries));
      gone ||= deadLettered;
      return json(200, { success: true, items_returned: deadLettered ? 0 : 1, items_delayed: deadLettered ? 0 : 1, items_dead_lettered: deadLettered ? 1 : 0 });
    }
    if (path.endsWith('/acknowledge')) {
      held = false;
      gone = true;
      return json(200, { success: true, message: 'ok', items_acknowledged: 1 });
    }
    return json(404, { statusCode: 404, error_code: 'NOT_FOUND', message: path });
  };
  const client = new PushpopClient({ baseUrl: 'http://pushpop.invalid', fetch });
  return {
    client,
    releases,
    get gone() {
      return gone;
    },
  };
}

describe('the consumer when handlers fail', () => {
  const consumers: Consumer[] = [];
  afterEach(async () => {
    await Promise.all(consumers.splice(0).map((c) => c.close(100)));
  });

  function consume(fake: Fake, handler: () => unknown, options: ConsumerOptions = {}) {
    const consumer = fake.client.consume('q', handler, { waitSeconds: 0, idleDelayMs: 5, ...options });
    consumers.push(consumer);
    const events: unknown[] = [];
    consumer.on('retrying', (e) => events.push(['retrying', e.deliveryCount, e.delaySeconds]));
    consumer.on('failed', (e) => events.push(['failed', e.deliveryCount, e.deadLettered, e.delaySeconds]));
    consumer.on('deadLettered', (e) => events.push(['deadLettered', e.deliveryCount, e.deadLetterQueue]));
    const errors: unknown[] = [];
    consumer.on('error', (error) => errors.push(error));
    return { consumer, events, errors };
  }

  it('backs off exponentially from the delivery count; after maxAttempts without a dead-letter queue it keeps backing off, and says so', async () => {
    const fake = fakeService();
    const { events } = consume(fake, () => {
      throw new Error('always');
    });
    await waitFor('six releases', () => fake.releases.length >= 6, 5000);
    expect(fake.releases.slice(0, 6).map((r) => r.delay_seconds)).toEqual([1, 2, 4, 8, 16, 32]);
    expect(events.slice(0, 6)).toEqual([
      ['retrying', 1, 1],
      ['retrying', 2, 2],
      ['retrying', 3, 4],
      ['retrying', 4, 8],
      ['failed', 5, false, 16],
      ['failed', 6, false, 32],
    ]);
    expect(fake.releases.every((r) => r.dead_letter === undefined)).toBe(true);
  });

  it("follows the backoff options, and a queue's own retry delay instead (the release then names none)", async () => {
    const fixed = fakeService();
    consume(fixed, () => Promise.reject(new Error('x')), { backoff: { type: 'fixed', delaySeconds: 7 } });
    await waitFor('three releases', () => fixed.releases.length >= 3, 5000);
    expect(fixed.releases.slice(0, 3).map((r) => r.delay_seconds)).toEqual([7, 7, 7]);

    const byQueue = fakeService({ settings: { retry_delay_seconds: 3, retry_delay_max_seconds: 10 } });
    const { events } = consume(byQueue, () => Promise.reject(new Error('x')));
    await waitFor('three releases', () => byQueue.releases.length >= 3, 5000);
    expect(byQueue.releases.slice(0, 3).map((r) => Object.keys(r))).toEqual([['lock_id'], ['lock_id'], ['lock_id']]);
    expect(events.slice(0, 3)).toEqual([
      ['retrying', 1, 3],
      ['retrying', 2, 6],
      ['retrying', 3, 10],
    ]);
  });

  it("maxAttempts defaults to the queue's max_deliveries: the service dead-letters the last release", async () => {
    const fake = fakeService({ settings: { dead_letter_queue: 'q.dlq', max_deliveries: 3 } });
    const { consumer, events } = consume(fake, () => {
      throw new Error('always');
    });
    await waitFor('dead-lettered', () => fake.gone, 5000);
    expect(fake.releases.map((r) => r.delay_seconds)).toEqual([1, 2, 4]);
    expect(events).toEqual([
      ['retrying', 1, 1],
      ['retrying', 2, 2],
      ['failed', 3, true, undefined],
      ['deadLettered', 3, 'q.dlq'],
    ]);
    expect(consumer.stats).toMatchObject({ retrying: 2, failed: 1, deadLettered: 1, completed: 0 });
  });

  it('with dead-lettering on purpose (fourth additions): dead_letter after maxAttempts, and at once for an UnrecoverableError', async () => {
    const fake = fakeService({ settings: { dead_letter_queue: 'q.dlq' }, openapi: FOURTH_ADDITIONS });
    const { events } = consume(fake, () => Promise.reject(new Error('x')), { maxAttempts: 2 });
    await waitFor('dead-lettered', () => fake.gone, 5000);
    expect(fake.releases.map((r) => [r.delay_seconds, r.dead_letter])).toEqual([
      [1, undefined],
      [undefined, true],
    ]);
    expect(events).toEqual([
      ['retrying', 1, 1],
      ['failed', 2, true, undefined],
      ['deadLettered', 2, 'q.dlq'],
    ]);

    const unrecoverable = fakeService({ settings: { dead_letter_queue: 'q.dlq' }, openapi: FOURTH_ADDITIONS });
    consume(unrecoverable, () => Promise.reject(new UnrecoverableError('bad data')));
    await waitFor('dead-lettered', () => unrecoverable.gone, 5000);
    expect(unrecoverable.releases).toEqual([{ lock_id: expect.any(String), dead_letter: true }]);
  });

  it('an UnrecoverableError on a service without dead-lettering on purpose waits for max_deliveries; with no dead-letter queue it keeps backing off', async () => {
    const fake = fakeService({ settings: { dead_letter_queue: 'q.dlq', max_deliveries: 2 } });
    const { events } = consume(fake, () => Promise.reject(new UnrecoverableError('bad data')), { maxAttempts: 5 });
    await waitFor('dead-lettered', () => fake.gone, 5000);
    expect(events).toEqual([
      ['failed', 1, false, 1],
      ['failed', 2, true, undefined],
      ['deadLettered', 2, 'q.dlq'],
    ]);

    const noQueue = fakeService({ openapi: FOURTH_ADDITIONS });
    const second = consume(noQueue, () => Promise.reject(new UnrecoverableError('bad data')));
    await waitFor('two releases', () => noQueue.releases.length >= 2, 5000);
    expect(noQueue.releases.slice(0, 2).map((r) => [r.delay_seconds, r.dead_letter])).toEqual([
      [1, undefined],
      [2, undefined],
    ]);
    expect(second.events.slice(0, 2)).toEqual([
      ['failed', 1, false, 1],
      ['failed', 2, false, 2],
    ]);
  });

  it('a dead-letter queue removed meanwhile (409 NO_DEAD_LETTER_QUEUE): reported, and the item is given back instead', async () => {
    const fake = fakeService({
      settings: { dead_letter_queue: 'q.dlq' },
      openapi: FOURTH_ADDITIONS,
      onRelease: (body) => (body.dead_letter ? json(409, { statusCode: 409, error_code: 'NO_DEAD_LETTER_QUEUE', message: 'no dead-letter queue' }) : undefined),
    });
    const { events, errors } = consume(fake, () => Promise.reject(new UnrecoverableError('bad')));
    await waitFor('two releases', () => fake.releases.length >= 2, 5000);
    expect(fake.releases.slice(0, 2).map((r) => [r.delay_seconds, r.dead_letter])).toEqual([
      [undefined, true],
      [1, undefined],
    ]);
    expect(errors[0]).toMatchObject({ errorCode: 'NO_DEAD_LETTER_QUEUE' });
    expect(events[0]).toEqual(['failed', 1, false, 1]);
  });

  it('a release refused with VALIDATION_FAILED is reported, not taken for an old service and sent again without its delay', async () => {
    const fake = fakeService({
      onRelease: () => json(400, { statusCode: 400, error_code: 'VALIDATION_FAILED', message: 'delay_seconds must not be greater than 900' }),
    });
    const { errors } = consume(fake, () => Promise.reject(new RetryLater(30)));
    await waitFor('the error', () => errors.length === 1, 5000);
    await new Promise((r) => setTimeout(r, 100));
    expect(fake.releases).toEqual([{ lock_id: expect.any(String), delay_seconds: 30 }]);
    expect(errors[0]).toMatchObject({ errorCode: 'VALIDATION_FAILED' });
  });

  it('RetryLater takes whole seconds from 0 to 900 and throws where it is made otherwise', () => {
    for (const bad of [1.5, 3600, 60_000, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => new RetryLater(bad), String(bad)).toThrow(RangeError);
    }
    expect(() => new RetryLater(1.5)).toThrow('whole number of seconds from 0 to 900 (not milliseconds)');
    expect(new RetryLater(0).delaySeconds).toBe(0);
    expect(new RetryLater(900, 'later')).toMatchObject({ delaySeconds: 900, message: 'later' });
  });

  it('capabilities come from the OpenAPI document: references resolved, nothing assumed beyond the third contract version', () => {
    const committed = JSON.parse(readFileSync(join(repoRoot, 'openapi.json'), 'utf8')) as {
      paths: Record<string, unknown>;
      components: { schemas: { ReleaseRequestDto: { properties: Record<string, unknown> } } };
    };
    expect(capabilitiesOf(committed)).toMatchObject({
      deadLetterRelease: 'dead_letter' in committed.components.schemas.ReleaseRequestDto.properties,
      batchLocks: '/queue/{queue_id}/acknowledge/batch' in committed.paths,
    });
    // The service of this repository has them all.
    expect(capabilitiesOf(committed)).toEqual({ lockPerItem: true, batchLocks: true, deadLetterRelease: true, acknowledgeNext: true });
    expect(capabilitiesOf(FOURTH_ADDITIONS)).toEqual({ lockPerItem: true, batchLocks: true, deadLetterRelease: true, acknowledgeNext: true });
    expect(capabilitiesOf({})).toEqual({ lockPerItem: false, batchLocks: false, deadLetterRelease: false, acknowledgeNext: false });
  });
});
