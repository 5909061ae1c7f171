import { randomInt } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectionSettings } from '../../src/database/database.options.js';
import { DatabaseProvider } from '../../src/database/database.provider.js';
import type { DbSession } from '../../src/database/unit-of-work.js';
import { QueueCore } from '../../src/queue/core/queue-core.js';
import { QueueStateRepository } from '../../src/storage/queue-state.repository.js';
import { range } from '../support/queue-helpers.js';
import { databaseKind, removeDataDir, startService, testDatabase, type TestService, uniqueQueueId } from '../support/service.js';

/**
 * A turn reads only the segment rows it works on, however many rows its queue has: a pop on a
 * deep queue costs PostgreSQL what it costs on a shallow one.
 *
 * What went wrong: the statements joined the segments asked for with `segment_items`, and a
 * connection that planned the join while the table looked small (a fresh database, no
 * statistics yet) kept a plan that reads every row of the queue and keeps those asked for.
 * After a bulk load, every row the load left (live or dead) was read again by every pop. The
 * test takes the choice of a join away from PostgreSQL (nested loops off): statements that
 * depend on the planner choosing the nested loop read the whole queue here, statements that
 * read one index range per segment read what they ask for.
 */
describe(`segment reads (${databaseKind})`, () => {
  let svc: TestService;
  let segments: QueueStateRepository;

  beforeAll(async () => {
    svc = await startService();
    segments = svc.app.get(QueueStateRepository);
  });
  afterAll(async () => {
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  it('a pop on a queue of 5,000 rows in its table deletes and reads only its own segment rows, whatever plan PostgreSQL settled on', async () => {
    const q = uniqueQueueId('ranges');
    // 50 segments of 100 items, all in the queue's rows (a buffer large enough that nothing is offloaded).
    const core = QueueCore.absent({ segmentSize: 100, bufferSegments: 100 });
    core.push(
      range(5000).map((n) => ({ priority: 0, json: `{"n":${n}}` })),
      0,
      0,
    );
    const filled = core.pendingWrite(() => randomInt(2 ** 40, 2 ** 47))!;
    expect(await segments.writeTurn(q, { ...filled, storeSaves: [], storeDeletes: [] })).toBe(true);
    core.committed(filled);
    expect(core.pop(1, 0)).toMatchObject({ items: [{ json: '{"n":0}' }] });
    const popped = core.pendingWrite(() => randomInt(2 ** 40, 2 ** 47))!;
    expect(popped.deletes).toEqual([{ priority: 0, segment: 0, from: 0, through: 0 }]);

    const client = new pg.Client({ connectionString: svc.app.get(DatabaseProvider).url, ...connectionSettings(testDatabase(svc.dataDir).DATABASE_SCHEMA) });
    await client.connect();
    try {
      const session: DbSession = { query: async (text, values, name) => (await client.query({ text, values: values as unknown[], name })).rows };
      await client.query('BEGIN');
      await client.query('SET LOCAL enable_nestloop = off');
      await client.query('SET LOCAL jit = off');
      expect(await segments.writeTurn(q, { ...popped, storeSaves: [], storeDeletes: [] }, session)).toBe(true);
      const rows = await segments.loadSegments(q, [{ priority: 0, segment: 7 }], session);
      expect(rows.get('0:7')?.map((e) => e.position)).toEqual(range(100));
      const [read] = await session.query<{ fetched: string }>(
        `SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) AS fetched FROM pg_stat_xact_user_tables WHERE relid = 'segment_items'::regclass`,
      );
      // The popped row, then the 100 rows of segment 7: never the other 4,900 rows of the queue.
      expect(Number(read.fetched)).toBeLessThanOrEqual(101);
    } finally {
      await client.query('ROLLBACK').catch(() => undefined);
      await client.end();
    }
  });
});
