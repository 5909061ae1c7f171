import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DataSource } from 'typeorm';
import { answer, sleep } from '../support/queue-helpers.js';
import { databaseKind, removeDataDir, startService, TestService, uniqueQueueId } from '../support/service.js';

/**
 * Schedules over HTTP (CONTRACT.md, "Schedules" and "Details of the third additions"): PUT,
 * GET, DELETE and the list; validation; firings within a second of their time, pushed through
 * the queue; a paused schedule fires nothing; firings missed while no process ran are made up
 * by one push at the next start; the metrics; the scopes.
 */

interface Schedule {
  schedule_id: string;
  queue_id: string;
  cron: string;
  timezone: string;
  item: Record<string, unknown>;
  priority: number;
  paused: boolean;
  next_run_at: number | null;
  last_run_at: number | null;
}

const metric = (text: string, name: string): number => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);

describe(`schedules (${databaseKind})`, () => {
  let svc: TestService;

  beforeAll(async () => {
    svc = await startService({ env: { SCHEDULE_SWEEP_INTERVAL_MS: '200' } });
  });
  afterAll(async () => {
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  const put = (id: string, body: unknown) => answer(svc.http.put(`/schedules/${id}`).send(body as object));
  const get = (id: string) => answer(svc.http.get(`/schedules/${id}`));
  const count = async (q: string): Promise<number> => {
    const res = await answer(svc.http.get(`/queue/${q}`));
    return res.status === 404 ? 0 : (res.body as { count: number }).count;
  };
  /**
   * Resolves once a sweep that started after the call has fired a marker schedule made due
   * now. Sweeps run one at a time, so every sweep that had started before the call is over;
   * called twice, a whole sweep ran in between.
   */
  const sweepPassed = async (): Promise<void> => {
    const id = uniqueQueueId('sched-marker');
    const q = uniqueQueueId('sched-marker-q');
    expect((await put(id, { queue_id: q, cron: '0 0 1 1 *', item: { marker: true } })).status).toBe(200);
    await svc.app.get(DataSource).query(`UPDATE schedules SET next_run_at = now() - interval '1 second' WHERE schedule_id = $1`, [id]);
    await expect.poll(() => count(q), { timeout: 10_000, interval: 20 }).toBe(1);
    await answer(svc.http.delete(`/schedules/${id}`));
  };

  it('PUT creates and replaces, GET and the list answer it with next_run_at and last_run_at, DELETE removes it; unknown ids are 404 SCHEDULE_NOT_FOUND', async () => {
    const id = uniqueQueueId('sched-crud');
    const q = uniqueQueueId('sched-crud-q');
    const before = Date.now() / 1000;
    const created = await put(id, { queue_id: q, cron: '0 6 * * 1-5', timezone: 'Europe/Berlin', item: { report: 'sales', nul: 'a\u0000b' }, priority: 3 });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const s = created.body as unknown as Schedule;
    expect(s).toMatchObject({
      schedule_id: id,
      queue_id: q,
      cron: '0 6 * * 1-5',
      timezone: 'Europe/Berlin',
      item: { report: 'sales', nul: 'a\u0000b' },
      priority: 3,
      paused: false,
      last_run_at: null,
    });
    expect(s.next_run_at).toBeGreaterThan(before);
    // 06:00 in Berlin on a weekday.
    const next = new Date(s.next_run_at! * 1000);
    const local = new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Berlin', hour: '2-digit', minute: '2-digit', weekday: 'short', hour12: false }).format(
      next,
    );
    expect(local).toMatch(/^(Mon|Tue|Wed|Thu|Fri) 06:00$/);
    expect((await get(id)).body).toEqual(s);

    const defaults = await put(id, { queue_id: q, cron: '*/5 * * * *', item: {} });
    expect(defaults.body).toMatchObject({ schedule_id: id, timezone: 'UTC', priority: 0, paused: false, item: {}, cron: '*/5 * * * *' });
    expect((defaults.body as unknown as Schedule).next_run_at! % 300 === 0).toBe(true);

    const listed = await answer(svc.http.get('/schedules'));
    expect(listed.status).toBe(200);
    expect((listed.body as { schedules: Schedule[] }).schedules.find((x) => x.schedule_id === id)).toEqual(defaults.body);

    expect((await answer(svc.http.delete(`/schedules/${id}`))).body).toEqual({ success: true });
    for (const res of [await get(id), await answer(svc.http.delete(`/schedules/${id}`))]) {
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ statusCode: 404, error_code: 'SCHEDULE_NOT_FOUND', message: `Schedule ${id} not found` });
    }
  });

  it('pages the list in schedule id order through next_cursor', async () => {
    const prefix = uniqueQueueId('sched-page');
    for (const n of [3, 1, 2]) expect((await put(`${prefix}-${n}`, { queue_id: 'q', cron: '0 0 1 1 *', item: { n } })).status).toBe(200);
    const seen: string[] = [];
    let cursor: string | null = `${prefix}-0`;
    while (cursor !== null && seen.length < 10) {
      const res = await answer(svc.http.get('/schedules').query({ limit: 1, cursor }));
      const page = res.body as { schedules: Schedule[]; next_cursor: string | null };
      seen.push(...page.schedules.map((x) => x.schedule_id).filter((x) => x.startsWith(prefix)));
      cursor = page.schedules.some((x) => x.schedule_id.startsWith(prefix)) ? page.next_cursor : null;
    }
    expect(seen).toEqual([`${prefix}-1`, `${prefix}-2`, `${prefix}-3`]);
    for (const n of [1, 2, 3]) await answer(svc.http.delete(`/schedules/${prefix}-${n}`));
  });

  it('refuses bad ids (400 INVALID_SCHEDULE_ID) and bad bodies (400 VALIDATION_FAILED, 413 for a large item), changing nothing', async () => {
    const good = { queue_id: 'q', cron: '* * * * *', item: { a: 1 } };
    for (const bad of ['a%20b', 'x'.repeat(201), 'caf%C3%A9']) {
      for (const res of [await put(bad, good), await get(bad), await answer(svc.http.delete(`/schedules/${bad}`))]) {
        expect({ status: res.status, code: res.body.error_code }, bad).toEqual({ status: 400, code: 'INVALID_SCHEDULE_ID' });
      }
    }
    const id = uniqueQueueId('sched-bad');
    const bodies: unknown[] = [
      { ...good, cron: '* * * *' },
      { ...good, cron: '0 0 0 * * * 2030' },
      { ...good, cron: '@hourly' },
      { ...good, cron: '61 * * * *' },
      { ...good, cron: '0 0 30 2 *' },
      { ...good, cron: 5 },
      { ...good, timezone: 'Mars/Olympus' },
      { ...good, timezone: '' },
      { ...good, timezone: null },
      { ...good, item: [1] },
      { ...good, item: 'x' },
      { queue_id: 'q', cron: '* * * * *' },
      { ...good, priority: 256 },
      { ...good, priority: -1 },
      { ...good, priority: 1.5 },
      { ...good, paused: 'yes' },
      { ...good, queue_id: 'a b' },
      { ...good, queue_id: '..' },
      { cron: '* * * * *', item: {} },
      { ...good, surprise: true },
    ];
    for (const body of bodies) {
      const res = await put(id, body);
      expect({ status: res.status, code: res.body.error_code }, JSON.stringify(body)).toEqual({ status: 400, code: 'VALIDATION_FAILED' });
    }
    const large = await put(id, { ...good, item: { big: 'x'.repeat(300_000) } });
    expect({ status: large.status, code: large.body.error_code }).toEqual({ status: 413, code: 'ITEM_TOO_LARGE' });
    expect((await get(id)).status, 'nothing was stored').toBe(404);
  });

  it('fires within a second of its time, pushing the item at its priority; a paused schedule fires nothing and has no next run', async () => {
    const id = uniqueQueueId('sched-fire');
    const q = uniqueQueueId('sched-fire-q');
    const created = (await put(id, { queue_id: q, cron: '* * * * * *', item: { tick: true }, priority: 7 })).body as unknown as Schedule;
    const polled = await answer(svc.http.post(`/queue/${q}/pop?wait_seconds=5`), 10_000);
    const arrived = Date.now();
    expect(polled.body).toMatchObject({ items: [{ tick: true }] });
    expect(arrived - created.next_run_at! * 1000, 'pushed within a second of its time').toBeLessThan(1000);
    expect(arrived).toBeGreaterThanOrEqual(created.next_run_at! * 1000 - 50);

    await expect.poll(() => count(q), { timeout: 5000, interval: 100 }).toBeGreaterThanOrEqual(2);
    const info = (await answer(svc.http.get(`/queue/${q}`))).body as { priorities: Record<string, number> };
    expect(Object.keys(info.priorities)).toEqual(['7']);
    const running = (await get(id)).body as unknown as Schedule;
    expect(running.last_run_at).not.toBeNull();
    expect(running.next_run_at! - running.last_run_at!).toBe(1);

    const paused = (await put(id, { queue_id: q, cron: '* * * * * *', item: { tick: true }, priority: 7, paused: true })).body as unknown as Schedule;
    expect(paused).toMatchObject({ paused: true, next_run_at: null });
    await sweepPassed(); // a firing claimed before the PUT may still have been on its way
    const held = await count(q);
    // Nothing may fire while paused: watched over two ticks of its cron.
    await sleep(2000);
    expect(await count(q), 'paused: nothing more').toBe(held);
    await answer(svc.http.delete(`/schedules/${id}`));
  });

  it('the metrics: schedules, firings, firings made up', async () => {
    const id = uniqueQueueId('sched-metrics');
    const q = uniqueQueueId('sched-metrics-q');
    const before = (await svc.http.get('/metrics')).text;
    expect((await put(id, { queue_id: q, cron: '0 0 1 1 *', item: { m: 1 } })).status).toBe(200);
    // As if no process had run for ten minutes: the firing is long past.
    await svc.app.get(DataSource).query(`UPDATE schedules SET next_run_at = now() - interval '10 minutes' WHERE schedule_id = $1`, [id]);
    await expect.poll(() => count(q), { timeout: 5000, interval: 100 }).toBe(1);
    // Counted once claimed, which comes after the push.
    const counted = async (): Promise<number[]> => {
      const text = (await svc.http.get('/metrics')).text;
      return ['pushpop_schedule_firings_total', 'pushpop_schedule_firings_made_up_total'].map((name) => metric(text, name) - metric(before, name));
    };
    await expect.poll(counted, { timeout: 5000, interval: 50 }).toEqual([1, 1]);
    const after = (await svc.http.get('/metrics')).text;
    expect(metric(after, 'pushpop_schedules')).toBeGreaterThanOrEqual(0);
    expect(after).toMatch(/^# TYPE pushpop_schedules gauge$/m);
    const s = (await get(id)).body as unknown as Schedule;
    expect(s.next_run_at! * 1000, 'then on to the next firing after now').toBeGreaterThan(Date.now());
    // Two more sweeps (their marker firings count too, so the schedule is watched through its row): no second push or claim.
    await sweepPassed();
    await sweepPassed();
    expect(await count(q), 'one push made up for it').toBe(1);
    expect((await get(id)).body, 'claimed once').toEqual(s);
    await answer(svc.http.delete(`/schedules/${id}`));
  });

  it('a process that pushed a firing and stopped before claiming it: the next push of it is a duplicate, and the claim goes through', async () => {
    const id = uniqueQueueId('sched-crash');
    const q = uniqueQueueId('sched-crash-q');
    expect((await put(id, { queue_id: q, cron: '0 0 1 1 *', item: { once: true } })).status).toBe(200);
    const firing = (Math.floor(Date.now() / 1000) - 1) * 1000;
    // What the stopped process left: its push (with the firing's dedup id) committed, the row not moved on.
    expect((await answer(svc.http.post(`/queue/${q}/push`).send({ item: { once: true }, dedup_id: `schedule:${id}@${firing}` }))).body).toMatchObject({
      duplicate: false,
    });
    await svc.app.get(DataSource).query(`UPDATE schedules SET next_run_at = to_timestamp($2 / 1000.0) WHERE schedule_id = $1`, [id, firing]);
    await expect.poll(async () => ((await get(id)).body as Schedule).last_run_at, { timeout: 5000, interval: 100 }).toBe(firing / 1000);
    expect(await count(q), 'pushed once').toBe(1);
    await answer(svc.http.delete(`/schedules/${id}`));
  });

  it('firings missed while no process ran are made up by one push at the next start, not one per missed tick', async () => {
    const id = uniqueQueueId('sched-restart');
    const q = uniqueQueueId('sched-restart-q');
    expect((await put(id, { queue_id: q, cron: '* * * * *', item: { every: 'minute' } })).status).toBe(200);
    const dataDir = svc.dataDir;
    await svc.close();
    // Down for half an hour: thirty firings missed (the row as a process that stopped then would have left it).
    const quiet = await startService({ dataDir, env: { SCHEDULE_SWEEP_INTERVAL_MS: '60000' } });
    await quiet.app
      .get(DataSource)
      .query(`UPDATE schedules SET next_run_at = date_trunc('minute', now()) - interval '30 minutes' WHERE schedule_id = $1`, [id]);
    await quiet.close();
    svc = await startService({ dataDir, env: { SCHEDULE_SWEEP_INTERVAL_MS: '200' } });
    await expect.poll(() => count(q), { timeout: 5000, interval: 100 }).toBe(1);
    // Were it one push per missed tick, the sweeps below (each firing what is due) would push more.
    await sweepPassed();
    await sweepPassed();
    expect(await count(q)).toBe(1);
    const s = (await get(id)).body as unknown as Schedule;
    expect(s.next_run_at! * 1000).toBeGreaterThan(Date.now());
    expect(s.last_run_at! * 1000).toBeLessThan(Date.now() - 29 * 60_000);
    await answer(svc.http.delete(`/schedules/${id}`));
  });
});

