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
 *   replaces it; after acknowledge or release (or deletion of the queue) there is no lock (404);
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
export type LockIdChoice = 'latest' | 'previous' | 'bogus' | 'omitted' | 'empty' | 'number' | 'null';

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
  | { kind: 'acknowledge'; lockId: LockIdChoice }
  /** `ttlSeconds` omitted means the default, 30. */
  | { kind: 'extendLock'; lockId: LockIdChoice; ttlSeconds?: number }
  | { kind: 'release'; lockId: LockIdChoice }
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
  | { kind: 'pop'; items: Item[] }
  /** 423 QUEUE_LOCKED (a pop with or without ack while an unexpired lock exists). */
  | { kind: 'queueLocked'; expiresAt: number }
  /** A pop with ack that found items: `lockId` is the model's symbolic id of the new lock. */
  | { kind: 'popAckLocked'; items: Item[]; lockId: string; expiresAt: number }
  /** A pop with ack on an empty (or missing) queue: `{items: [], count: 0, locked: false}`. */
  | { kind: 'popAckEmpty' }
  | { kind: 'lockError'; code: LockErrorCode }
  | { kind: 'acknowledged'; count: number }
  | { kind: 'extended'; lockId: string; expiresAt: number }
  | { kind: 'released'; count: number }
  | { kind: 'inspect'; exists: boolean; count: number; counts: Record<string, number>; lock: LockInfo | null; delayed: number }
  | { kind: 'delete'; exists: boolean; itemsDeleted: number }
  | { kind: 'deactivate' }
  | { kind: 'advance'; now: number };

/** The model's symbolic id for "a well-formed id no lock has". */
export const BOGUS_LOCK_ID = '#bogus';

