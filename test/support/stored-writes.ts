import type { StoredTurnWrite } from '../../src/database/stored-queue.js';
import { NO_DELAYED } from '../../src/queue/core/types.js';

/**
 * A turn's stored write that changes nothing but `changes`: the queue row at version 1 → 2 with
 * the default segment settings, no rows, locks, delayed items or store work. One place to list
 * the write's fields for tests that build one by hand.
 */
export const storedWrite = (changes: Partial<StoredTurnWrite> = {}): StoredTurnWrite => ({
  expectedVersion: 1,
  newVersion: 2,
  deleteQueue: false,
  settings: { segmentSize: 100, bufferSegments: 1 },
  itemCount: 0,
  priorities: {},
  deletes: [],
  inserts: [],
  lock: undefined,
  shared: null,
  sharedLockUpserts: [],
  sharedLockDeletes: [],
  returnedInserts: [],
  returnedDeletes: [],
  deadLetters: null,
  redriven: [],
  delayed: NO_DELAYED,
  delayedInserts: [],
  delayedDeleteThrough: null,
  dedupInserts: [],
  storeSaves: [],
  storeDeletes: [],
  ...changes,
});
