import type { DatabaseFunction } from './database-function.js';

/**
 * The ready set's upkeep: `queues.ready` says whether a queue has items a pop could hand out
 * (`item_count > 0`, items under a lock not counted, and not paused). Fair pops over a prefix
 * find their candidates through the partial index `IDX_queues_ready` (on `queue_id`, where
 * `ready`), so that their cost does not grow with the queues that hold nothing.
 *
 * A `BEFORE INSERT OR UPDATE` trigger on `queues` calls this function only when `ready` would
 * change (its `WHEN` condition, evaluated without calling any function): a push to a queue that
 * already had items, or a pop that leaves some, leaves `ready` alone, so the row's update stays a
 * HOT update as before (no index entry), and the function runs only on the transitions. Every
 * writer of the row, whatever its path (a turn's write, a settings change, another release's
 * form of the write), keeps the set right by construction.
 */
export const QUEUE_READY: DatabaseFunction = {
  name: 'pushpop_queue_ready',
  summary: 'Keeps queues.ready (items to hand out, not paused) in step with the row, on the transitions only (a trigger on queues).',
  parameters: [],
  returns: 'trigger',
  language: 'plpgsql',
  body: `
BEGIN
  NEW.ready := NEW.item_count > 0 AND NOT NEW.paused;
  RETURN NEW;
END;
`,
};

/** The trigger's condition: only a row whose `ready` is wrong calls the function. */
export const QUEUE_READY_CONDITION = `NEW.ready IS DISTINCT FROM (NEW.item_count > 0 AND NOT NEW.paused)`;
