import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { Logger } from '@nestjs/common';
import { PGlite } from '@electric-sql/pglite';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';

/**
 * The zero-config database: PGlite (PostgreSQL compiled to WebAssembly) persisted under a data
 * directory and served on a loopback port by pglite-socket, so the service reaches it through
 * the ordinary `pg` driver and runs exactly the SQL and migrations it runs on a real server.
 *
 * PGlite has a single backend: the socket server runs one transaction at a time and holds
 * every other connection's statements until that transaction ends.
 */
export class EmbeddedDatabase {
  private static readonly logger = new Logger('EmbeddedDatabase');

  private constructor(
    private readonly db: PGlite,
    private readonly server: PGLiteSocketServer,
    readonly url: string,
  ) {}

  /** Opens (or creates) the database under `dataDir` and listens on 127.0.0.1 on a free port. */
  static async start(dataDir: string, maxConnections: number): Promise<EmbeddedDatabase> {
    const dir = resolve(dataDir, 'pglite');
    mkdirSync(dir, { recursive: true });
    const db = await PGlite.create(dir);
    const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port: 0, maxConnections });
    await server.start();
    const url = `postgres://postgres@${server.getServerConn()}/postgres`;
    EmbeddedDatabase.logger.log(`Embedded PostgreSQL (PGlite) at ${dir}, serving ${server.getServerConn()}`);
    return new EmbeddedDatabase(db, server, url);
  }

  async stop(): Promise<void> {
    await this.server.stop();
    await this.db.close();
  }
}
