/**
 * An in-memory model of one pushpop queue, with the contract's semantics and none of its
 * storage: property tests run the same commands against the service and against this model
 * and compare what they see.
 *
 * Semantics (CONTRACT.md, "Queue endpoints", "acknowledge", "Lock expiry", "extend-lock",
 * "release"):
 * - priority 0 is popped first; FIFO within a priority; a pop's `depth` spills over into the
 *   next priority; an empty pop returns `[]`;
 * - a queue exists once something is pushed to it (a pop never creates it) and until it is
 *   deleted;
 * - a pop with `require_ack` takes items as a pop does and holds them, with their priorities,
 *   under a lock (one per queue); an empty queue gives no lock; while a lock is unexpired every
 *   pop answers 423 QUEUE_LOCKED;
 * - acknowledge, extend-lock and release check, in this order: lock id given (400
 *   LOCK_ID_REQUIRED), a lock exists (404 LOCK_NOT_FOUND), not expired (410 LOCK_EXPIRED), id
 *   matches (400 INVALID_LOCK_ID); acknowledge drops the items for good, release returns them,
 *   extend sets the expiry to now + ttl;
 * - a lock expires once the clock reaches its expiry (`now >= expiresAt`); its items go back
 *   to the front of their original priorities in their original order. The model applies this
 *   lazily, at the start of the next operation on the queue (as the service does at the start
 *   of every turn; since every operation applies it first, when it is applied is not
 *   observable). The expired lock stays as a marker (its id answers 410) until a new lock
 *   replaces it; after acknowledge or release (or deletion of the queue) there is no lock (404).
 *   In shared mode an exclusive lock that expired before the switch still answers 410;
 * - `count` (inspection, listing) leaves locked items out; a delete counts them.
 *
 * Delayed items and deduplication (CONTRACT.md, Additions):
 * - an entry with `delaySeconds` > 0 is invisible (not popped, not in `count`, shown as
 *   `delayed`) until the clock reaches its due time; then it joins the tail of its priority,
 *   due items in due-time order, ties in push order. The model applies this lazily, at the
 *   start of the next operation (as the service does at the start of every turn; the
 *   service's sweep is stopped in the property test, and would make the same change anyway);
 * - an entry whose `dedupId` was accepted on the queue less than the window ago is skipped (a
 *   duplicate), also when an earlier entry of the same batch accepted it; an accepted id is
 *   remembered for the window from its push; deleting the queue forgets delayed items and ids.
 *
 * Queue settings, shared locks and dead letters (CONTRACT.md, Additions, "Queue settings",
 * "Shared lock mode", "Deliveries and dead letters"):
 * - `settings` (PUT) creates the queue if need be; changing `lock_mode` while a lock lives (an
 *   unexpired exclusive lock, or any live shared lock) is 409 QUEUE_LOCKED; deleting the queue
 *   forgets its settings (the next push creates it with the defaults);
 * - in shared mode a pop with `require_ack` makes a lock of its own, and no pop answers 423;
 *   each lock is found by its id (no INVALID_LOCK_ID); an expired one answers 410 (the sweep
 *   that forgets expired locks after an hour is stopped in the property test, so the model
 *   never forgets one); given-back items (expiry, release) go back to exactly their place in
 *   push order within their priority, ahead of every item not yet delivered;
 * - every pop with ack adds one to its items' delivery counts (both modes); an item given back
 *   with deliveries >= `max_deliveries` goes to the tail of the dead-letter queue at its
 *   priority instead (modelled by a second {@link QueueModel}, {@link QueueModel.deadLetters}),
 *   in the order the locks are given back (expiries earliest first; the model leaves locks
 *   expiring at the same millisecond out, see {@link QueueModel.expiryTaken}), items in lock order.
 *
 * Time is the model's own simulated clock ({@link QueueModel.now}, epoch ms); the runner makes
 * the service's `Clock` return the same value, so lock expiries are predicted to the
 * millisecond. Lock ids are symbolic (`#1`, `#2`, ... in order of creation); the runner maps
 * them to the ids the service issued.
 *
 * Commands are plain objects of the {@link QueueCommand} union, applied by {@link applyCommand}.
 */

/** An item as pushed: any JSON object. */
export type Item = Record<string, unknown>;

export interface PushEntry {
  item: Item;
  /** Omitted means the default, 0. */
  priority?: number;
  /** Omitted or 0: visible at once. */
  delay_seconds?: number;
  dedup_id?: string;
}

