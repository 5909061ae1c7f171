import type { PopBudget } from './types.js';

/**
 * A queue's pop budget for `max_pops_per_second`: a token bucket stored with the queue's row, so
 * every process draws from the same one (a turn that used it writes it back, guarded by the
 * row's version like everything else a turn writes).
 *
 * Rules: it holds at most one second's worth of pops, and at least 1 (`capacity`); it refills at
 * `rate` tokens a second; absent (never drawn from since the limit was set) it is full. A pop
 * takes at most the whole tokens it holds; with less than one it takes nothing, and the next
 * whole token comes in {@link msUntilToken}.
 */
export const budgetCapacity = (rate: number): number => Math.max(1, rate);

/** Tokens in the bucket at `now` (refilled since it was last written). */
export function tokensAt(budget: PopBudget | undefined, rate: number, now: number): number {
  const capacity = budgetCapacity(rate);
  if (!budget) return capacity;
  return Math.min(capacity, budget.tokens + (Math.max(0, now - budget.at) * rate) / 1000);
}

/** Whole pops the budget allows at `now`. */
export function popsAllowed(budget: PopBudget | undefined, rate: number, now: number): number {
  // A hair under a whole token counts as one: refills in floating point land just below it.
  return Math.floor(tokensAt(budget, rate, now) + 1e-9);
}

/** The budget after `taken` pops at `now`. */
export function drawn(budget: PopBudget | undefined, rate: number, now: number, taken: number): PopBudget {
  return { tokens: Math.max(0, tokensAt(budget, rate, now) - taken), at: now };
}

/** Milliseconds until the budget holds a whole token again (0: it does now). */
export function msUntilToken(budget: PopBudget | undefined, rate: number, now: number): number {
  const missing = 1 - tokensAt(budget, rate, now);
  return missing <= 1e-9 ? 0 : Math.max(1, Math.ceil((missing * 1000) / rate - 1e-6));
}
