import type { DatabaseFunction } from './database-function.js';
import { DEFAULT_ENQUEUE_LIMITS, enqueueLimitFunctions } from './enqueue-limits.function.js';
import { ENQUEUE_COMMITTED, PUSHPOP_ENQUEUE } from './enqueue.function.js';
import { QUEUE_READY } from './ready-queue.function.js';
import { WRITE_TURN_FULL, WRITE_TURN_SHORT, WRITE_TURN_THIRD } from './write-turn.function.js';

/**
 * Every function of pushpop's schema, in the order they are created (a `sql` function after
 * those it calls). The one place a function is defined: migrations take their text from here,
 * and a test checks the migrated schema against it.
 */
export const DATABASE_FUNCTIONS: readonly DatabaseFunction[] = [
  WRITE_TURN_FULL,
  WRITE_TURN_THIRD,
  WRITE_TURN_SHORT,
  ...enqueueLimitFunctions(DEFAULT_ENQUEUE_LIMITS),
  PUSHPOP_ENQUEUE,
  ENQUEUE_COMMITTED,
  QUEUE_READY,
];
