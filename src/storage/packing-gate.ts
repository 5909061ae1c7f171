import { Injectable, Logger, OnApplicationShutdown } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { PREVIOUS_RELEASE_CONNECTIONS } from '../database/database.options.js';
import { DatabaseProvider } from '../database/database.provider.js';
import { UnitOfWork } from '../database/unit-of-work.js';

/** How often a process that found the previous release's processes connected looks again. */
export const PACKING_RECHECK_MS = 30_000;

/**
 * Whether this process may write packed segments (see `packed-segments.ts`): a process of the
 * previous release reads a segment's item rows only, so while one is connected to the database
 * (a rolling upgrade under way) a packed segment would hide its items from it. The gate is shut
 * until no connection named as the previous release names its own
 * (`PREVIOUS_RELEASE_CONNECTIONS`, in `pg_stat_activity`, any schema of the database) is left,
 * looked at when the database opens and every {@link PACKING_RECHECK_MS} after; once open it stays
 * open (going back to the previous release is a restore, docs/operations.md). `PACKED_SEGMENTS=false`
 * keeps it shut. Shut, segments are written as rows, as that release writes them; packed rows
 * are read and deleted either way.
 */
@Injectable()
export class PackingGate implements OnApplicationShutdown {
  private readonly logger = new Logger('PackingGate');
  private open = false;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  /** Whether a look found the previous release connected (said once, and said again when it opens). */
  private waited = false;

  constructor(
    config: AppConfig,
    db: DatabaseProvider,
    private readonly uow: UnitOfWork,
  ) {
    if (!config.env.PACKED_SEGMENTS) return;
    db.ready.then(
      () => this.look(),
      () => undefined,
    );
  }

  /** Whether segments brought back from the offload store are written packed now. */
  get packing(): boolean {
    return this.open;
  }

  /** Looks for connections of the previous release; opens the gate when there are none, else looks again later. */
  async look(): Promise<boolean> {
    if (this.open || this.stopped) return this.open;
    clearTimeout(this.timer);
    this.timer = undefined;
    try {
      const rows = await this.uow.autocommit.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = ANY($1)`,
        [PREVIOUS_RELEASE_CONNECTIONS],
      );
      if (rows[0].n === 0) {
        this.open = true;
        if (this.waited)
          this.logger.log('No connection of the previous release is left: segments brought back from the offload store are written packed from now on');
        return true;
      }
      if (!this.waited) {
        this.logger.log(
          `${rows[0].n} connection(s) of the previous release are open: segments brought back from the offload store are written as rows until they are gone (looking again every ${PACKING_RECHECK_MS / 1000} s)`,
        );
      }
      this.waited = true;
    } catch (error) {
      this.logger.warn(
        `Could not look for connections of the previous release (${error instanceof Error ? error.message : String(error)}); looking again later`,
      );
    }
    if (!this.stopped) this.timer = setTimeout(() => void this.look(), PACKING_RECHECK_MS).unref();
    return false;
  }

  onApplicationShutdown(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }
}
