import type { DelayedItems } from './delayed-items.js';
import type { PrioritySegments } from './priority-segments.js';
import type { SharedLocks } from './shared-locks.js';
import type { TurnState } from './turn-state.js';
import { NO_DELAYED, type LockState, type PriorityMetadata, type QueueSettings, type TurnWrite } from './types.js';

/** The write that deletes a queue stored at `version`, with everything in it. */
export function deleteQueueWrite(version: number, settings: QueueSettings): TurnWrite {
  return {
    expectedVersion: version,
    newVersion: version + 1,
    deleteQueue: true,
    settings,
    itemCount: 0,
    priorities: {},
    deletes: [],
    inserts: [],
    lock: undefined,
    delayed: NO_DELAYED,
    delayedInserts: [],
    delayedDeleteThrough: null,
    dedupInserts: [],
    shared: null,
    sharedLockUpserts: [],
    sharedLockDeletes: [],
    returnedInserts: [],
    returnedDeletes: [],
    deadLetters: null,
    redriven: [],
  };
}

/**
 * A turn's row changes as one write: the queue row after the turn (from the parts), and the
 * rows the turn's write set netted. Undefined when the turn changed nothing.
 */
export function turnWrite(
  turn: TurnState,
  settings: QueueSettings,
  { segments, shared, delayed }: { readonly segments: PrioritySegments; readonly shared: SharedLocks; readonly delayed: DelayedItems },
  storedVersion: number | null,
  createdVersion: () => number,
): TurnWrite | undefined {
  const { writes } = turn;
  if (writes.isEmpty) return undefined;
  const returned = writes.returnedRows();
  const upserts: LockState[] = [];
  const deletes: string[] = [];
  for (const [id, lock] of writes.sharedLockWrites()) {
    if (lock) upserts.push(lock);
    else deletes.push(id);
  }
  const deadLetterQueue = settings.deadLetterQueue;
  const priorities: Record<string, PriorityMetadata> = {};
  for (const p of segments.list()) priorities[String(p)] = { ...segments.get(p)! };
  return {
    expectedVersion: storedVersion,
    newVersion: storedVersion === null ? createdVersion() : storedVersion + 1,
    deleteQueue: false,
    settings,
    settingsChanged: writes.settingsChanged,
    itemCount: segments.count,
    priorities,
    deletes: writes.deleteRows(),
    inserts: writes.insertRows(),
    packs: writes.packRows(),
    lock: writes.lock,
    delayed: writes.delayedChanged ? delayed.summary : null,
    delayedInserts: writes.delayedInserts,
    delayedDeleteThrough: writes.delayedDeleteThrough,
    dedupInserts: writes.dedupInserts,
    shared: writes.sharedChanged ? shared.state : null,
    ...(writes.popBudget ? { popBudget: writes.popBudget } : {}),
    sharedLockUpserts: upserts,
    ...(writes.createdSharedLockIds().size > 0 ? { sharedLocksCreated: writes.createdSharedLockIds() } : {}),
    sharedLockDeletes: deletes,
    returnedInserts: returned.inserts,
    returnedDeletes: returned.deletes,
    deadLetters: writes.deadLetters.length > 0 && deadLetterQueue ? { queueId: deadLetterQueue, items: writes.deadLetters } : null,
    redriven: writes.redriven,
  };
}