interface HeldItem {
  item: Item;
  priority: number;
}

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
  /** Items waiting per priority, front first. A priority with no items has no entry. */
  private readonly byPriority = new Map<number, Item[]>();
  private created = false;
  private lock: ModelLock | null = null;
  /** Symbolic ids of every lock made, oldest first (kept across deletes: an old id is just unknown then). */
  private readonly issued: string[] = [];
  /** Per priority, the most items one return (expiry or release) put back, since the queue was created. */
  private readonly largestReturn = new Map<number, number>();

  /** Delayed items not yet moved, with their due time and push order. */
  private delayedItems: { dueAt: number; seq: number; item: Item; priority: number }[] = [];
  private delayedSeq = 0;
  /** Dedup ids accepted, with the end of their window (epoch ms). */
  private readonly accepted = new Map<string, number>();

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

  advance(ms: number): void {
    if (ms < 0) throw new Error('the clock only moves forward');
    this.clock += ms;
  }

  /**
   * Applies what is due: delayed items join their priorities' tails (due order, ties in push
   * order), and an expired lock's items go back to the front. Every queue operation calls this first.
   */
  settle(): void {
    const due = this.delayedItems.filter((d) => d.dueAt <= this.clock).sort((a, b) => a.dueAt - b.dueAt || a.seq - b.seq);
    this.delayedItems = this.delayedItems.filter((d) => d.dueAt > this.clock);
    for (const d of due) this.append(d.item, d.priority);
    if (this.lock?.state !== 'active' || this.lock.expiresAt > this.clock) return;
    this.returnToFront(this.lock.items);
    this.lock = { ...this.lock, state: 'expired', items: [] };
  }

  /** The unexpired lock, if any (call {@link settle} first). */
  private activeLock(): ModelLock | undefined {
    return this.lock?.state === 'active' ? this.lock : undefined;
  }

  /** Expiry (ms) of the unexpired lock, if any, as of now. */
  lockExpiry(): number | undefined {
    const lock = this.activeLock();
    return lock && lock.expiresAt > this.clock ? lock.expiresAt : undefined;
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
    const list = this.byPriority.get(priority);
    if (list) list.push(item);
    else this.byPriority.set(priority, [item]);
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
      out.push(...list.splice(0, depth - out.length).map((item) => ({ item, priority })));
      if (list.length === 0) this.byPriority.delete(priority);
    }
    return out;
  }

  /** Puts held items back at the front of their priorities, keeping their order. */
  private returnToFront(items: HeldItem[]): void {
    const grouped = new Map<number, Item[]>();
    for (const { item, priority } of items) grouped.set(priority, [...(grouped.get(priority) ?? []), item]);
    for (const [priority, returned] of grouped) {
      this.byPriority.set(priority, [...returned, ...(this.byPriority.get(priority) ?? [])]);
      this.largestReturn.set(priority, Math.max(this.largestReturn.get(priority) ?? 0, returned.length));
    }
  }

  /** Pops under a new lock; undefined when the queue is empty (no lock is made). The caller checks for an unexpired lock. */
  popAck(depth: number, ttlSeconds: number): ModelLock | undefined {
    const items = this.take(depth);
    if (items.length === 0) return undefined;
    const id = `#${this.issued.length + 1}`;
    this.issued.push(id);
    this.lock = { id, state: 'active', items, createdAt: this.clock, expiresAt: this.clock + ttlSeconds * 1000 };
    return this.lock;
  }

  /** The symbolic id a lock command sends for `choice`; undefined for "no usable id". */
  lockIdFor(choice: LockIdChoice): string | undefined {
    switch (choice) {
      case 'latest':
        return this.issued.at(-1) ?? BOGUS_LOCK_ID;
      case 'previous':
        return this.issued.at(-2) ?? BOGUS_LOCK_ID;
      case 'bogus':
        return BOGUS_LOCK_ID;
      default:
        return undefined;
    }
  }

  /** The contract's check order for acknowledge, extend-lock and release. */
  checkLock(choice: LockIdChoice): ModelLock | LockErrorCode {
    const id = this.lockIdFor(choice);
    if (id === undefined) return 'LOCK_ID_REQUIRED';
    if (!this.lock) return 'LOCK_NOT_FOUND';
    if (this.lock.state === 'expired') return 'LOCK_EXPIRED';
    if (this.lock.id !== id) return 'INVALID_LOCK_ID';
    return this.lock;
  }

  acknowledge(): number {
    const n = this.lock?.items.length ?? 0;
    this.lock = null;
    return n;
  }

  extend(ttlSeconds: number): ModelLock {
    this.lock = { ...this.lock!, expiresAt: this.clock + ttlSeconds * 1000 };
    return this.lock;
  }

  release(): number {
    const items = this.lock?.items ?? [];
    this.returnToFront(items);
    this.lock = null;
    return items.length;
  }

  /** Deletes the queue with its lock, delayed items and dedup ids; returns how many items it held (locked and delayed ones included). */
  delete(): number {
    const n = this.count() + (this.activeLock()?.items.length ?? 0) + this.delayedItems.length;
    this.delayedItems = [];
    this.delayedSeq = 0;
    this.accepted.clear();
    this.byPriority.clear();
    this.largestReturn.clear();
    this.lock = null;
    this.created = false;
    return n;
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
    return [...(this.byPriority.get(priority) ?? [])];
  }

  /** The unexpired lock as inspection shows it, or null (an expired lock is not shown). */
  lockInfo(): LockInfo | null {
    const lock = this.activeLock();
    return lock ? { expiresAt: lock.expiresAt, createdAt: lock.createdAt, itemCount: lock.items.length } : null;
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
      const expiry = model.lockExpiry();
      if (expiry !== undefined) model.advance(Math.max(0, expiry + command.deltaMs - model.now));
      return { kind: 'advance', now: model.now };
    }
    case 'deactivate':
      return { kind: 'deactivate' };
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
      const expiresAt = model.lockExpiry();
      if (expiresAt !== undefined) return { kind: 'queueLocked', expiresAt };
      return { kind: 'pop', items: model.pop(command.depth) };
    }
    case 'popAck': {
      const expiresAt = model.lockExpiry();
      if (expiresAt !== undefined) return { kind: 'queueLocked', expiresAt };
      const lock = model.popAck(command.depth, command.ttlSeconds);
      if (!lock) return { kind: 'popAckEmpty' };
      return { kind: 'popAckLocked', items: lock.items.map((h) => h.item), lockId: lock.id, expiresAt: lock.expiresAt };
    }
    case 'acknowledge': {
      const checked = model.checkLock(command.lockId);
      if (typeof checked === 'string') return { kind: 'lockError', code: checked };
      return { kind: 'acknowledged', count: model.acknowledge() };
    }
    case 'extendLock': {
      const checked = model.checkLock(command.lockId);
      if (typeof checked === 'string') return { kind: 'lockError', code: checked };
      const lock = model.extend(command.ttlSeconds ?? 30);
      return { kind: 'extended', lockId: lock.id, expiresAt: lock.expiresAt };
    }
    case 'release': {
      const checked = model.checkLock(command.lockId);
      if (typeof checked === 'string') return { kind: 'lockError', code: checked };
      return { kind: 'released', count: model.release() };
    }
    case 'inspect':
      return { kind: 'inspect', exists: model.exists, count: model.count(), counts: model.countsByPriority(), lock: model.lockInfo(), delayed: model.delayed() };
    case 'delete': {
      const exists = model.exists;
      return { kind: 'delete', exists, itemsDeleted: model.delete() };
    }
  }
}
