import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeDataDir, startService, TestService, uniqueQueueId } from '../support/service.js';

/** The value of one sample of the exposition, e.g. `pushpop_operations_total{operation="push",outcome="ok"}`; 0 when absent. */
function sample(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1).split(' ')[0]);
}

const ops = (operation: string, outcome: string): string => `pushpop_operations_total{operation="${operation}",outcome="${outcome}"}`;

describe('/metrics counts the queue operations', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startService();
  });
  afterAll(async () => {
    await svc.close();
    removeDataDir(svc.dataDir);
  });

  it('by operation and outcome (ok or the error_code), with their durations and the items moved', async () => {
    const q = uniqueQueueId('metrics');
    expect((await svc.http.post(`/queue/${q}/push`).send({ item: { a: 1 } })).status).toBe(200);
    expect((await svc.http.post(`/queue/${q}/push/batch`).send({ items: [{ item: { b: 1 } }, { item: { b: 2 } }] })).status).toBe(200);
    expect((await svc.http.post(`/queue/${q}/push`).send({ item: [] })).status).toBe(400);
    expect((await svc.http.post(`/queue/${q}/push`).set('content-type', 'text/plain').send('{"item":{}}')).status).toBe(415);
    expect((await svc.http.post(`/queue/${q}/pop?depth=2`)).status).toBe(200);
    expect((await svc.http.get(`/queue/${uniqueQueueId('missing')}`)).status).toBe(404);
    const locked = await svc.http.post(`/queue/${q}/pop?require_ack=true`);
    expect((await svc.http.post(`/queue/${q}/acknowledge`).send({ lock_id: locked.body.lock_id })).status).toBe(200);

    const res = await svc.http.get('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(res.headers['cache-control']).toBe('no-store');
    const text = res.text;
    expect({
      pushOk: sample(text, ops('push', 'ok')),
      pushInvalid: sample(text, ops('push', 'VALIDATION_FAILED')),
      pushUnsupported: sample(text, ops('push', 'UNSUPPORTED_MEDIA_TYPE')),
      batchOk: sample(text, ops('pushBatch', 'ok')),
      popOk: sample(text, ops('pop', 'ok')),
      getQueueMissing: sample(text, ops('getQueue', 'QUEUE_NOT_FOUND')),
      ackOk: sample(text, ops('acknowledge', 'ok')),
      pushDurations: sample(text, 'pushpop_operation_duration_seconds_count{operation="push"}'),
      pushed: sample(text, 'pushpop_items_pushed_total'),
      popped: sample(text, 'pushpop_items_popped_total'),
      acknowledged: sample(text, 'pushpop_items_acknowledged_total'),
      acknowledgementsOk: sample(text, 'pushpop_acknowledgements_total{result="ok"}'),
    }).toEqual({
      pushOk: 1,
      pushInvalid: 1,
      pushUnsupported: 1,
      batchOk: 1,
      popOk: 2,
      getQueueMissing: 1,
      ackOk: 1,
      pushDurations: 3,
      pushed: 3,
      popped: 3,
      acknowledged: 1,
      acknowledgementsOk: 1,
    });
  });
});

describe('/metrics counts the items waiting', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startService();
  });
  afterAll(async () => {
    await svc.close();
    removeDataDir(svc.dataDir);
  });

  it('pushpop_queued_items counts the items waiting in all queues, neither delayed nor locked', async () => {
    const [a, b] = [uniqueQueueId('queued'), uniqueQueueId('queued')];
    expect((await svc.http.post(`/queue/${a}/push/batch`).send({ items: [1, 2, 3, 4, 5].map((n) => ({ item: { n } })) })).status).toBe(200);
    expect((await svc.http.post(`/queue/${a}/pop?depth=2`)).status).toBe(200);
    expect((await svc.http.post(`/queue/${b}/push/batch`).send({ items: [1, 2, 3].map((n) => ({ item: { n } })) })).status).toBe(200);
    expect((await svc.http.post(`/queue/${b}/pop?depth=1&require_ack=true`)).status).toBe(200);
    expect((await svc.http.post(`/queue/${b}/push`).send({ item: { later: true }, delay_seconds: 60 })).status).toBe(200);
    const text = (await svc.http.get('/metrics')).text;
    expect(text).toMatch(/^# TYPE pushpop_queued_items gauge$/m);
    expect(sample(text, 'pushpop_queued_items')).toBe(3 + 2);
  });
});
