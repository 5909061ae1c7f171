import { createHash } from 'node:crypto';
import { Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import pg from 'pg';
import { isConnectionFailure } from '../common/store-errors.js';
import { DatabaseProvider } from './database.provider.js';
import { CONNECTION_NAMES } from './database.options.js';

/** Reconnection backoff: the first retry after this long, doubling up to the ceiling (each with jitter). */
const RETRY_FIRST_MS = 100;
const RETRY_MAX_MS = 2_000;
/** Queue ids kept for sending while the connection is away; past it they are dropped (the others' re-check finds them). */
const MAX_UNSENT = 10_000;
/** Payloads sent in one statement at most. */
const MAX_BATCH = 1_000;
/** A state carried with a queue id is sent only up to this size (PostgreSQL's limit on a payload is 8,000 bytes). */
export const MAX_STATE_BYTES = 7_000;

/** The schema pushpop's tables resolve to on this connection (its search_path, as the pool's). */
const SCHEMA_OF_QUEUES = `SELECT n.nspname AS schema FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = 'queues'::regclass`;
const NOTIFY = `SELECT pg_notify($1, q) FROM unnest($2::text[]) AS q`;

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * The notification channel of a schema: `pushpop_items` in `public`, `pushpop_items.<schema>`
 * elsewhere (a digest of the schema when that would pass PostgreSQL's 63-byte limit on names).
 * Services and test runs sharing one database in different schemas never wake each other.
 */
export function itemsChannel(schema: string): string {
  if (schema === 'public') return 'pushpop_items';
  const channel = `pushpop_items.${schema}`;
  return Buffer.byteLength(channel) <= 63 ? channel : `pushpop_items.${createHash('md5').update(schema).digest('hex')}`;
}

/**
 * Items arriving on queues, between the pushpop processes sharing a database, through
 * PostgreSQL `LISTEN`/`NOTIFY` on the process's one connection outside the pool.
 *
 * **Sending.** After a turn committed a write that made its queue go from no items to some, the
 * turn runner {@link announce}s the queue id. The ids are sent as `NOTIFY` payloads on the
 * schema's channel by one statement for all those announced meanwhile (a statement in flight
 * batches the next ones): never from the push's own transaction. A `NOTIFY` takes a lock shared
 * by the whole PostgreSQL server and holds it until its transaction's commit is flushed to disk,
 * which serialises every notifying commit with its flush; measured here, pushes that notified
 * from their own transaction ran 5x slower. A transaction that only notifies writes nothing to
 * flush, so sent this way the lock is held for microseconds, and a push pays nothing for it.
 * Only the transition is announced: a long poll waits only on a queue it found empty.
 *
 * **State.** An announcement may carry the queue's state as committed (an opaque JSON object,
 * at most {@link MAX_STATE_BYTES}), sent as a payload of its own just before the queue id: a
 * receiver that waits on the queue can start its turn from it instead of reading the queue.
 * Queue ids never start with `{`, so a process that does not know states finds no poll waiting
 * on such a payload and still wakes on the id after it.
 *
 * **Receiving.** Every notification on the channel from another session calls the
 * {@link onItems} handlers with its queue id (the process's own are dropped: its turn woke its
 * own long polls already).
 *
 * The connection is opened once the database is ready and reopened whenever it is lost (a
 * database restart, a network cut), with a backoff from 100 ms up to 2 s between attempts. It
 * never throws and logs one warning when the connection is lost and one line when it is back,
 * whatever happens in between. Ids announced while it is away are sent once it is back;
 * notifications of others committed meanwhile are lost, so whoever depends on them re-checks
 * when the {@link onListening} handlers run.
 */
@Injectable()
export class ItemNotifications implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger('Notifications');
  private readonly itemHandlers: ((queueId: string) => void)[] = [];
  private readonly stateHandlers: ((state: string) => void)[] = [];
  private readonly listeningHandlers: (() => void)[] = [];
  private client?: pg.Client;
  private retryTimer?: NodeJS.Timeout;
  private stopped = false;
  private failures = 0;
  private lostAt?: number;
  private channel?: string;
  /** Queue ids announced and not sent yet, in announcement order, with the state to send before each (if any). */
  private unsent = new Map<string, string | undefined>();
  private sending = false;
  /** Whether the connection is open and listening now. */
  listening = false;
  /** Notifications received from other processes. */
  received = 0;
  /** Queue ids sent to other processes. */
  sent = 0;
  /** States sent with them. */
  statesSent = 0;

  constructor(private readonly db: DatabaseProvider) {}

  /** Calls `handler` with the queue id of every notification from another process. */
  onItems(handler: (queueId: string) => void): void {
    this.itemHandlers.push(handler);
  }

  /** Calls `handler` with the state of every notification from another process that carried one (before the handlers of its queue id run). */
  onState(handler: (state: string) => void): void {
    this.stateHandlers.push(handler);
  }

  /** Calls `handler` each time the connection starts listening (at start and after every reconnection). */
  onListening(handler: () => void): void {
    this.listeningHandlers.push(handler);
  }

  /**
   * Tells the other processes that items arrived on a queue that had none (after the write
   * committed), with the queue's state as committed when given (see the class doc; too large a
   * state is left out).
   */
  announce(queueId: string, state?: string): void {
    if (this.stopped) return;
    if (this.unsent.size >= MAX_UNSENT && !this.unsent.has(queueId)) return;
    // A later announcement replaces an earlier state: it is the newer one.
    this.unsent.delete(queueId);
    this.unsent.set(queueId, state !== undefined && Buffer.byteLength(state) <= MAX_STATE_BYTES ? state : undefined);
    this.send();
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

  /** Closes the connection for good (shutdown). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.listening = false;
    this.unsent.clear();
    clearTimeout(this.retryTimer);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  /** Sends what was announced, one statement at a time, each with everything announced meanwhile. */
  private send(): void {
    const client = this.client;
    if (this.sending || !this.listening || !client || this.unsent.size === 0) return;
    this.sending = true;
    const batch: [string, string | undefined][] = [];
    const payloads: string[] = [];
    for (const [id, state] of this.unsent) {
      if (payloads.length + (state === undefined ? 1 : 2) > MAX_BATCH) break;
      batch.push([id, state]);
      if (state !== undefined) payloads.push(state);
      payloads.push(id);
    }
    for (const [id] of batch) this.unsent.delete(id);
    client.query(NOTIFY, [this.channel, payloads]).then(
      () => {
        this.sent += batch.length;
        this.statesSent += payloads.length - batch.length;
        this.sending = false;
        this.send();
      },
      (error: unknown) => {
        this.sending = false;
        if (this.client === client && this.listening && !isConnectionFailure(error)) {
          // Not the connection: sending them again would fail again (the others' re-check finds them).
          this.logger.warn(`Could not notify other processes of ${batch.length} queue(s): ${message(error)}`);
        } else {
          // The connection went away: they go on the next one, without their states (by then
          // likely outdated; a receiver reads the queue instead).
          for (const [id] of batch) if (!this.unsent.has(id)) this.unsent.set(id, undefined);
        }
        this.send();
      },
    );
  }

  private connect(): void {
    if (this.stopped) return;
    const client = new pg.Client({ ...this.db.clientConfig(CONNECTION_NAMES.notifications), keepAliveInitialDelayMillis: 10_000 });
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
      if (n.channel !== this.channel || n.payload === undefined || n.processId === (client as pg.Client & { processID?: number }).processID) return;
      if (n.payload.startsWith('{')) {
        for (const handler of this.stateHandlers) handler(n.payload);
        return;
      }
      this.received += 1;
      for (const handler of this.itemHandlers) handler(n.payload);
    });
    void (async () => {
      try {
        await client.connect();
        const rows = (await client.query<{ schema: string }>(SCHEMA_OF_QUEUES)).rows;
        this.channel = itemsChannel(rows[0].schema);
        await client.query(`LISTEN ${client.escapeIdentifier(this.channel)}`);
      } catch (error) {
        onLost(error);
        return;
      }
      if (lost || this.stopped) return;
      this.listening = true;
      if (this.lostAt !== undefined)
        this.logger.log(`Listening for items from other processes again, ${((Date.now() - this.lostAt) / 1000).toFixed(1)} s after the connection was lost`);
      this.lostAt = undefined;
      this.failures = 0;
      for (const handler of this.listeningHandlers) handler();
      this.send();
    })();
  }

  private retry(error: unknown): void {
    if (this.lostAt === undefined) {
      this.lostAt = Date.now();
      this.logger.warn(
        `Not listening for items from other processes (${message(error)}); long polls fall back to re-checking the database until the connection is back; reconnecting`,
      );
    } else {
      this.logger.debug(`Reconnecting the notification connection failed: ${message(error)}`);
    }
    const ceiling = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** this.failures);
    this.failures += 1;
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.connect(), ceiling / 2 + Math.random() * (ceiling / 2));
    this.retryTimer.unref();
  }
}
