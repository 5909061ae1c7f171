import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseProvider } from '../../src/database/database.provider.js';
import { UnitOfWork } from '../../src/database/unit-of-work.js';
import { EnqueueCarrier } from '../../src/enqueue/enqueue-carrier.js';
import { TurnRunner } from '../../src/queue/runtime/turn-runner.js';
import { EnqueueInboxRepository, InboxRowsGone } from '../../src/storage/enqueue-inbox.repository.js';
import { answer, drain, sleep } from '../support/queue-helpers.js';
import { databaseKind, pollsWaitingOn, removeDataDir, startService, type TestService, uniqueQueueId } from '../support/service.js';

/**
 * `pushpop_enqueue` called from an application's own transactions (CONTRACT.md, "Transactional
 * enqueue from SQL"), on a plain `pg` connection to the service's database and schema: what
 * commits is poppable once, what rolls back is not, in commit order; its arguments are checked
 * as an HTTP push's; a role with only `EXECUTE` enqueues and reads nothing.
 */
describe(`enqueue from SQL (${databaseKind})`, () => {
  let svc: TestService;
  const clients: pg.Client[] = [];

  /** A connection of the application: pushpop's database, its schema on the search path. */
  async function connect(): Promise<pg.Client> {
    const client = new pg.Client(svc.app.get(DatabaseProvider).clientConfig('sql-enqueue-test'));
    await client.connect();
    clients.push(client);
    return client;
  }

  const enqueue = (client: pg.Client, queueId: string, item: unknown, extra = ''): Promise<pg.QueryResult> =>
    client.query(`SELECT pushpop_enqueue($1, $2::jsonb${extra}) AS seq`, [queueId, JSON.stringify(item)]);

  const popAll = async (q: string): Promise<unknown[]> => drain(svc.http, q);
  /** Waits until the queue counts `n` items (carried soon after the commit). */
  const counted = async (q: string, n: number): Promise<boolean> => {
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      const res = await answer(svc.http.get(`/queue/${q}`));
      if (res.status === 200 && (res.body as { count: number; delayed?: number }).count >= n) return true;
      await sleep(20);
    }
    return false;
  };
  const inboxEmpty = async (client: pg.Client): Promise<boolean> => {
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      if ((await client.query(`SELECT count(*)::int AS n FROM enqueue_commits`)).rows[0].n === 0) return true;
      await sleep(20);
    }
    return false;
  };

  beforeAll(async () => {
    svc = await startService();
  });
  afterAll(async () => {
    for (const client of clients) await client.end().catch(() => undefined);
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  it('committed: poppable once, with its priority, headers and dedup id as over HTTP; the call answers its sequence number', async () => {
    const db = await connect();
    const q = uniqueQueueId('sql');
    await db.query('BEGIN');
    const first = await enqueue(db, q, { n: 1 });
    await enqueue(db, q, { n: 2 }, `, priority => 3, headers => '{"tenant": "acme"}'::jsonb`);
    await enqueue(db, q, { n: 3 }, `, dedup_id => 'order-1'`);
    await enqueue(db, q, { n: 4 }, `, dedup_id => 'order-1'`);
    await db.query('COMMIT');
    expect(Number(first.rows[0].seq)).toBeGreaterThan(0);
    expect(await counted(q, 3)).toBe(true);
    const res = await answer(svc.http.post(`/queue/${q}/pop?depth=10&include_headers=true`));
    expect(res.body.items).toEqual([{ n: 1 }, { n: 3 }, { n: 2 }]);
    expect(res.body.headers).toEqual([{}, {}, { tenant: 'acme' }]);
    // The dedup id holds against an HTTP push too, within the window.
    expect((await answer(svc.http.post(`/queue/${q}/push`).send({ item: { n: 5 }, dedup_id: 'order-1' }))).body).toMatchObject({ duplicate: true });
    await sleep(300);
    expect(await popAll(q)).toEqual([]);
  });

  it('rolled back: nothing; a savepoint rolled back: only its items gone', async () => {
    const db = await connect();
    const [gone, kept] = [uniqueQueueId('sql-rb'), uniqueQueueId('sql-sp')];
    await db.query('BEGIN');
    await enqueue(db, gone, { n: 1 });
    await db.query('ROLLBACK');

    await db.query('BEGIN');
    await db.query('SAVEPOINT a');
    // The transaction's first row is rolled back with its savepoint: the rows after it still commit.
    await enqueue(db, kept, { n: 'a' });
    await db.query('ROLLBACK TO SAVEPOINT a');
    await enqueue(db, kept, { n: 1 });
    await db.query('SAVEPOINT b');
    await enqueue(db, kept, { n: 'b' });
    await db.query('ROLLBACK TO SAVEPOINT b');
    await db.query('SAVEPOINT c');
    await enqueue(db, kept, { n: 2 });
    await db.query('RELEASE SAVEPOINT c');
    await db.query('COMMIT');
    expect(await counted(kept, 2)).toBe(true);
    expect(await inboxEmpty(db)).toBe(true);
    expect(await popAll(kept)).toEqual([{ n: 1 }, { n: 2 }]);
    expect(await popAll(gone)).toEqual([]);
  });

  it('two transactions committing in the other order than they called it: the items in commit order, call order within each', async () => {
    const [t1, t2] = [await connect(), await connect()];
    const q = uniqueQueueId('sql-order');
    await t1.query('BEGIN');
    await t2.query('BEGIN');
    await enqueue(t1, q, { t: 1, n: 1 });
    await enqueue(t2, q, { t: 2, n: 1 });
    await enqueue(t1, q, { t: 1, n: 2 });
    await enqueue(t2, q, { t: 2, n: 2 });
    await t2.query('COMMIT');
    await t1.query('COMMIT');
    expect(await counted(q, 4)).toBe(true);
    expect(await popAll(q)).toEqual([
      { t: 2, n: 1 },
      { t: 2, n: 2 },
      { t: 1, n: 1 },
      { t: 1, n: 2 },
    ]);
  });

  it('a long poll waiting on the queue answers within 500 ms of the commit, the carriers idle before it (woken by the commit)', async () => {
    const db = await connect();
    const q = uniqueQueueId('sql-poll');
    // Nothing waits: the carriers have stopped, and only the commit's wake-up starts them again.
    expect(await inboxEmpty(db)).toBe(true);
    await sleep(200);
    const poll = answer(svc.http.post(`/queue/${q}/pop?wait_seconds=10`), 15_000);
    await pollsWaitingOn(svc, q);
    await db.query('BEGIN');
    await enqueue(db, q, { n: 1 });
    await db.query('COMMIT');
    const committed = Date.now();
    const res = await poll;
    expect(res.body.items).toEqual([{ n: 1 }]);
    expect(Date.now() - committed).toBeLessThan(500);
  });

  it('a stream of commits (most of them finding others waiting, so sending no wake-up): every item is popped by a long poll soon after its commit, well within the idle probe’s 5 s', async () => {
    const q = uniqueQueueId('sql-stream');
    const writers = await Promise.all([1, 2, 3, 4].map(() => connect()));
    const committedAt = new Map<string, number>();
    const poppedAt = new Map<string, number>();
    // The queue exists and its actor is loaded before the stream starts.
    await writers[0].query('BEGIN');
    await enqueue(writers[0], q, { k: 'first' });
    await writers[0].query('COMMIT');
    expect(await counted(q, 1)).toBe(true);
    expect(await popAll(q)).toEqual([{ k: 'first' }]);
    let writing = true;
    const consumer = (async () => {
      while (writing || poppedAt.size < committedAt.size) {
        const res = await answer(svc.http.post(`/queue/${q}/pop?wait_seconds=2&depth=100`), 10_000);
        expect(res.status).toBe(200);
        const at = Date.now();
        for (const item of res.body.items as { k: string }[]) poppedAt.set(item.k, at);
      }
    })();
    await Promise.all(
      writers.map(async (db, w) => {
        for (let i = 0; i < 40; i++) {
          const k = `${w}-${i}`;
          await db.query('BEGIN');
          await enqueue(db, q, { k });
          await db.query('COMMIT');
          committedAt.set(k, Date.now());
          if (i % 10 === 9) await sleep(50);
        }
      }),
    );
    writing = false;
    await consumer;
    expect([...poppedAt.keys()].sort()).toEqual([...committedAt.keys()].sort());
    // Generous for a loaded machine (typically tens of milliseconds), yet below the idle probe's 5 s that a lost wake-up would wait for.
    const late = [...committedAt].map(([k, at]) => ({ k, ms: poppedAt.get(k)! - at })).filter((x) => x.ms >= 2500);
    expect(late, 'items popped 2.5 s or more after their commit').toEqual([]);
  });

  it('a commit under way (its trigger fired early, the transaction still open) keeps the carriers looking: it is carried within 500 ms once it commits', async () => {
    const [early, other] = [await connect(), await connect()];
    const q = uniqueQueueId('sql-early');
    expect(await inboxEmpty(other)).toBe(true);
    await early.query('BEGIN');
    await enqueue(early, q, { n: 1 });
    // The commit trigger runs now (it found nothing waiting, so it notifies at the commit) ...
    await early.query('SET CONSTRAINTS ALL IMMEDIATE');
    // ... and another transaction commits meanwhile: it sees none waiting and wakes the carriers, which carry it and then wait for the open one.
    await other.query('BEGIN');
    await enqueue(other, q, { n: 2 });
    await other.query('COMMIT');
    expect(await counted(q, 1)).toBe(true);
    await sleep(300);
    const poll = answer(svc.http.post(`/queue/${q}/pop?wait_seconds=10&depth=10`), 15_000);
    expect((await poll).body.items).toEqual([{ n: 2 }]);
    const next = answer(svc.http.post(`/queue/${q}/pop?wait_seconds=10`), 15_000);
    await pollsWaitingOn(svc, q);
    await early.query('COMMIT');
    const committed = Date.now();
    expect((await next).body.items).toEqual([{ n: 1 }]);
    expect(Date.now() - committed).toBeLessThan(500);
  });

  it('a delay counts from the call: the item is delayed, then poppable', async () => {
    const db = await connect();
    const q = uniqueQueueId('sql-delay');
    await enqueue(db, q, { n: 1 }, ', delay_seconds => 1');
    expect(await inboxEmpty(db)).toBe(true);
    expect((await answer(svc.http.get(`/queue/${q}`))).body).toMatchObject({ count: 0, delayed: 1 });
    expect(await counted(q, 1)).toBe(true);
    expect(await popAll(q)).toEqual([{ n: 1 }]);
  });

  it('checks the limits its service set as it started, from the next call of every session once they change', async () => {
    const db = await connect();
    const q = uniqueQueueId('sql-limits');
    const inbox = svc.app.get(EnqueueInboxRepository);
    const call = (priority: number, bytes: number): Promise<unknown> =>
      db.query('SELECT pushpop_enqueue($1, $2::jsonb, $3)', [q, JSON.stringify({ s: 'x'.repeat(bytes - '{"s":""}'.length) }), priority]).then(
        () => 'accepted',
        (e: { code?: string; message?: string }) => `${e.code}: ${e.message}`,
      );
    await db.query('BEGIN');
    // This session plans its calls with the service's defaults first.
    expect(await call(200, 2000)).toBe('accepted');
    await db.query('ROLLBACK');
    try {
      await inbox.setLimits(1000, 9);
      await db.query('BEGIN');
      expect(await call(9, 1000)).toBe('accepted');
      expect(await call(10, 100)).toBe('22023: pushpop_enqueue: priority must be an integer from 0 to 9');
      await db.query('ROLLBACK');
      await db.query('BEGIN');
      expect(await call(0, 1001)).toBe('22023: pushpop_enqueue: item must be at most 1000 bytes of JSON (it is 1001)');
      await db.query('ROLLBACK');
    } finally {
      await inbox.setLimits(262_144, 255);
    }
    await db.query('BEGIN');
    expect(await call(200, 2000)).toBe('accepted');
    await db.query('ROLLBACK');
  });

  it('every invalid argument raises 22023 naming it, and the caller decides what happens to its transaction', async () => {
    const db = await connect();
    const q = uniqueQueueId('sql-bad');
    const refused = async (args: string, values: unknown[], name: string): Promise<void> => {
      const error = (await db.query(`SELECT pushpop_enqueue(${args})`, values).then(
        () => undefined,
        (e: unknown) => e,
      )) as { code?: string; message?: string } | undefined;
      expect(error?.code, `${args} ${JSON.stringify(values)}`).toBe('22023');
      expect(error?.message).toContain(name);
    };
    const deep = JSON.stringify(Array.from({ length: 64 }).reduce<unknown>((inner) => ({ a: inner }), {}));
    await refused('$1, $2::jsonb', ['bad/id', '{}'], 'queue_id');
    await refused('$1, $2::jsonb', ['..', '{}'], 'queue_id');
    await refused('$1, $2::jsonb', [null, '{}'], 'queue_id');
    await refused('$1, $2::jsonb', ['x'.repeat(201), '{}'], 'queue_id');
    await refused('$1, $2::jsonb', [q, '[1]'], 'item');
    await refused('$1, $2::jsonb', [q, null], 'item');
    await refused('$1, $2::jsonb', [q, deep], 'item');
    // The same depth in a value stored compressed (a column of the application's): its stored form is small.
    await db.query(`CREATE TEMP TABLE deep_items (item jsonb)`);
    await db.query(`INSERT INTO deep_items VALUES (jsonb_set($1::jsonb, '{pad}', to_jsonb(repeat('x', 4000))))`, [deep]);
    expect((await db.query(`SELECT pg_column_size(item) < 520 AS small FROM deep_items`)).rows[0].small).toBe(true);
    await refused('$1, (SELECT item FROM deep_items)', [q], 'item');
    await refused('$1, $2::jsonb', [q, JSON.stringify({ s: 'x'.repeat(262_144) })], 'item');
    await refused('$1, $2::jsonb, $3', [q, '{}', 256], 'priority');
    await refused('$1, $2::jsonb, $3', [q, '{}', -1], 'priority');
    await refused('$1, $2::jsonb, delay_seconds => $3', [q, '{}', 31_536_001], 'delay_seconds');
    await refused('$1, $2::jsonb, delay_seconds => $3', [q, '{}', -1], 'delay_seconds');
    await refused('$1, $2::jsonb, dedup_id => $3', [q, '{}', 'has space'], 'dedup_id');
    await refused('$1, $2::jsonb, dedup_id => $3', [q, '{}', ''], 'dedup_id');
    await refused('$1, $2::jsonb, headers => $3::jsonb', [q, '{}', '[]'], 'headers');
    await refused('$1, $2::jsonb, headers => $3::jsonb', [q, '{}', '{"a": 1}'], 'headers');
    await refused('$1, $2::jsonb, headers => $3::jsonb', [q, '{}', '{"bad name": "x"}'], 'headers');
    await refused('$1, $2::jsonb, headers => $3::jsonb', [q, '{}', JSON.stringify({ a: 'x'.repeat(1025) })], 'headers');
    await refused(
      '$1, $2::jsonb, headers => $3::jsonb',
      [q, '{}', JSON.stringify(Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`h${i}`, 'v'])))],
      'headers',
    );
    // At the limits: accepted, as over HTTP (the item measured as compact JSON, 262,144 bytes).
    const atLimit = { s: 'x'.repeat(262_144 - '{"s":""}'.length) };
    const atDepth = Array.from({ length: 63 }).reduce<unknown>((inner) => ({ a: inner }), {});
    await db.query('BEGIN');
    await enqueue(db, q, atLimit, `, priority => 255, delay_seconds => 0, dedup_id => 'a.b_c:d@e-f'`);
    await enqueue(db, q, atDepth);
    // A refused call inside a transaction fails that transaction only if the caller lets it.
    await db.query('SAVEPOINT s');
    await expect(enqueue(db, q, [])).rejects.toMatchObject({ code: '22023' });
    await db.query('ROLLBACK TO SAVEPOINT s');
    await db.query('COMMIT');
    expect(await counted(q, 2)).toBe(true);
    // Priority 255 comes last.
    expect(await popAll(q)).toEqual([atDepth, atLimit]);
  });

  it('a role with only EXECUTE on the function (and USAGE on the schema) enqueues and can read or change nothing of pushpop', async () => {
    const db = await connect();
    const role = `pushpop_enqueuer_${randomBytes(4).toString('hex')}`;
    const { rows } = await db.query<{ schema: string }>(`SELECT current_schema() AS schema`);
    const schema = rows[0].schema;
    await db.query(`CREATE ROLE ${role} NOLOGIN`);
    try {
      await db.query(`GRANT USAGE ON SCHEMA ${schema} TO ${role}`);
      await db.query(`GRANT EXECUTE ON FUNCTION pushpop_enqueue(text, jsonb, integer, integer, text, jsonb) TO ${role}`);
      const q = uniqueQueueId('sql-role');
      await db.query(`SET ROLE ${role}`);
      try {
        await db.query('BEGIN');
        await enqueue(db, q, { n: 1 });
        await db.query('COMMIT');
        for (const statement of [
          'SELECT * FROM queues',
          'SELECT * FROM segment_items',
          'SELECT * FROM enqueued_items',
          'SELECT * FROM enqueue_commits',
          `INSERT INTO enqueued_items (xid, queue_id, item, priority, opens) VALUES (pg_current_xact_id(), 'x', '{}', 0, false)`,
          `CREATE OR REPLACE FUNCTION pushpop_enqueue_max_priority() RETURNS integer LANGUAGE sql IMMUTABLE AS 'SELECT 1000'`,
          'DELETE FROM dedup_ids',
          'SELECT pushpop_enqueue_committed()',
        ]) {
          await expect(db.query(statement), statement).rejects.toMatchObject({ code: expect.stringMatching(/^(42501|0A000|39P01)$/) });
        }
      } finally {
        await db.query('RESET ROLE');
      }
      expect(await counted(q, 1)).toBe(true);
      expect(await popAll(q)).toEqual([{ n: 1 }]);
      // Without the grant nobody but pushpop's owner may call it (EXECUTE is not PUBLIC's).
      const other = `${role}_none`;
      await db.query(`CREATE ROLE ${other} NOLOGIN`);
      await db.query(`GRANT USAGE ON SCHEMA ${schema} TO ${other}`);
      await db.query(`SET ROLE ${other}`);
      try {
        await expect(enqueue(db, q, { n: 2 })).rejects.toMatchObject({ code: '42501' });
      } finally {
        await db.query('RESET ROLE');
        await db.query(`DROP OWNED BY ${other}`);
        await db.query(`DROP ROLE ${other}`);
      }
    } finally {
      await db.query(`DROP OWNED BY ${role}`);
      await db.query(`DROP ROLE ${role}`);
    }
  });

  it('committed rows wait while no carrier runs, and are carried when one starts; the metrics count them', async () => {
    const db = await connect();
    const carrier = svc.app.get(EnqueueCarrier);
    const q = uniqueQueueId('sql-wait');
    await carrier.onModuleDestroy();
    await db.query('BEGIN');
    for (let n = 0; n < 5; n++) await enqueue(db, q, { n });
    await db.query('COMMIT');
    await sleep(300);
    expect((await answer(svc.http.post(`/queue/${q}/pop`))).body).toMatchObject({ count: 0 });
    expect((await db.query(`SELECT count(*)::int AS n FROM enqueued_items`)).rows[0].n).toBe(5);
    const metrics = (await svc.http.get('/metrics')).text;
    expect(metrics).toMatch(/^pushpop_enqueue_waiting_items \d+/m);
    expect(metrics).toMatch(/^pushpop_enqueue_oldest_age_seconds [\d.e+-]+/m);
    const pushedBefore = Number(/^pushpop_items_pushed_total (\S+)$/m.exec(metrics)?.[1]);
    // A carriage as the loop runs it.
    while ((await carrier.carry())?.taken);
    expect(await popAll(q)).toEqual([0, 1, 2, 3, 4].map((n) => ({ n })));
    const after = (await svc.http.get('/metrics')).text;
    expect(Number(/^pushpop_items_pushed_total (\S+)$/m.exec(after)?.[1])).toBe(pushedBefore + 5);
  });

  it('a push deletes the rows it carries in its own commit, with no dedup id of its own; a push of rows already carried writes nothing', async () => {
    const db = await connect();
    const carrier = svc.app.get(EnqueueCarrier);
    const inbox = svc.app.get(EnqueueInboxRepository);
    const runner = svc.app.get(TurnRunner);
    const q = uniqueQueueId('sql-claim');
    await carrier.onModuleDestroy();
    await db.query('BEGIN');
    for (let n = 0; n < 3; n++) await enqueue(db, q, { n });
    await db.query('COMMIT');
    const { rows } = await svc.app.get(UnitOfWork).transaction((session) => inbox.next(session, 1000));
    const mine = rows.filter((r) => r.queueId === q);
    expect(mine.length).toBe(3);
    const items = mine.map((r) => ({ priority: 0, json: r.item.replace(/ /g, '') }));

    // A carriage cut short right after this push's commit: the rows went with it.
    expect(await runner.push(q, items, inbox.claim(mine))).toEqual({ enqueued: 3, duplicates: 0 });
    expect((await db.query(`SELECT count(*)::int AS n FROM enqueued_items WHERE queue_id = $1`, [q])).rows[0].n).toBe(0);
    expect((await db.query(`SELECT count(*)::int AS n FROM dedup_ids WHERE queue_id = $1`, [q])).rows[0].n).toBe(0);
    // Another carriage that read the same rows before: its push fails in its commit, and nothing of it is written.
    await expect(runner.push(q, items, inbox.claim(mine))).rejects.toBeInstanceOf(InboxRowsGone);
    expect((await answer(svc.http.get(`/queue/${q}`))).body).toMatchObject({ count: 3 });
    // The next carriage forgets the transaction whose rows are all gone.
    expect(await carrier.carry()).toEqual({ taken: 0, removed: 0 });
    expect(await inboxEmpty(db)).toBe(true);
    expect(await popAll(q)).toEqual([0, 1, 2].map((n) => ({ n })));
  });
});