/**
 * Which `lock_id` a lock command sends: the id of the newest lock made on this queue (by this
 * run), of the one before it, a well-formed id no lock has, or no usable id at all (the field
 * left out, an empty string, a number, null). Without such a lock `latest`/`previous` send
 * the bogus id.
 */
export type LockIdChoice = 'latest' | 'previous' | 'bogus' | 'omitted' | 'empty' | 'number' | 'null' | 'live';

/**
 * Settings a `settings` command PUTs (absent fields are left out of the body). The dead-letter
 * queue is always the run's own one ({@link QueueModel.deadLetters}), named by the runner.
 */
export interface SettingsChoice {
  lockMode?: 'exclusive' | 'shared';
  /** With the dead-letter queue; null: no limit (and no dead-letter queue). */
  maxDeliveries?: number | null;
  /** Pause or resume: while paused, pops hand out nothing and say so. */
  paused?: boolean;
  /** The retry delay of items given back (`seconds` never above `max`). */
  retry?: { seconds: number; backoff: 'fixed' | 'exponential'; max: number };
}

export type QueueCommand =
  | { kind: 'push'; entry: PushEntry }
  | { kind: 'pushBatch'; entries: PushEntry[] }
  | { kind: 'pop'; depth: number }
  | { kind: 'inspect' }
  | { kind: 'delete' }
  /** Drops the queue's actor from memory, as the idle sweep does; nothing observable may change. */
  | { kind: 'deactivate' }
  /** `POST /pop?require_ack=true&depth=..&ttl_seconds=..`. */
  | { kind: 'popAck'; depth: number; ttlSeconds: number }
  /** `pick` chooses among the live shared locks for `lockId: 'live'` (modulo their number). */
  | { kind: 'acknowledge'; lockId: LockIdChoice; pick?: number }
  /** `ttlSeconds` omitted means the default, 30. */
  | { kind: 'extendLock'; lockId: LockIdChoice; ttlSeconds?: number; pick?: number }
  | { kind: 'release'; lockId: LockIdChoice; pick?: number }
  /** `PUT /queue/{id}/settings`. */
  | { kind: 'settings'; settings: SettingsChoice }
  /** A plain pop of the dead-letter queue. */
  | { kind: 'popDeadLetters'; depth: number }
  /** `POST /queue/{dead-letter queue}/redrive` without a destination: dead letters back to this queue's tails. */
  | { kind: 'redriveDeadLetters'; maxItems: number }
  /** Moves the simulated clock forward (no request). */
  | { kind: 'advance'; ms: number }
  /** Moves the simulated clock to the current lock's expiry + `deltaMs` (no-op without an unexpired lock, or if that is in the past). */
  | { kind: 'advanceToExpiry'; deltaMs: number };

export type LockErrorCode = 'LOCK_ID_REQUIRED' | 'LOCK_NOT_FOUND' | 'LOCK_EXPIRED' | 'INVALID_LOCK_ID';

/** The lock as inspection shows it (times in epoch ms). */
export interface LockInfo {
  expiresAt: number;
  createdAt: number;
  itemCount: number;
}

/** What the model predicts for a command; the runner compares the service's answer with it. */
export type ModelOutcome =
  /** `duplicate` is undefined for a push without a dedup id (the answer then has no such field). */
  | { kind: 'push'; priority: number; delaySeconds: number; duplicate: boolean | undefined }
  | { kind: 'pushBatch'; count: number; duplicates: number }
  /** `paused`: the queue is paused, nothing was handed out (the answer says `paused: true`). */
  | { kind: 'pop'; items: Item[]; paused?: true }
  /** 423 QUEUE_LOCKED (a pop with or without ack while an unexpired lock exists). */
  | { kind: 'queueLocked'; expiresAt: number }
  /** A pop with ack that found items: `lockId` is the model's symbolic id of the new lock; `deliveryCounts` parallel to `items`. */
  | { kind: 'popAckLocked'; items: Item[]; deliveryCounts: number[]; lockId: string; expiresAt: number }
  /** A pop with ack on an empty (or missing) queue: `{items: [], count: 0, locked: false}`. */
  | { kind: 'popAckEmpty'; paused?: true }
  | { kind: 'lockError'; code: LockErrorCode }
  | { kind: 'acknowledged'; count: number }
  | { kind: 'extended'; lockId: string; expiresAt: number }
  /** `deadLettered` > 0 only when some items went to the dead-letter queue (the answer then has `items_dead_lettered`). */
  | { kind: 'released'; count: number; deadLettered: number; delayed: number }
  | { kind: 'settings'; settings: ModelSettings }
  | { kind: 'settingsLocked' }
  | {
      kind: 'inspect';
      exists: boolean;
      count: number;
      counts: Record<string, number>;
      /** Exclusive mode: the unexpired lock or null; shared mode: undefined (see `locks`). */
      lock: LockInfo | null | undefined;
      /** Shared mode: the live locks; exclusive mode: undefined. */
      locks: SharedLocksInfo | undefined;
      delayed: number;
      settings: ModelSettings;
    }
  | { kind: 'delete'; exists: boolean; itemsDeleted: number }
  /** A redrive of the dead-letter queue: 404 when it does not exist, else how many items moved and how many are left. */
  | { kind: 'redriven'; exists: boolean; moved: number; left: number }
  | { kind: 'deactivate' }
  | { kind: 'advance'; now: number };

