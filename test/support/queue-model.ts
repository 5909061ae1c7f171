/**
 * An in-memory model of one pushpop queue, with the contract's semantics and none of its
 * storage: property tests run the same commands against the service and against this model
 * and compare what they see.
 *
 * Semantics (CONTRACT.md, "Queue endpoints"):
 * - priority 0 is popped first; FIFO within a priority; a pop's `depth` spills over into the
 *   next priority; an empty pop returns `[]`;
 * - a queue exists once something is pushed to it (a pop never creates it) and until it is
 *   deleted.
 *
 * Commands are plain objects of the {@link QueueCommand} union, applied by {@link applyCommand}.
 * To add acknowledgement (pop with `require_ack`, acknowledge, extend-lock, release, expiry):
 * add the command types to the union, the state (the lock: its items with their priorities,
 * its id, its expiry) to {@link QueueModel}, and a case to {@link applyCommand}. The model's
 * `count()` must then leave locked items out, as the contract's inspection does.
 */

/** An item as pushed: any JSON object. */
export type Item = Record<string, unknown>;

export interface PushEntry {
  item: Item;
  /** Omitted means the default, 0. */
  priority?: number;
}

export type QueueCommand =
  | { kind: 'push'; entry: PushEntry }
  | { kind: 'pushBatch'; entries: PushEntry[] }
  | { kind: 'pop'; depth: number }
  | { kind: 'inspect' }
  | { kind: 'delete' }
  /** Drops the queue's actor from memory, as the idle sweep does; nothing observable may change. */
  | { kind: 'deactivate' };
// Acknowledgement commands go here, e.g.
//   | { kind: 'popAck'; depth: number; ttlSeconds: number }
//   | { kind: 'acknowledge'; lockId: 'current' | 'stale' | 'bogus' }
//   | { kind: 'release'; lockId: 'current' | 'stale' | 'bogus' }
//   | { kind: 'expire' }   (wait past the lock's ttl)

/** What the model predicts for a command; the runner compares the service's answer with it. */
export type ModelOutcome =
  | { kind: 'push'; priority: number }
  | { kind: 'pushBatch'; count: number }
  | { kind: 'pop'; items: Item[] }
  | { kind: 'inspect'; exists: boolean; count: number; counts: Record<string, number> }
  | { kind: 'delete'; exists: boolean; itemsDeleted: number }
  | { kind: 'deactivate' };

export class QueueModel {
  /** Items waiting per priority, front first. A priority with no items has no entry. */
  private readonly byPriority = new Map<number, Item[]>();
  private created = false;

  /** Whether the queue exists (something was pushed since it was last deleted). */
  get exists(): boolean {
    return this.created;
  }

  push(item: Item, priority = 0): void {
    this.created = true;
    const list = this.byPriority.get(priority);
    if (list) list.push(item);
    else this.byPriority.set(priority, [item]);
  }

  /** All or nothing, in the given order (the model cannot fail half way). */
  pushBatch(entries: PushEntry[]): number {
    for (const { item, priority } of entries) this.push(item, priority);
    return entries.length;
  }

  /** Removes and returns up to `depth` items: lowest priority first, FIFO, spilling over. */
  pop(depth: number): Item[] {
    const out: Item[] = [];
    for (const priority of this.priorities()) {
      if (out.length >= depth) break;
      const list = this.byPriority.get(priority)!;
      out.push(...list.splice(0, depth - out.length));
      if (list.length === 0) this.byPriority.delete(priority);
    }
    return out;
  }

  /** Deletes the queue; returns how many items it held. */
  delete(): number {
    const n = this.count();
    this.byPriority.clear();
    this.created = false;
    return n;
  }

  /** Items waiting over all priorities. */
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
}

/** Applies a command to the model and returns what the service should answer. */
export function applyCommand(model: QueueModel, command: QueueCommand): ModelOutcome {
  switch (command.kind) {
    case 'push':
      model.push(command.entry.item, command.entry.priority);
      return { kind: 'push', priority: command.entry.priority ?? 0 };
    case 'pushBatch':
      return { kind: 'pushBatch', count: model.pushBatch(command.entries) };
    case 'pop':
      return { kind: 'pop', items: model.pop(command.depth) };
    case 'inspect':
      return { kind: 'inspect', exists: model.exists, count: model.count(), counts: model.countsByPriority() };
    case 'delete': {
      const exists = model.exists;
      return { kind: 'delete', exists, itemsDeleted: model.delete() };
    }
    case 'deactivate':
      return { kind: 'deactivate' };
  }
}
