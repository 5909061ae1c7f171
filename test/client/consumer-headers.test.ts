import { PushpopClient } from '@pushpop/client';
import { describe, expect, it } from 'vitest';
import { waitFor } from './client-support.js';

/**
 * A consumer asks for item headers by default; against a service that knows no
 * `include_headers` (older than the third version of the contract: 400 for the unknown query
 * parameter) it pops without them. Against a fake service (a `fetch` of the test's own).
 */
describe('consumer and item headers', () => {
  it('pops with include_headers, and without them once a service refuses the parameter', async () => {
    const pops: string[] = [];
    let handedOut = false;
    const json = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
    const fetch = async (input: string): Promise<Response> => {
      const url = new URL(input);
      if (url.pathname.endsWith('/settings')) return json(404, { statusCode: 404, error_code: 'QUEUE_NOT_FOUND', message: 'no such queue' });
      if (url.pathname.endsWith('/pop')) {
        pops.push(url.search);
        if (url.searchParams.has('include_headers'))
          return json(400, { statusCode: 400, error_code: 'VALIDATION_FAILED', message: 'property include_headers should not exist' });
        if (handedOut) return json(200, { items: [], count: 0, locked: false });
        handedOut = true;
        return json(200, { items: [{ n: 1 }], count: 1, locked: true, lock_id: 'AbCdEfGhIjK', lock_expires_at: Date.now() / 1000 + 30, delivery_counts: [1] });
      }
      if (url.pathname.endsWith('/acknowledge')) return json(200, { success: true, message: 'ok', items_acknowledged: 1 });
      return json(404, { statusCode: 404, error_code: 'NOT_FOUND', message: url.pathname });
    };
    const client = new PushpopClient({ baseUrl: 'http://pushpop.invalid', fetch: fetch as typeof globalThis.fetch });
    const handled: { item: unknown; headers: Record<string, string> }[] = [];
    const consumer = client.consume('q', (m) => void handled.push({ item: m.item, headers: m.headers }), {
      waitSeconds: 0,
      idleDelayMs: 10,
    });
    try {
      await waitFor('the item', () => handled.length === 1, 5000);
    } finally {
      await consumer.close();
    }
    expect(handled).toEqual([{ item: { n: 1 }, headers: {} }]);
    expect(pops[0]).toContain('include_headers=true');
    expect(pops.slice(1).every((search) => !search.includes('include_headers'))).toBe(true);
    expect(consumer.stats).toMatchObject({ completed: 1, failed: 0 });
  });
});
