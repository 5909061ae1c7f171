import { Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import pg from 'pg';
import { DatabaseProvider } from './database.provider.js';

/** Reconnection backoff: the first retry after this long, doubling up to the ceiling (each with jitter). */
const RETRY_FIRST_MS = 100;
const RETRY_MAX_MS = 2_000;

const CHANNEL_OF_SCHEMA = `SELECT pushpop_items_channel(n.nspname) AS channel FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = 'queues'::regclass`;

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * Items arriving on queues, as other pushpop processes on the same database commit them: the
 * process's one connection outside the pool, `LISTEN`ing on the channel of its schema (see the
 * `ItemNotifications` migration: a write that makes a queue go from no items to some notifies
 * with the queue id). Notifications sent by this process's own pool connections are dropped:
 * the turn that wrote them has woken this process's waiters already.
 *
 * The connection is opened once the database is ready and reopened whenever it is lost (a
 * database restart, a network cut), with a backoff from 100 ms up to 2 s between attempts. It
 * never throws and logs one warning when the connection is lost and one line when it is back,
 * whatever happens in between. Notifications committed while it was away are lost; whoever
 * depends on them re-checks when {@link onListening}'s handlers run.
 */
@Injectable()
export class ItemNotifications implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('Notifications');
  private readonly itemHandlers: ((queueId: string) => void)[] = [];
  private readonly listeningHandlers: (() => void)[] = [];
  private client?: pg.Client;
  private retryTimer?: NodeJS.Timeout;
  private stopped = false;
  private failures = 0;
  private lostAt?: number;
  private channel?: string;
  /** Whether the connection is open and listening now. */
  listening = false;
  /** Notifications received from other processes. */
  received = 0;

  constructor(private readonly db: DatabaseProvider) {}

  /** Calls `handler` with the queue id of every notification from another process. */
  onItems(handler: (queueId: string) => void): void {
    this.itemHandlers.push(handler);
  }

  /** Calls `handler` each time the connection starts listening (at start and after every reconnection). */
  onListening(handler: () => void): void {
    this.listeningHandlers.push(handler);
  }

  onApplicationBootstrap(): void {
    this.start();
  }

  onModuleDestroy(): Promise<void> {
    return this.stop();
  }

  /** Opens the listening connection once the database is ready (and keeps it open until {@link stop}). */
  start(): void {
    this.stopped = false;
    this.db.ready.then(
      () => this.connect(),
      () => undefined,
    );
  }

  /** Closes the listening connection for good (shutdown). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.listening = false;
    clearTimeout(this.retryTimer);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private connect(): void {
    if (this.stopped) return;
    const client = new pg.Client({ ...this.db.clientConfig('pushpop-listener'), keepAliveInitialDelayMillis: 10_000 });
    this.client = client;
    let lost = false;
    const onLost = (error?: unknown): void => {
      if (lost) return;
      lost = true;
      this.listening = false;
      if (this.client === client) this.client = undefined;
      client.end().catch(() => undefined);
      if (!this.stopped) this.retry(error);
    };
    client.on('error', onLost);
    client.on('end', () => onLost(new Error('connection ended')));
    client.on('notification', (n) => {
      if (n.channel !== this.channel || n.payload === undefined || this.db.poolBackends.has(n.processId)) return;
      this.received += 1;
      for (const handler of this.itemHandlers) handler(n.payload);
    });
    void (async () => {
      try {
        await client.connect();
        const rows = (await client.query<{ channel: string }>(CHANNEL_OF_SCHEMA)).rows;
        this.channel = rows[0].channel;
        await client.query(`LISTEN ${client.escapeIdentifier(this.channel)}`);
      } catch (error) {
        onLost(error);
        return;
      }
      if (lost || this.stopped) return;
      this.listening = true;
      if (this.lostAt !== undefined) this.logger.log(`Listening for items from other processes again, ${((Date.now() - this.lostAt) / 1000).toFixed(1)} s after the connection was lost`);
      this.lostAt = undefined;
      this.failures = 0;
      for (const handler of this.listeningHandlers) handler();
    })();
  }

  private retry(error: unknown): void {
    if (this.lostAt === undefined) {
      this.lostAt = Date.now();
      this.logger.warn(`Not listening for items from other processes (${message(error)}); long polls fall back to re-checking the database until the connection is back; reconnecting`);
    } else {
      this.logger.debug(`Reconnecting the notification listener failed: ${message(error)}`);
    }
    const ceiling = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** this.failures);
    this.failures += 1;
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.connect(), ceiling / 2 + Math.random() * (ceiling / 2));
    this.retryTimer.unref();
  }
}
