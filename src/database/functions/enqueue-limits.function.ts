import type { DatabaseFunction } from './database-function.js';

/** The limits `pushpop_enqueue` checks until a service sets its own: `MAX_ITEM_BYTES` and `MAX_PRIORITY`'s defaults. */
export const DEFAULT_ENQUEUE_LIMITS = { maxItemBytes: 262_144, maxPriority: 255 } as const;

/**
 * `pushpop_enqueue_max_item_bytes()` and `pushpop_enqueue_max_priority()`: the limits of the
 * service's configuration that `pushpop_enqueue` checks, each a constant in the body of a `sql`
 * function declared `IMMUTABLE`. A call folds them into its plan: reading them from a one-row
 * table was 1.3–1.5 µs of a call's 9 (docs/performance.md, "Enqueue from SQL"), and a setting the
 * call kept would be one the caller can set too. A service whose limits differ replaces both as
 * it starts (`EnqueueInboxRepository.setLimits`); replacing a function invalidates the plans
 * that folded it, so every session checks the new limits from its next call. A caller granted
 * `EXECUTE` on `pushpop_enqueue` cannot replace them (they belong to pushpop's owner, in its
 * schema), and `pushpop_enqueue` finds them by its pinned `search_path`.
 */
export function enqueueLimitFunctions(limits: { readonly maxItemBytes: number; readonly maxPriority: number }): DatabaseFunction[] {
  const constant = (value: number): string => {
    if (!Number.isSafeInteger(value) || value < 0) throw new Error(`an enqueue limit must be a non-negative integer, not ${value}`);
    return `\n  SELECT ${value}\n`;
  };
  return [
    {
      name: 'pushpop_enqueue_max_item_bytes',
      summary: "The largest item pushpop_enqueue accepts, in bytes of compact JSON: the service's MAX_ITEM_BYTES, set as it starts.",
      parameters: [],
      returns: 'integer',
      language: 'sql',
      immutable: true,
      body: constant(limits.maxItemBytes),
    },
    {
      name: 'pushpop_enqueue_max_priority',
      summary: "The highest priority pushpop_enqueue accepts: the service's MAX_PRIORITY, set as it starts.",
      parameters: [],
      returns: 'integer',
      language: 'sql',
      immutable: true,
      body: constant(limits.maxPriority),
    },
  ];
}
