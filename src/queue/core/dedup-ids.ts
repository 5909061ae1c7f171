import type { CoreContext } from './turn-state.js';
import type { RowNeed } from './types.js';

/**
 * A queue's deduplication ids: a push whose id was accepted within the window is skipped. The
 * ids stay in their table; a turn reads those its pushes carry, once, and remembers the ones it
 * accepts in memory until it ends (an earlier operation of the turn, or an earlier item of the
 * same push, counts as well).
 */
export class DedupIds {
  constructor(
    private readonly ctx: CoreContext,
    private readonly hasRow: () => boolean,
  ) {}

  /**
   * What must be read so that every id given is checked this turn: the ids not checked yet, or
   * undefined when none is left. A queue with no row has nothing stored: its ids are all new.
   */
  need(ids: readonly string[]): RowNeed | undefined {
    if (ids.length === 0 || !this.hasRow()) return undefined;
    const live = this.ctx.turn.dedupLive;
    const unknown = [...new Set(ids.filter((id) => !live.has(id)))];
    return unknown.length > 0 ? { dedupIds: unknown } : undefined;
  }

  /** Hands over which of the ids asked for by {@link need} are live. */
  provide(ids: readonly string[], live: ReadonlySet<string>): void {
    const known = this.ctx.turn.dedupLive;
    for (const id of ids) if (!known.has(id)) known.set(id, live.has(id));
  }

  /** Accepts an id at `now` unless it is live (checked this turn, see {@link need}); false: a duplicate. */
  accept(dedupId: string, now: number, windowMs: number): boolean {
    const turn = this.ctx.turn;
    if (turn.dedupLive.get(dedupId) === true) return false;
    turn.dedupLive.set(dedupId, true);
    turn.writes.dedupInserts.push({ dedupId, expiresAt: now + windowMs });
    return true;
  }
}