/** The shared locks as inspection shows them (time in epoch ms). */
export interface SharedLocksInfo {
  count: number;
  itemCount: number;
  nextExpiresAt: number | null;
}

/** A queue's settings as the model keeps them (the segment layout is the runner's). */
export interface ModelSettings {
  lockMode: 'exclusive' | 'shared';
  maxDeliveries: number | null;
  /** Whether the dead-letter queue is set (always the run's own one). */
  deadLetters: boolean;
  /** Pops hand out nothing; everything else goes on. */
  paused: boolean;
  retryDelaySeconds: number;
  retryBackoff: 'fixed' | 'exponential';
  retryDelayMaxSeconds: number;
}

const DEFAULT_SETTINGS: ModelSettings = {
  lockMode: 'exclusive',
  maxDeliveries: null,
  deadLetters: false,
  paused: false,
  retryDelaySeconds: 0,
  retryBackoff: 'exponential',
  retryDelayMaxSeconds: 900,
};

/** The contract's retry delay (ms) of an item given back after `deliveries` deliveries. */
function retryDelayMs(settings: ModelSettings, deliveries: number): number {
  const { retryDelaySeconds: base, retryBackoff, retryDelayMaxSeconds: max } = settings;
  if (base === 0) return 0;
  return (retryBackoff === 'fixed' ? base : Math.min(max, base * 2 ** Math.max(0, deliveries - 1))) * 1000;
}

/** The model's symbolic id for "a well-formed id no lock has". */
export const BOGUS_LOCK_ID = '#bogus';

/**
 * An item waiting or held. `key` is its place in push order within its priority (set when it
 * joins the tail: pushed, due, dead-lettered); given-back items keep it.
 */
interface HeldItem {
  item: Item;
  priority: number;
  key: number;
  /** Times handed out under a lock. */
  deliveries: number;
  /**
   * Given back by a shared lock (or by an exclusive one while such items of its priority
   * waited): the service keeps it apart from the segments until it is popped again. Such items
   * are always a prefix of their priority (they were popped from its front).
   */
  apart?: boolean;
}

type Entry = Omit<HeldItem, 'priority'>;

interface ModelLock {
  /** Symbolic id. */
  id: string;
  state: 'active' | 'expired';
  /** Held items in pop order, with their original priorities (empty once expired). */
  items: HeldItem[];
  createdAt: number;
  expiresAt: number;
}

export class QueueModel {
  /** Items waiting per priority, front first (in shared mode also in `key` order). A priority with no items has no entry. */
  private readonly byPriority = new Map<number, Entry[]>();
  private created = false;
  /** Exclusive mode: the lock (or the expired marker). */
  private lock: ModelLock | null = null;
  /** Shared mode: every lock by symbolic id, live and expired (the model never forgets one, see the file's doc). */
  private readonly sharedLocks = new Map<string, ModelLock>();
  /** Symbolic ids of every lock made, oldest first (kept across deletes: an old id is just unknown then). */
  private readonly issued: string[] = [];
  /** Per priority, the most items one return (expiry or release) put back, since the queue was created. */
  private readonly largestReturn = new Map<number, number>();
  /** Where the next item joining a tail goes in push order. */
  private nextKey = 0;

