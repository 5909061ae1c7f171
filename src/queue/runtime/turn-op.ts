/**
 * One operation on a queue, run inside the queue's turn against its core: plain data (a kind,
 * its arguments and the reads it declares, see `QueueOp` in the core), applied by the core's one
 * dispatcher (`applyOp`). Its outcome, a refusal included, is the answer (a refused operation
 * changes nothing; the service turns refusals into answers). The reads it declares are made
 * for the whole turn before its first operation runs; anything else an operation needs it
 * names by returning `Needed`, and the runner reads that and applies it again (see `drive`).
 */
export type { QueueOp as TurnOp, OutcomeOf } from '../core/queue-ops.js';
