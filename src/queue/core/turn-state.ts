import type { DueFetch, LockProblem, LockState, QueueSettings, ReturnedEntry, SegmentEntry, SegmentFetch } from './types.js';
import { WriteSet } from './write-set.js';

/** Given-back items of one priority held in memory this turn: a prefix (in push order) of those stored, or all of them. */
export interface ReturnedCache {
  entries: ReturnedEntry[];
  offset: number;
  complete: boolean;
}

/**
 * What a core knows for the length of one turn only: the row changes it makes and what it read
 * for them. Made afresh in every turn, on first use, and dropped at its end (see
 * `QueueCore.committed`), so nothing read in one turn is trusted in the next: another process
 * may have changed those rows since.
 *
 * The maps that few turns use are made on first use: a turn is the unit of work of every
 * request, and empty maps made for nothing were a measurable share of the garbage a push or a
 * pop leaves.
 */
export class TurnState {
  readonly writes = new WriteSet();

  // segments and offloading
  /** Offloaded segments that could not be read this turn: nothing is taken past them. */
  readonly unavailable = new Set<string>();
  private peekedOf?: Map<string, SegmentFetch>;
  /** Segments fetched only to be shown this turn (never adopted). */
  get peeked(): Map<string, SegmentFetch> {
    return (this.peekedOf ??= new Map());
  }
  private rowsOfOffloadedOf?: Map<string, readonly SegmentEntry[]>;
  /** The table's rows of offloaded segments being loaded back (items returned into an offloaded head). */
  get rowsOfOffloaded(): Map<string, readonly SegmentEntry[]> {
    return (this.rowsOfOffloadedOf ??= new Map());
  }
  /** Priorities pushed to this turn (offloading runs for them). */
  readonly pushed = new Set<number>();
  /** Priorities whose head was worked on this turn (loading back runs for them). */
  readonly headTouched = new Set<number>();

  // delayed items
  /** The due items read for this turn, until `DelayedItems.moveDue` takes them. */
  dueFetch: DueFetch | undefined = undefined;
  /** Due items were moved this turn: the table still holds them until the write, so no second read. */
  movedDue = false;

  // deduplication ids
  private dedupLiveOf?: Map<string, boolean>;
  /** Ids checked this turn: true when live (accepted within the window, by an earlier turn or this one). */
  get dedupLive(): Map<string, boolean> {
    return (this.dedupLiveOf ??= new Map());
  }

  // shared locks and given-back items
  private lockRowsOf?: Map<string, LockState | null>;
  /** Shared locks read this turn (null: no such lock). */
  get lockRows(): Map<string, LockState | null> {
    return (this.lockRowsOf ??= new Map());
  }
  /** Due shared locks read for this turn, until `SharedLocks.expireDue` takes them. */
  dueLocks: { readonly locks: readonly LockState[]; readonly nextExpiry: number | null } | undefined = undefined;
  /** The due shared locks were given back this turn. */
  expiredDue = false;
  /** The exact earliest expiry of a live shared lock was read this turn. */
  nextExpiryExact = false;
  private returnedCacheOf?: Map<number, ReturnedCache>;
  /** Given-back items read this turn, per priority. */
  get returnedCache(): Map<number, ReturnedCache> {
    return (this.returnedCacheOf ??= new Map());
  }
  private returnedAskedOf?: Map<number, number>;
  /** How many given-back rows were last asked for, per priority. */
  get returnedAsked(): Map<number, number> {
    return (this.returnedAskedOf ??= new Map());
  }

  private acknowledgedForOf?: WeakMap<readonly string[], readonly (number | LockProblem)[]>;
  /** Acknowledgements made this turn by an operation that pops after them, by its lock ids (see `AcknowledgeThenPop`). */
  get acknowledgedFor(): WeakMap<readonly string[], readonly (number | LockProblem)[]> {
    return (this.acknowledgedForOf ??= new WeakMap());
  }

  /** The queue row's metadata changes with this turn. */
  touch(): void {
    this.writes.metadataChanged = true;
  }
}

/** What the parts of a core share: the queue's settings, the turn under way, and whether the queue has a row. */
export interface CoreContext {
  readonly settings: QueueSettings;
  readonly turn: TurnState;
  /** The queue has a row once this turn is written (something was put in it). */
  markPresent(): void;
}

/** `priority:segment`, the key of a segment in the maps of a turn and of the segment cache. */
export const segKey = (priority: number, segment: number): string => `${priority}:${segment}`;