  /**
   * Delayed items not yet moved, with their due time and push order; `retry`: an item given
   * back and waiting out its retry delay, with its place in push order and its deliveries.
   */
  private delayedItems: { dueAt: number; seq: number; item: Item; priority: number; retry?: { key: number; deliveries: number } }[] = [];
  private delayedSeq = 0;
  /** Dedup ids accepted, with the end of their window (epoch ms). */
  private readonly accepted = new Map<string, number>();

  private currentSettings: ModelSettings = DEFAULT_SETTINGS;
  private deadLetterQueue: QueueModel | undefined;

  private clock: number;

  /**
   * @param start the simulated clock's start (epoch ms).
   * @param dedupWindowMs the service's DEDUP_WINDOW_SECONDS, in ms.
   */
  constructor(
    start = 0,
    private readonly dedupWindowMs = 300_000,
  ) {
    this.clock = start;
  }

  /** The simulated clock (epoch ms). */
  get now(): number {
    return this.clock;
  }

  /** Whether the queue exists (something was pushed since it was last deleted). */
  get exists(): boolean {
    return this.created;
  }

  get settings(): ModelSettings {
    return this.currentSettings;
  }

  /** The dead-letter queue (an ordinary queue: only pushes at its tails and plain pops reach it here). */
  get deadLetters(): QueueModel {
    this.deadLetterQueue ??= new QueueModel(this.clock, this.dedupWindowMs);
    return this.deadLetterQueue;
  }

  private get shared(): boolean {
    return this.currentSettings.lockMode === 'shared';
  }

  advance(ms: number): void {
    if (ms < 0) throw new Error('the clock only moves forward');
    this.clock += ms;
  }

  /**
   * Applies what is due: delayed items join their priorities' tails (due order, ties in push
   * order), and expired locks' items go back (earliest expiry first). Every queue operation calls this first.
   */
  settle(): void {
    const due = this.delayedItems.filter((d) => d.dueAt <= this.clock).sort((a, b) => a.dueAt - b.dueAt || a.seq - b.seq);
    this.delayedItems = this.delayedItems.filter((d) => d.dueAt > this.clock);
    for (const d of due) if (!d.retry) this.append(d.item, d.priority);
    // Given back after a retry delay: to their place in push order among the items given back
    // (the service keeps the priority's entry while they wait, so they always go apart).
    for (const d of due) {
      if (!d.retry) continue;
      const list = this.byPriority.get(d.priority) ?? [];
      const at = list.findIndex((e) => !e.apart || e.key > d.retry!.key);
      list.splice(at < 0 ? list.length : at, 0, { item: d.item, key: d.retry.key, deliveries: d.retry.deliveries, apart: true });
      this.byPriority.set(d.priority, list);
    }
    const expired = [...this.sharedLocks.values()].filter((l) => l.state === 'active' && l.expiresAt <= this.clock).sort((a, b) => a.expiresAt - b.expiresAt);
    for (const lock of expired) {
      this.giveBack(lock.items);
      this.sharedLocks.set(lock.id, { ...lock, state: 'expired', items: [] });
    }
    if (this.lock?.state !== 'active' || this.lock.expiresAt > this.clock) return;
    this.giveBack(this.lock.items);
    this.lock = { ...this.lock, state: 'expired', items: [] };
  }

  /** The unexpired exclusive lock, if any (call {@link settle} first). */
  private activeLock(): ModelLock | undefined {
    return this.lock?.state === 'active' ? this.lock : undefined;
  }

  /** Live shared locks, oldest first (call {@link settle} first). */
  private liveLocks(): ModelLock[] {
    return [...this.sharedLocks.values()].filter((l) => l.state === 'active');
  }

  /** Expiry (ms) of the unexpired exclusive lock, if any, as of now. */
  lockExpiry(): number | undefined {
    const lock = this.activeLock();
    return lock && lock.expiresAt > this.clock ? lock.expiresAt : undefined;
  }

  /**
   * Whether a live shared lock (other than `except`) expires at `at`. The order in which locks
   * expiring at the same moment are given back is not specified (it decides the dead-letter
   * queue's order), so the runner moves the clock on by a millisecond until a new expiry is free.
   */
  expiryTaken(at: number, except?: string): boolean {
    return this.shared && this.liveLocks().some((l) => l.id !== except && l.expiresAt === at);
  }

