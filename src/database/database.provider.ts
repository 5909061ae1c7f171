import { Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import type { ClientConfig } from 'pg';
import { DataSource } from 'typeorm';
import { AppConfig } from '../config/app-config.js';
import { buildDataSourceOptions, connectionSettings } from './database.options.js';
import { EmbeddedPostgres } from './embedded-postgres.js';

/** Any number; it only has to be the same for every pushpop process sharing a database. */
const MIGRATION_LOCK_ID = 7_011_905_114;

/**
 * Owns the connection pool: starts the embedded PostgreSQL when no DATABASE_URL is given, runs
 * the committed migrations under a PostgreSQL advisory lock (so several processes booting at
 * once migrate exactly once), and closes everything in the right order on shutdown: the pool
 * first, then the embedded server.
 *
 * Opening the database does not hold up the app: the HTTP server listens while the database
 * starts (or recovers), `GET /health` answers, `GET /health/ready` and every queue operation
 * answer 503 until {@link isReady}. `ready` rejects if the database cannot be opened at all;
 * the process then exits (see main.ts).
 */
@Injectable()
export class DatabaseProvider implements OnModuleInit, OnApplicationShutdown {
  private static readonly logger = new Logger('Database');
  readonly dataSource: DataSource;
  /** The connection string in use (the embedded server's socket when embedded). */
  readonly url: string;
  readonly embedded?: EmbeddedPostgres;
  private opening?: Promise<void>;
  private opened = false;
  private readonly schema?: string;

  constructor(config: AppConfig) {
    const env = config.env;
    this.schema = env.DATABASE_SCHEMA;
    this.embedded = env.DATABASE_URL ? undefined : EmbeddedPostgres.prepare(env.DATA_DIR, env.EMBEDDED_POSTGRES_ROOT);
    this.url = env.DATABASE_URL ?? this.embedded!.url;
    this.dataSource = new DataSource(buildDataSourceOptions(this.url, env.DB_POOL_SIZE, env.DATABASE_SCHEMA));
  }

  /** Settings of a connection of its own, outside the pool (the notification listener's), like the pool's. */
  clientConfig(applicationName: string): ClientConfig {
    return {
      connectionString: this.url,
      ...connectionSettings(this.schema),
      application_name: applicationName,
      keepAlive: true,
      connectionTimeoutMillis: 10_000,
    };
  }

  /** Whether the database answered and the schema is current. */
  get isReady(): boolean {
    return this.opened && this.dataSource.isInitialized;
  }

  /** Settles once the database is open; rejects if it cannot be opened. */
  get ready(): Promise<void> {
    this.opening ??= this.open();
    return this.opening;
  }

  onModuleInit(): void {
    // Started here, awaited by whoever needs it (main.ts, tests); failures are reported there.
    this.ready.catch(() => undefined);
  }

  private async open(): Promise<void> {
    try {
      await this.embedded?.start();
      await this.dataSource.initialize();
      await this.migrate();
      this.opened = true;
    } catch (error) {
      await this.close();
      throw error;
    }
  }

  private async migrate(): Promise<void> {
    const runner = this.dataSource.createQueryRunner();
    await runner.connect();
    try {
      await runner.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_ID]);
      if (this.schema) await runner.query(`CREATE SCHEMA IF NOT EXISTS "${this.schema}"`);
      const applied = await this.dataSource.runMigrations({ transaction: 'all' });
      for (const m of applied) DatabaseProvider.logger.log(`Applied migration ${m.name}`);
    } finally {
      await runner.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_ID]).catch(() => undefined);
      await runner.release();
    }
  }

  async onApplicationShutdown(): Promise<void> {
    // A start still under way finishes (or fails) first, so nothing is left running.
    await this.opening?.catch(() => undefined);
    await this.close();
  }

  private async close(): Promise<void> {
    this.opened = false;
    if (this.dataSource.isInitialized) await this.dataSource.destroy();
    await this.embedded?.stop();
  }
}
