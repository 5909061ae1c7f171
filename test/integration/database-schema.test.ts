import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { DataSource } from 'typeorm';
import { buildDataSourceOptions, MIGRATIONS } from '../../src/database/database.options.js';
import { DatabaseProvider } from '../../src/database/database.provider.js';
import { createFunctionStatement } from '../../src/database/functions/database-function.js';
import { WRITE_TURN_FULL } from '../../src/database/functions/write-turn.function.js';
import { parametersOf, WRITE_TURN_PARAMETERS } from '../../src/database/functions/write-turn.parameters.js';
import { writeTurnValues } from '../../src/database/functions/write-turn.values.js';
import type { StoredTurnWrite } from '../../src/database/stored-queue.js';
import { functionDrift } from '../support/function-drift.js';
import { storedWrite } from '../support/stored-writes.js';
import { databaseKind, removeDataDir, startService, type TestService } from '../support/service.js';

/** The schema the migrations make, against the declarations in the code: the database functions and the entities. */

/** The write that creates a queue at version 1 with its settings and nothing else, but `changes`. */
const newQueueWrite = (changes: Partial<StoredTurnWrite> & Pick<StoredTurnWrite, 'settings'>): StoredTurnWrite =>
  storedWrite({ expectedVersion: null, newVersion: 1, settingsChanged: true, delayed: null, ...changes });