  /** Pushes one entry; false when its dedup id made it a duplicate (nothing pushed). */
  push(item: Item, priority = 0, delaySeconds = 0, dedupId?: string): boolean {
    if (dedupId !== undefined) {
      if ((this.accepted.get(dedupId) ?? -Infinity) > this.clock) return false;
      this.accepted.set(dedupId, this.clock + this.dedupWindowMs);
    }
    this.created = true;
    if (delaySeconds > 0) this.delayedItems.push({ dueAt: this.clock + delaySeconds * 1000, seq: this.delayedSeq++, item, priority });
    else this.append(item, priority);
    return true;
  }

  private append(item: Item, priority: number): void {
    const entry = { item, key: this.nextKey++, deliveries: 0 };
    const list = this.byPriority.get(priority);
    if (list) list.push(entry);
    else this.byPriority.set(priority, [entry]);
  }

  /** All or nothing, in the given order (the model cannot fail half way); how many were pushed and how many skipped as duplicates. */
  pushBatch(entries: PushEntry[]): { count: number; duplicates: number } {
    let count = 0;
    for (const e of entries) if (this.push(e.item, e.priority, e.delay_seconds, e.dedup_id)) count += 1;
    return { count, duplicates: entries.length - count };
  }

  /** Delayed items not yet visible. */
  delayed(): number {
    return this.delayedItems.length;
  }

  /** Removes and returns up to `depth` items: lowest priority first, FIFO, spilling over. */
  pop(depth: number): Item[] {
    return this.take(depth).map((h) => h.item);
  }

  private take(depth: number): HeldItem[] {
    const out: HeldItem[] = [];
    for (const priority of this.priorities()) {
      if (out.length >= depth) break;
      const list = this.byPriority.get(priority)!;
      out.push(...list.splice(0, depth - out.length).map((e) => ({ ...e, priority })));
      if (list.length === 0) this.byPriority.delete(priority);
    }
    return out;
  }

  /**
   * Gives a lock's items back: past `max_deliveries` (with a dead-letter queue) to the tail of
   * the dead-letter queue, in lock order; the others in shared mode to their place in push
   * order, in exclusive mode to the front of their priorities, keeping their order (the same
   * place: an exclusive lock took the front, and nothing was popped since). Returns how many
   * went to the dead-letter queue.
   */
  private giveBack(items: HeldItem[]): { deadLettered: number; delayed: number } {
    const { maxDeliveries, deadLetters } = this.currentSettings;
    const dead = items.filter((h) => deadLetters && maxDeliveries !== null && h.deliveries >= maxDeliveries);
    for (const h of dead) this.deadLetters.push(h.item, h.priority);
    // A retry delay: the item waits among the delayed items (in lock order), then comes back apart.
    const waiting = items.filter((h) => !dead.includes(h) && retryDelayMs(this.currentSettings, h.deliveries) > 0);
    for (const h of waiting) {
      const dueAt = this.clock + retryDelayMs(this.currentSettings, h.deliveries);
      this.delayedItems.push({ dueAt, seq: this.delayedSeq++, item: h.item, priority: h.priority, retry: { key: h.key, deliveries: h.deliveries } });
    }
    const back = items.filter((h) => !dead.includes(h) && !waiting.includes(h));
    const toFront: HeldItem[] = [];
    for (const { priority, ...entry } of back) {
      const list = this.byPriority.get(priority) ?? [];
      if (!this.shared && !list[0]?.apart) {
        toFront.push({ priority, ...entry, apart: false });
        continue;
      }
      const at = list.findIndex((e) => e.key > entry.key);
      list.splice(at < 0 ? list.length : at, 0, { ...entry, apart: true });
      this.byPriority.set(priority, list);
    }
    this.returnToFront(toFront);
    return { deadLettered: dead.length, delayed: waiting.length };
  }

  /** Puts held items back at the front of their priorities, keeping their order. */
  private returnToFront(items: HeldItem[]): void {
    const grouped = new Map<number, Entry[]>();
    for (const { priority, ...entry } of items) grouped.set(priority, [...(grouped.get(priority) ?? []), entry]);
    for (const [priority, returned] of grouped) {
      this.byPriority.set(priority, [...returned, ...(this.byPriority.get(priority) ?? [])]);
      this.largestReturn.set(priority, Math.max(this.largestReturn.get(priority) ?? 0, returned.length));
    }
  }

