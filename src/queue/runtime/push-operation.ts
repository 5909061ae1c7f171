import type { PushOutcome } from '../core/queue-core.js';
import type { NewItem } from '../core/types.js';
import type { TurnOp } from './turn-op.js';

/**
 * A push as an operation of a turn, the one description of it for every pusher (the HTTP push
 * and batch, schedule firings): the items in order, all or nothing; their dedup ids checked
 * together with the other pushes of the turn before the first of them runs; weighing as many
 * items as it carries. Count its outcome with `QueueStats.pushed` once it committed.
 * @param dedupWindowMs - how long an accepted dedup id makes a push of the same id a duplicate
 */
export function pushOperation(items: readonly NewItem[], dedupWindowMs: number): TurnOp<PushOutcome> {
  const dedupIds = items.flatMap((i) => (i.dedupId !== undefined ? [i.dedupId] : []));
  return {
    apply: (core, now) => core.push(items, now, dedupWindowMs),
    weight: items.length,
    ...(dedupIds.length > 0 ? { dedupIds } : {}),
  };
}