describe(`database schema (${databaseKind})`, () => {
  let svc: TestService;
  let dataSource: DataSource;

  beforeAll(async () => {
    svc = await startService();
    dataSource = svc.app.get(DataSource);
  });
  afterAll(async () => {
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  /** Runs `fn` on a connection of its own, released after. */
  const withRunner = async <T>(fn: (runner: ReturnType<DataSource['createQueryRunner']>) => Promise<T>): Promise<T> => {
    const runner = dataSource.createQueryRunner();
    try {
      return await fn(runner);
    } finally {
      await runner.release();
    }
  };

  it('after migrating, every database function is exactly as declared, and there is no other overload', async () => {
    expect(await withRunner(functionDrift)).toEqual([]);
  });

  it('a database migrated by the previous release, then upgraded, ends with the declared functions as well', async () => {
    const schema = `t_previous_${randomBytes(4).toString('hex')}`;
    const previous = MIGRATIONS.findIndex((m) => m.name.startsWith('CanonicalFunctions'));
    const open = async (migrations: (typeof MIGRATIONS)[number][]): Promise<DataSource> =>
      new DataSource({ ...buildDataSourceOptions(svc.app.get(DatabaseProvider).url, 1, schema), migrations }).initialize();
    await dataSource.query(`CREATE SCHEMA ${schema}`);
    try {
      for (const migrations of [MIGRATIONS.slice(0, previous), MIGRATIONS]) {
        const db = await open(migrations);
        try {
          await db.runMigrations({ transaction: 'all' });
          const runner = db.createQueryRunner();
          try {
            const drift = await functionDrift(runner);
            if (migrations === MIGRATIONS) expect(drift).toEqual([]);
            else expect(drift.length, 'the previous release left other functions').toBeGreaterThan(0);
          } finally {
            await runner.release();
          }
        } finally {
          await db.destroy();
        }
      }
    } finally {
      await dataSource.query(`DROP SCHEMA ${schema} CASCADE`);
    }
  });

  // Nothing is left out: every table, column, key, index and check the migrations make can be
  // said in TypeORM's entity metadata. The builder does not compare the conditions of partial
  // indexes, though: the next test does.
  it('the entities describe the schema the migrations make: TypeORM finds nothing to change', async () => {
    const { upQueries } = await dataSource.driver.createSchemaBuilder().log();
    expect(upQueries.map((q) => q.query)).toEqual([]);
  });

  it('each partial index has the condition its entity gives', async () => {
    const partial = dataSource.entityMetadatas.flatMap((m) => m.indices.filter((i) => i.where).map((index) => ({ table: m.tableName, index })));
    expect(partial.map((p) => p.index.name).sort()).toEqual([
      'IDX_queue_locks_due',
      'IDX_queues_next_due',
      'IDX_queues_next_lock_expiry',
      'IDX_queues_paused',
      'IDX_queues_ready',
      'IDX_schedules_next_run',
      'IDX_shared_locks_expired',
      'IDX_shared_locks_live',
    ]);
    const condition = `SELECT pg_get_expr(i.indpred, i.indrelid) AS condition FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                        WHERE c.relname = $1 AND c.relnamespace = current_schema()::regnamespace`;
    await withRunner(async (runner) => {
      for (const { table, index } of partial) {
        const [migrated] = (await runner.query(condition, [index.name])) as { condition: string }[];
        // What PostgreSQL makes of the entity's condition: the same index made again, and rolled back.
        await runner.startTransaction();
        try {
          await runner.query(`CREATE INDEX "declared" ON "${table}" (${index.columns.map((c) => `"${c.databaseName}"`).join(', ')}) WHERE ${index.where}`);
          const [declared] = (await runner.query(condition, ['declared'])) as { condition: string }[];
          expect(migrated?.condition, index.name).toBe(declared.condition);
        } finally {
          await runner.rollbackTransaction();
        }
      }
    });
  });

  it('a function changed by hand, or an overload nobody declared, is found', async () => {
    const drift = await withRunner(async (runner) => {
      await runner.startTransaction();
      try {
        await runner.query(
          createFunctionStatement({ ...WRITE_TURN_FULL, body: WRITE_TURN_FULL.body.replace('RETURN true;\nEND', 'RETURN true; -- changed\nEND') }),
        );
        await runner.query(`CREATE FUNCTION pushpop_write_turn(p_queue_id varchar) RETURNS boolean LANGUAGE sql AS $$ SELECT false $$`);
        return await functionDrift(runner);
      } finally {
        await runner.rollbackTransaction();
      }
    });
    expect(drift).toHaveLength(2);
    expect(drift[0]).toMatch(/^differs: pushpop_write_turn\(p_queue_id character varying, .*-- changed/);
    expect(drift[1]).toBe('not declared: pushpop_write_turn(p_queue_id character varying)');
  });

  it('upgrading drops the forms of the write older than the previous release (27 and 66 parameters), and keeps the others', async () => {
    const schema = `t_old_forms_${randomBytes(4).toString('hex')}`;
    const dropping = MIGRATIONS.findIndex((m) => m.name.startsWith('DropOldWriteTurnForms'));
    const open = async (migrations: (typeof MIGRATIONS)[number][]): Promise<DataSource> =>
      new DataSource({ ...buildDataSourceOptions(svc.app.get(DatabaseProvider).url, 1, schema), migrations }).initialize();
    const arities = async (db: DataSource): Promise<number[]> =>
      (
        await db.query<{ n: number }[]>(
          `SELECT pronargs AS n FROM pg_proc WHERE proname = 'pushpop_write_turn' AND pronamespace = to_regnamespace($1) ORDER BY pronargs`,
          [schema],
        )
      ).map((r) => r.n);
    await dataSource.query(`CREATE SCHEMA ${schema}`);
    try {
      // The schema the previous release leaves, with the old forms an earlier release created (stand-ins of their signatures).
      const before = await open(MIGRATIONS.slice(0, dropping));
      try {
        await before.runMigrations({ transaction: 'all' });
        for (const n of [27, 66]) {
          const signature = WRITE_TURN_PARAMETERS.slice(0, n).map((p) => `${p.name} ${p.type}`);
          await before.query(`CREATE FUNCTION ${schema}.pushpop_write_turn(${signature.join(', ')}) RETURNS boolean LANGUAGE sql AS $$ SELECT false $$`);
        }
        expect(await arities(before)).toEqual([27, 38, 66, 85, 92]);
      } finally {
        await before.destroy();
      }
      const after = await open(MIGRATIONS);
      try {
        await after.runMigrations({ transaction: 'all' });
        expect(await arities(after)).toEqual([38, 85, 92]);
        const runner = after.createQueryRunner();
        try {
          expect(await functionDrift(runner)).toEqual([]);
        } finally {
          await runner.release();
        }
      } finally {
        await after.destroy();
      }
    } finally {
      await dataSource.query(`DROP SCHEMA ${schema} CASCADE`);
    }
  });

  it('a process of the third release still writes through its full form: its items have no headers', async () => {
    const queueId = `t-third-full-${randomBytes(4).toString('hex')}`;
    const write = newQueueWrite({
      settings: { segmentSize: 5, bufferSegments: 1 },
      itemCount: 1,
      priorities: {
        '0': { count: 1, head_segment: 0, tail_segment: 0, head_offloaded_segment: null, tail_offloaded_segment: null, next_position: 1, head_position: 0 },
      },
      inserts: [{ priority: 0, segment: 0, position: 0, json: '{"n":1}', from: 'elsewhere' }],
    });
    const third = parametersOf('third').length;
    const values = writeTurnValues(queueId, write);
    expect(values).toHaveLength(WRITE_TURN_FULL.parameters.length);
    expect(third).toBeLessThan(WRITE_TURN_FULL.parameters.length);
    const placeholders = values
      .slice(0, third)
      .map((_, i) => `$${i + 1}`)
      .join(', ');
    try {
      const [{ applied }] = await dataSource.query<{ applied: boolean }[]>(`SELECT pushpop_write_turn(${placeholders}) AS applied`, values.slice(0, third));
      expect(applied).toBe(true);
      const rows = await dataSource.query<Record<string, unknown>[]>(`SELECT item, dead_lettered_from, headers FROM segment_items WHERE queue_id = $1`, [
        queueId,
      ]);
      expect(rows).toEqual([{ item: '{"n":1}', dead_lettered_from: 'elsewhere', headers: null }]);
    } finally {
      await dataSource.query(`DELETE FROM segment_items WHERE queue_id = $1`, [queueId]);
      await dataSource.query(`DELETE FROM queues WHERE queue_id = $1`, [queueId]);
    }
  });
});