  /**
   * Pops under a new lock (adding one to each item's deliveries); undefined when the queue is
   * empty (no lock is made). In exclusive mode the caller checks for an unexpired lock first.
   */
  popAck(depth: number, ttlSeconds: number): ModelLock | undefined {
    const items = this.take(depth).map((h) => ({ ...h, deliveries: h.deliveries + 1 }));
    if (items.length === 0) return undefined;
    const id = `#${this.issued.length + 1}`;
    this.issued.push(id);
    const lock: ModelLock = { id, state: 'active', items, createdAt: this.clock, expiresAt: this.clock + ttlSeconds * 1000 };
    if (this.shared) this.sharedLocks.set(id, lock);
    else this.lock = lock;
    return lock;
  }

  /** The symbolic id a lock command sends for `choice`; undefined for "no usable id". `pick` chooses a live shared lock for `live`. */
  lockIdFor(choice: LockIdChoice, pick = 0): string | undefined {
    switch (choice) {
      case 'latest':
        return this.issued.at(-1) ?? BOGUS_LOCK_ID;
      case 'previous':
        return this.issued.at(-2) ?? BOGUS_LOCK_ID;
      case 'bogus':
        return BOGUS_LOCK_ID;
      case 'live': {
        const live = this.liveLocks();
        return live.length > 0 ? live[pick % live.length].id : (this.issued.at(-1) ?? BOGUS_LOCK_ID);
      }
      default:
        return undefined;
    }
  }

  /** The contract's check order for acknowledge, extend-lock and release (shared mode: by id, no INVALID_LOCK_ID). */
  checkLock(choice: LockIdChoice, pick?: number): ModelLock | LockErrorCode {
    const id = this.lockIdFor(choice, pick);
    if (id === undefined) return 'LOCK_ID_REQUIRED';
    return this.checkLockId(id);
  }

  /** {@link checkLock} for a symbolic id. */
  checkLockId(id: string): ModelLock | LockErrorCode {
    if (this.shared) {
      // The last exclusive lock, expired before the switch to shared mode, is remembered too.
      if (this.lock?.state === 'expired' && this.lock.id === id) return 'LOCK_EXPIRED';
      const lock = this.sharedLocks.get(id);
      if (!lock) return 'LOCK_NOT_FOUND';
      return lock.state === 'expired' ? 'LOCK_EXPIRED' : lock;
    }
    if (!this.lock) return 'LOCK_NOT_FOUND';
    if (this.lock.state === 'expired') return 'LOCK_EXPIRED';
    if (this.lock.id !== id) return 'INVALID_LOCK_ID';
    return this.lock;
  }

  acknowledge(lock: ModelLock): number {
    if (this.shared) this.sharedLocks.delete(lock.id);
    else this.lock = null;
    return lock.items.length;
  }

  extend(lock: ModelLock, ttlSeconds: number): ModelLock {
    const extended = { ...lock, expiresAt: this.clock + ttlSeconds * 1000 };
    if (this.shared) this.sharedLocks.set(lock.id, extended);
    else this.lock = extended;
    return extended;
  }

  /** Gives the lock's items back; how many went back and how many to the dead-letter queue. */
  release(lock: ModelLock): { returned: number; deadLettered: number; delayed: number } {
    const { deadLettered, delayed } = this.giveBack(lock.items);
    if (this.shared) this.sharedLocks.delete(lock.id);
    else this.lock = null;
    return { returned: lock.items.length - deadLettered, deadLettered, delayed };
  }

  /** PUT settings: creates the queue; a change of lock mode while a lock lives is refused. */
  putSettings(choice: SettingsChoice): ModelSettings | 'QUEUE_LOCKED' {
    const live = this.activeLock() !== undefined || this.liveLocks().length > 0;
    if (choice.lockMode !== undefined && choice.lockMode !== this.currentSettings.lockMode && live) return 'QUEUE_LOCKED';
    this.currentSettings = {
      lockMode: choice.lockMode ?? this.currentSettings.lockMode,
      maxDeliveries: choice.maxDeliveries !== undefined ? choice.maxDeliveries : this.currentSettings.maxDeliveries,
      deadLetters: choice.maxDeliveries !== undefined ? choice.maxDeliveries !== null : this.currentSettings.deadLetters,
      paused: choice.paused ?? this.currentSettings.paused,
      retryDelaySeconds: choice.retry?.seconds ?? this.currentSettings.retryDelaySeconds,
      retryBackoff: choice.retry?.backoff ?? this.currentSettings.retryBackoff,
      retryDelayMaxSeconds: choice.retry?.max ?? this.currentSettings.retryDelayMaxSeconds,
    };
    this.created = true;
    return this.currentSettings;
  }

