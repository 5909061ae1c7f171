import { PushpopClient } from '@pushpop/client';
import { beforeAll, describe, expect, it } from 'vitest';
import { serviceOnPrivateDatabase, type TestService, uniqueQueueId } from '../support/service.js';

/**
 * The client rides out a database restart: while the database is away the service answers 503
 * STORE_UNAVAILABLE with Retry-After, and the client's calls wait and try again instead of
 * failing. On a private PostgreSQL server this test starts and stops itself.
 */
describe('the client while the database is stopped and started', () => {
  const privateDatabase = serviceOnPrivateDatabase();
  const database = privateDatabase.database;
  let svc: TestService;
  beforeAll(() => {
    svc = privateDatabase.service();
  });

  it('retries 503 until the database is back; a client without retries gets the 503', async () => {
    const q = uniqueQueueId('outage');
    const client = new PushpopClient({ baseUrl: svc.url, retry: { retries: 60, maxDelayMs: 250 } });
    await client.queue(q).push({ n: 0 });

    await database.stop();
    const impatient = new PushpopClient({ baseUrl: svc.url, retry: { retries: 0 } });
    await expect(impatient.queue(q).push({ n: -1 })).rejects.toMatchObject({ status: 503, errorCode: 'STORE_UNAVAILABLE' });

    const before = client.requests;
    const pushing = client.queue(q).push({ n: 1 });
    const popping = client.queue(q).info();
    // Back once the client has been refused and has tried again.
    await expect.poll(() => client.requests - before, { timeout: 20_000, interval: 20 }).toBeGreaterThan(3);
    await database.start();
    await expect(pushing).resolves.toMatchObject({ success: true });
    expect((await popping).queue_id).toBe(q);
    expect(client.requests - before).toBeGreaterThan(2);
    expect(await client.queue<{ n: number }>(q).pop({ depth: 10 })).toMatchObject({ items: [{ n: 0 }, { n: 1 }] });
  });
});
