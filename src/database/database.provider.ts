import { Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { AppConfig } from '../config/app-config.js';
import { buildDataSourceOptions } from './database.options.js';
import { EmbeddedDatabase } from './embedded-database.js';

/** Any number; it only has to be the same for every pushpop process sharing a database. */
const MIGRATION_LOCK_ID = 7_011_905_114;

/**
 * Rule for every query of the service: a parameterised query runs inside a transaction. The
 * embedded database's socket server feeds all connections into one backend and keeps one
 * connection's protocol messages together only while that connection is in a transaction;
 * outside one, another connection's messages can land between the parse and the execute of
 * a parameterised query. Migrations at boot run before anything else uses the pool.
 *
 * Owns the connection pool: starts the embedded database when no DATABASE_URL is given, runs
 * the committed migrations under a PostgreSQL advisory lock (so several processes booting at
 * once migrate exactly once), and closes everything in the right order on shutdown.
 */
@Injectable()
export class DatabaseProvider implements OnApplicationShutdown {
  private static readonly logger = new Logger('Database');
  private embedded?: EmbeddedDatabase;
  dataSource!: DataSource;
  /** The connection string in use (the embedded database's loopback address when embedded). */
  url = '';

  constructor(private readonly config: AppConfig) {}

  async connect(): Promise<DataSource> {
    const env = this.config.env;
    let url = env.DATABASE_URL;
    if (!url) {
      this.embedded = await EmbeddedDatabase.start(env.DATA_DIR, env.DB_POOL_SIZE + 4);
      url = this.embedded.url;
    }
    this.url = url;
    this.dataSource = new DataSource(buildDataSourceOptions(url, env.DB_POOL_SIZE));
    try {
      await this.dataSource.initialize();
      await this.migrate();
    } catch (error) {
      await this.onApplicationShutdown();
      throw error;
    }
    return this.dataSource;
  }

  private async migrate(): Promise<void> {
    const runner = this.dataSource.createQueryRunner();
    await runner.connect();
    try {
      // Literal, not a parameter: a query without parameters is one protocol message (see above).
      await runner.query(`SELECT pg_advisory_lock(${MIGRATION_LOCK_ID})`);
      const applied = await this.dataSource.runMigrations({ transaction: 'all' });
      for (const m of applied) DatabaseProvider.logger.log(`Applied migration ${m.name}`);
    } finally {
      await runner.query(`SELECT pg_advisory_unlock(${MIGRATION_LOCK_ID})`).catch(() => undefined);
      await runner.release();
    }
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.dataSource?.isInitialized) await this.dataSource.destroy();
    if (this.embedded) {
      await this.embedded.stop();
      this.embedded = undefined;
    }
  }
}