describe(`schedules with API keys (${databaseKind})`, () => {
  let svc: TestService;
  const reader = 'reader-key-0123456789ab';
  const ops = 'ops-key-0123456789abcdef';
  const producer = 'producer-key-0123456789';

  beforeAll(async () => {
    svc = await startService({ env: { API_KEYS: `reader:${reader}:read,ops:${ops}:admin,producer:${producer}:produce` } });
  });
  afterAll(async () => {
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  it('admin changes schedules, read lists and gets them; others are 403, no key 401', async () => {
    const id = uniqueQueueId('sched-auth');
    const body = { queue_id: 'q', cron: '0 0 1 1 *', item: {} };
    const as = (key: string | undefined) => (key ? { Authorization: `Bearer ${key}` } : {});
    for (const key of [reader, producer]) {
      expect((await answer(svc.http.put(`/schedules/${id}`).set(as(key)).send(body))).body.error_code).toBe('FORBIDDEN');
      expect((await answer(svc.http.delete(`/schedules/${id}`).set(as(key)))).body.error_code).toBe('FORBIDDEN');
    }
    expect((await answer(svc.http.get('/schedules'))).status).toBe(401);
    expect((await answer(svc.http.put(`/schedules/${id}`).set(as(ops)).send(body))).status).toBe(200);
    expect((await answer(svc.http.get(`/schedules/${id}`).set(as(reader)))).status).toBe(200);
    expect((await answer(svc.http.get('/schedules').set(as(reader)))).status).toBe(200);
    expect((await answer(svc.http.get('/schedules').set(as(producer)))).body.error_code).toBe('FORBIDDEN');
    expect((await answer(svc.http.delete(`/schedules/${id}`).set(as(ops)))).status).toBe(200);
  });
});
