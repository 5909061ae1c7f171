import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answer, drain, range } from '../support/queue-helpers.js';
import { databaseKind, makeDataDir, removeDataDir, startService, TestService, uniqueQueueId } from '../support/service.js';
import { closeServicePair, startAlongside } from '../support/service-pair.js';

/**
 * Deduplication and delayed items held by the database, not by a process: a dedup id and a
 * delayed item outlive a restart of the service, and two processes on one database racing the
 * same dedup id enqueue it exactly once (the id is written by the push's own turn statement,
 * under the queue's version check).
 */
describe(`dedup ids and delayed items across restarts and processes (${databaseKind})`, () => {
  const dataDir = makeDataDir();
  let A: TestService | undefined;
  let B: TestService | undefined;

  afterAll(async () => {
    await closeServicePair({ A, B });
    removeDataDir(dataDir);
  });

  it('across a restart on the same data: a repeat is still a duplicate, and a delayed item still comes due', async () => {
    const q = uniqueQueueId('dedup-restart');
    A = await startService({ dataDir });
    expect((await answer(A.http.post(`/queue/${q}/push`).send({ item: { id: 'first' }, dedup_id: 'invoice-7' }))).body).toMatchObject({
      success: true,
      duplicate: false,
    });
    expect((await answer(A.http.post(`/queue/${q}/push`).send({ item: { id: 'delayed' }, delay_seconds: 2 }))).status).toBe(200);
    await A.close();
    A = await startService({ dataDir });
    expect((await answer(A.http.post(`/queue/${q}/push`).send({ item: { id: 'again' }, dedup_id: 'invoice-7' }))).body).toMatchObject({
      success: true,
      duplicate: true,
    });
    const res = await answer(
      A.http.post(`/queue/${q}/push/batch`).send({
        items: [
          { item: { id: 'again2' }, dedup_id: 'invoice-7' },
          { item: { id: 'new' }, dedup_id: 'invoice-8' },
        ],
      }),
    );
    expect(res.body).toMatchObject({ count: 1, duplicates: 1 });
    // The delayed item comes due during or soon after the restart: long polls collect all three.
    const popped: { id: string }[] = [];
    for (let i = 0; i < 5 && popped.length < 3; i++)
      popped.push(...((await answer(A.http.post(`/queue/${q}/pop?depth=10&wait_seconds=5`))).body.items as { id: string }[]));
    expect(popped.map((i) => i.id).sort()).toEqual(['delayed', 'first', 'new']);
    expect(popped.findIndex((i) => i.id === 'first')).toBeLessThan(popped.findIndex((i) => i.id === 'new'));
  });

  describe('two processes on one database', () => {
    beforeAll(async () => {
      A ??= await startService({ dataDir });
      B = await startAlongside(A);
    });

    it('racing the same dedup ids, single pushes and batches: each id enqueued exactly once', async () => {
      const q = uniqueQueueId('dedup-race');
      const keys = range(20).map((k) => `k${k}`);
      const requests = keys.flatMap((key) =>
        range(8).map((n) => {
          const svc = n % 2 === 0 ? A! : B!;
          const item = { key, n };
          return n % 4 === 3
            ? answer(
                svc.http.post(`/queue/${q}/push/batch`).send({
                  items: [
                    { item, dedup_id: key },
                    { item: { key, n, twin: true }, dedup_id: key },
                  ],
                }),
              )
            : answer(svc.http.post(`/queue/${q}/push`).send({ item, dedup_id: key }));
        }),
      );
      const answers = await Promise.all(requests);
      for (const a of answers) expect(a.status, JSON.stringify(a.body)).toBe(200);
      const enqueued = answers.reduce(
        (sum, a) => sum + (a.body.duplicate === false ? 1 : 0) + (typeof a.body.count === 'number' ? (a.body.count as number) : 0),
        0,
      );
      expect(enqueued, 'accepted answers over both processes').toBe(keys.length);
      const items = await drain<{ key: string; twin?: boolean }>(B!.http, q);
      expect(items.map((i) => i.key).sort()).toEqual([...keys].sort());
      expect(
        items.some((i) => i.twin),
        'a repeat inside a batch is never enqueued',
      ).toBe(false);
    });

    it('a delayed item pushed through one process comes due once, through either', async () => {
      const q = uniqueQueueId('delay-two');
      expect((await answer(A!.http.post(`/queue/${q}/push`).send({ item: { id: 'd' }, delay_seconds: 1 }))).status).toBe(200);
      const [a, b] = await Promise.all([answer(A!.http.post(`/queue/${q}/pop?wait_seconds=5`)), answer(B!.http.post(`/queue/${q}/pop?wait_seconds=5`))]);
      const items = [...(a.body.items as unknown[]), ...(b.body.items as unknown[])];
      expect(items).toEqual([{ id: 'd' }]);
    });
  });
});
