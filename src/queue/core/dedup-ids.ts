import type { CoreContext } from './turn-state.js';
import { MissingDedupIds } from './types.js';

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
   * Makes sure every id given was checked this turn: throws {@link MissingDedupIds} for those
   * not checked. A queue with no row has nothing stored: its ids are all new.
   */
  check(ids: readonly string[]): void {
    if (ids.length === 0 || !this.hasRow()) return;
    const live = this.ctx.turn.dedupLive;
    const unknown = [...new Set(ids.filter((id) => !live.has(id)))];
    if (unknown.length > 0) throw new MissingDedupIds(unknown);
  }

  /** Hands over which of the ids asked for by {@link MissingDedupIds} are live. */
  provide(ids: readonly string[], live: ReadonlySet<string>): void {
    const known = this.ctx.turn.dedupLive;
    for (const id of ids) if (!known.has(id)) known.set(id, live.has(id));
  }

  /** Accepts an id at `now` unless it is live (checked this turn, see {@link check}); false: a duplicate. */
  accept(dedupId: string, now: number, windowMs: number): boolean {
    const turn = this.ctx.turn;
    if (turn.dedupLive.get(dedupId) === true) return false;
    turn.dedupLive.set(dedupId, true);
    turn.writes.dedupInserts.push({ dedupId, expiresAt: now + windowMs });
    return true;
  }
}
