import { budgetCapacity, drawn, msUntilToken, popsAllowed, tokensAt } from './pop-budget.js';
import type { CoreContext } from './turn-state.js';
import type { PopBudget, QueueSettings } from './types.js';

/** Why a pop may take nothing: no room under `maxInFlight`, or no pop budget under `maxPopsPerSecond` (with when it comes). */
export type LimitedBy = { readonly limited: 'in_flight' } | { readonly limited: 'rate'; readonly retryInMs: number };

/**
 * A queue's delivery limits (CONTRACT.md, "Delivery limits"): `maxInFlight` bounds the items
 * held by live locks, so a pop with ack takes at most the room left; `maxPopsPerSecond` bounds
 * the items handed out by pops of any kind, through the pop budget stored with the queue's row
 * (see `pop-budget.ts`), so all processes share it. Both are checked in the queue's turn.
 */
export class DeliveryLimits {
  constructor(
    private readonly ctx: CoreContext,
    /** Items held by live locks now. */
    private readonly inFlight: () => number,
    /** The budget as stored; undefined: full. */
    private budget: PopBudget | undefined,
  ) {}

  /** Items a pop with ack may still take (Infinity: no limit). */
  get room(): number {
    const max = this.ctx.settings.maxInFlight;
    return max == null ? Infinity : Math.max(0, max - this.inFlight());
  }

  /** Tokens of the pop budget at `now`; null without a rate limit. */
  tokens(now: number): number | null {
    const rate = this.ctx.settings.maxPopsPerSecond;
    return rate == null ? null : tokensAt(this.budget, rate, now);
  }

  /** How many of `depth` items a pop (with ack or not) may take at `now`, or why none. */
  allow(depth: number, ack: boolean, now: number): number | LimitedBy {
    let allowed = depth;
    if (ack) {
      const room = this.room;
      if (room <= 0) return { limited: 'in_flight' };
      allowed = Math.min(allowed, room);
    }
    const rate = this.ctx.settings.maxPopsPerSecond;
    if (rate != null) {
      const pops = popsAllowed(this.budget, rate, now);
      if (pops <= 0) return { limited: 'rate', retryInMs: msUntilToken(this.budget, rate, now) };
      allowed = Math.min(allowed, pops);
    }
    return allowed;
  }

  /** A pop handed out `taken` items at `now`: the budget pays for them (written by the turn). */
  took(taken: number, now: number): void {
    const rate = this.ctx.settings.maxPopsPerSecond;
    if (rate == null || taken === 0) return;
    this.write(drawn(this.budget, rate, now, taken));
  }

  /** The settings change to `next`: a new rate starts with a full budget (one second's worth, at least 1). */
  settingsChanging(current: QueueSettings, next: QueueSettings): void {
    if (next.maxPopsPerSecond != null && next.maxPopsPerSecond !== current.maxPopsPerSecond) {
      // Written at time 0: refilled to the brim whenever it is read.
      this.write({ tokens: budgetCapacity(next.maxPopsPerSecond), at: 0 });
    }
  }

  private write(budget: PopBudget): void {
    this.budget = budget;
    this.ctx.turn.writes.popBudget = budget;
    this.ctx.turn.touch();
  }
}