  /** Deletes the queue with its locks, settings, delayed items and dedup ids; returns how many items it held (locked and delayed ones included). */
  delete(): number {
    const held = (this.activeLock()?.items.length ?? 0) + this.liveLocks().reduce((n, l) => n + l.items.length, 0);
    const n = this.count() + held + this.delayedItems.length;
    this.delayedItems = [];
    this.delayedSeq = 0;
    this.accepted.clear();
    this.byPriority.clear();
    this.largestReturn.clear();
    this.lock = null;
    this.sharedLocks.clear();
    this.currentSettings = DEFAULT_SETTINGS;
    this.created = false;
    return n;
  }

  /**
   * Redrive of this queue (a dead-letter queue, every item a dead letter of `origin`): up to
   * `max` items from the front join `origin` as items due now (after anything due before them,
   * as the service adds them to its delayed items), delivery counts starting again at 0.
   */
  redriveTo(origin: QueueModel, max: number): { moved: number; left: number } {
    const taken = this.take(max);
    for (const h of taken) origin.addDue(h.item, h.priority);
    return { moved: taken.length, left: this.count() };
  }

  /** An item due now, ordered after the delayed items already there (see {@link redriveTo}). */
  private addDue(item: Item, priority: number): void {
    this.created = true;
    this.delayedItems.push({ dueAt: this.clock, seq: this.delayedSeq++, item, priority });
  }

  /** Items waiting over all priorities (locked items left out). */
  count(): number {
    let n = 0;
    for (const list of this.byPriority.values()) n += list.length;
    return n;
  }

  /** Items waiting per priority (decimal string keys, as the inspection endpoint has them); only priorities that hold items. */
  countsByPriority(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const p of this.priorities()) out[String(p)] = this.byPriority.get(p)!.length;
    return out;
  }

  /** Priorities that hold items, lowest (popped first) first. */
  priorities(): number[] {
    return [...this.byPriority.keys()].sort((a, b) => a - b);
  }

  /** The items waiting at one priority, front first (a copy). */
  itemsAt(priority: number): Item[] {
    return (this.byPriority.get(priority) ?? []).map((e) => e.item);
  }

  /** The items of one priority in its segments, front first: those not kept apart (see {@link HeldItem.apart}). */
  segmentItemsAt(priority: number): Item[] {
    return (this.byPriority.get(priority) ?? []).filter((e) => !e.apart).map((e) => e.item);
  }

  /** Items of one priority kept apart from its segments. */
  apartAt(priority: number): number {
    return (this.byPriority.get(priority) ?? []).filter((e) => e.apart).length;
  }

  /** The unexpired exclusive lock as inspection shows it, or null (an expired lock is not shown); undefined in shared mode. */
  lockInfo(): LockInfo | null | undefined {
    if (this.shared) return undefined;
    const lock = this.activeLock();
    return lock ? { expiresAt: lock.expiresAt, createdAt: lock.createdAt, itemCount: lock.items.length } : null;
  }

  /** Shared mode: the live locks as inspection shows them; undefined in exclusive mode. */
  locksInfo(): SharedLocksInfo | undefined {
    if (!this.shared) return undefined;
    const live = this.liveLocks();
    const next = live.length === 0 ? null : Math.min(...live.map((l) => l.expiresAt));
    return { count: live.length, itemCount: live.reduce((n, l) => n + l.items.length, 0), nextExpiresAt: next };
  }

  /**
   * The most items one expiry or release returned to `priority` since the queue was created
   * (0 if none). Returned items go in front of the head segment, which may then exceed
   * `segment_size` by up to this many (seed 003, edge case 3): the head only grows by returns,
   * and a return re-adds what a lock took, so the head never holds more than
   * `segment_size` + this.
   */
  largestReturnAt(priority: number): number {
    return this.largestReturn.get(priority) ?? 0;
  }
}

