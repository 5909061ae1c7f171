// The machine's PostgreSQL: its postmaster (whose process tree is measured), the benchmark's own
// databases on it, and a pushpop target's database (its transactions, from pg_stat_database).

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { CONFIG, dbUrl } from '../common/config.mjs';
import { readStat } from './proc.mjs';

/** The postmaster of the machine's PostgreSQL: the parent of our own backend. */
export async function findMachinePostmaster() {
  const client = new pg.Client({ connectionString: dbUrl('postgres'), connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    const { rows } = await client.query('SELECT pg_backend_pid() AS pid, current_setting($1) AS version', ['server_version']);
    const backend = readStat(rows[0].pid);
    const pm = backend ? readStat(backend.ppid) : null;
    return { version: rows[0].version, postmaster: pm && pm.comm === 'postgres' ? { pid: pm.pid, starttime: pm.starttime } : null };
  } finally {
    await client.end();
  }
}

export async function adminQuery(sql) {
  const client = new pg.Client({ connectionString: dbUrl('postgres'), connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    return await client.query(sql);
  } finally {
    await client.end();
  }
}

export async function recreateDatabase(name) {
  // only the benchmark's own names, with this run's prefix
  if (!new RegExp(`^${CONFIG.dbPrefix}(bench_\\w+|pushpop_bench|pgboss_bench)$`).test(name)) throw new Error(`refusing to recreate database ${name}`);
  await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await adminQuery(`CREATE DATABASE ${name}`);
}

/** The connection string of a pushpop target's database (the embedded server's socket and password, or pushpop_bench). */
export function pushpopDatabaseUrl(target) {
  if (target.db) return dbUrl(target.db);
  const pgdata = join(target.dataDir, 'postgres');
  // postmaster.pid line 5: the unix socket's directory
  const socketDir = readFileSync(join(pgdata, 'postmaster.pid'), 'utf8').split('\n')[4].trim();
  const password = readFileSync(join(target.dataDir, 'postgres.password'), 'utf8').trim();
  return `postgresql://pushpop:${encodeURIComponent(password)}@localhost:5432/postgres?host=${encodeURIComponent(socketDir)}`;
}

/** Transactions committed or rolled back in the target's database so far (pg_stat_database). */
export async function transactionsOf(client) {
  const { rows } = await client.query('SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = current_database()');
  return Number(rows[0].n);
}
