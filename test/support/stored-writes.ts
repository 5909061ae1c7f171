import type { StoredTurnWrite } from '../../src/database/stored-queue.js';
import { deleteQueueWrite } from '../../src/queue/core/turn-write.js';

/**
 * A turn's stored write that changes nothing but `changes`: the queue row at version 1 → 2 with
 * the default segment settings, no rows, locks, delayed items or store work. The core's write
 * of nothing but a deleted queue lists the write's fields (`deleteQueueWrite`); this adds the
 * store's, for tests that build a write by hand.
 */
export const storedWrite = (changes: Partial<StoredTurnWrite> = {}): StoredTurnWrite => ({
  ...deleteQueueWrite(1, { segmentSize: 100, bufferSegments: 1 }),
  deleteQueue: false,
  storeSaves: [],
  storeDeletes: [],
  ...changes,
});