/** Applies a command to the model and returns what the service should answer. */
export function applyCommand(model: QueueModel, command: QueueCommand): ModelOutcome {
  switch (command.kind) {
    case 'advance':
      model.advance(command.ms);
      return { kind: 'advance', now: model.now };
    case 'advanceToExpiry': {
      model.settle();
      const expiry = model.lockExpiry() ?? model.locksInfo()?.nextExpiresAt ?? undefined;
      if (expiry !== undefined) model.advance(Math.max(0, expiry + command.deltaMs - model.now));
      return { kind: 'advance', now: model.now };
    }
    case 'deactivate':
      return { kind: 'deactivate' };
    case 'popDeadLetters':
      return { kind: 'pop', items: model.deadLetters.pop(command.depth) };
    case 'redriveDeadLetters': {
      if (!model.deadLetters.exists) return { kind: 'redriven', exists: false, moved: 0, left: 0 };
      return { kind: 'redriven', exists: true, ...model.deadLetters.redriveTo(model, command.maxItems) };
    }
    default:
      break;
  }
  // Every operation on the queue first applies a due expiry (the service: at the start of each turn).
  model.settle();
  switch (command.kind) {
    case 'push': {
      const { item, priority, delay_seconds: delaySeconds, dedup_id: dedupId } = command.entry;
      const pushed = model.push(item, priority, delaySeconds, dedupId);
      return { kind: 'push', priority: priority ?? 0, delaySeconds: delaySeconds ?? 0, duplicate: dedupId === undefined ? undefined : !pushed };
    }
    case 'pushBatch':
      return { kind: 'pushBatch', ...model.pushBatch(command.entries) };
    case 'pop': {
      // Paused: nothing handed out, before any 423.
      if (model.settings.paused) return { kind: 'pop', items: [], paused: true };
      const expiresAt = model.lockExpiry();
      if (expiresAt !== undefined) return { kind: 'queueLocked', expiresAt };
      return { kind: 'pop', items: model.pop(command.depth) };
    }
    case 'popAck': {
      if (model.settings.paused) return { kind: 'popAckEmpty', paused: true };
      const expiresAt = model.lockExpiry();
      if (expiresAt !== undefined) return { kind: 'queueLocked', expiresAt };
      if (model.expiryTaken(model.now + command.ttlSeconds * 1000)) {
        while (model.expiryTaken(model.now + command.ttlSeconds * 1000)) model.advance(1);
        model.settle();
      }
      const lock = model.popAck(command.depth, command.ttlSeconds);
      if (!lock) return { kind: 'popAckEmpty' };
      return {
        kind: 'popAckLocked',
        items: lock.items.map((h) => h.item),
        deliveryCounts: lock.items.map((h) => h.deliveries),
        lockId: lock.id,
        expiresAt: lock.expiresAt,
      };
    }
    case 'acknowledge': {
      const checked = model.checkLock(command.lockId, command.pick);
      if (typeof checked === 'string') return { kind: 'lockError', code: checked };
      return { kind: 'acknowledged', count: model.acknowledge(checked) };
    }
    case 'extendLock': {
      const checked = model.checkLock(command.lockId, command.pick);
      if (typeof checked === 'string') return { kind: 'lockError', code: checked };
      const ttlMs = (command.ttlSeconds ?? 30) * 1000;
      if (model.expiryTaken(model.now + ttlMs, checked.id)) {
        while (model.expiryTaken(model.now + ttlMs, checked.id)) model.advance(1);
        // The nudge may have let locks expire, this one included.
        model.settle();
        const again = model.checkLockId(checked.id);
        if (typeof again === 'string') return { kind: 'lockError', code: again };
      }
      const lock = model.extend(model.checkLockId(checked.id) as ModelLock, command.ttlSeconds ?? 30);
      return { kind: 'extended', lockId: lock.id, expiresAt: lock.expiresAt };
    }
    case 'release': {
      const checked = model.checkLock(command.lockId, command.pick);
      if (typeof checked === 'string') return { kind: 'lockError', code: checked };
      const { returned, deadLettered, delayed } = model.release(checked);
      return { kind: 'released', count: returned, deadLettered, delayed };
    }
    case 'settings': {
      const result = model.putSettings(command.settings);
      return result === 'QUEUE_LOCKED' ? { kind: 'settingsLocked' } : { kind: 'settings', settings: result };
    }
    case 'inspect':
      return {
        kind: 'inspect',
        exists: model.exists,
        count: model.count(),
        counts: model.countsByPriority(),
        lock: model.lockInfo(),
        locks: model.locksInfo(),
        delayed: model.delayed(),
        settings: model.settings,
      };
    case 'delete': {
      const exists = model.exists;
      return { kind: 'delete', exists, itemsDeleted: model.delete() };
    }
  }
}
