import { Injectable, OnModuleDestroy } from '@nestjs/common';
import { captureAsyncContext, type AsyncContext } from '../../common/async-context.js';
import { AppConfig } from '../../config/app-config.js';
import type { Pending } from './turn-lines.js';
import type { TurnOp } from './turn-op.js';

/** What woke a long poll: a turn of this process left items, another process's push (a notification), or the periodic re-check. */
export type WakeCause = 'local' | 'notification' | 'recheck';

/**
 * How a long poll's wait ended. `joined`: a push of this process handed it items, its pop
 * (the operation it offered, see {@link LongPoll.wait}) ran in the push's turn; its outcome is
 * {@link LongPoll.joined}.
 */
export type WaitEnd = 'woken' | 'timeout' | 'closed' | 'joined';

/**
 * A long poll, registered for its whole life: between its turns it waits with {@link wait}.
 * Wake-ups that come while it is in a turn are remembered, so none is lost between the turn's
 * read and the wait (the turn may have read the queue before the push committed).
 */
export interface LongPoll {
  /**
   * Resolves when woken, after `ms`, or on shutdown (at once if a wake-up came during the turn).
   * With `take`, a push of this process to the queue may run it in its own turn, right after
   * the push (one commit for both): the wait then ends `joined`.
   */
  wait(ms: number, take?: TurnOp): Promise<WaitEnd>;
  /** The outcome of the operation that ran in a push's turn, after a wait ended `joined`; a turn that failed took nothing: undefined. */
  readonly joined: Promise<unknown> | undefined;
  /**
   * The poll answers empty after waiting its whole time, nothing having woken it: its queue is
   * known to be empty (see {@link QueueEvents.isQuiet}) until something wakes it.
   */
  waitedInVain(): void;
  /** Unregisters the poll (it answered). */
  close(): void;
}

class Poll implements LongPoll {
  /** `turn`: looking at its queue or running a turn (not counted as waiting); `waiting`: parked in {@link wait}. */
  state: 'turn' | 'waiting' | 'closed' = 'turn';
  /** A wake-up that came during a look or a turn. */
  pending?: WakeCause;
  /** While waiting: the operation it offers to run in a push's turn, and the async context to run it in. */
  offer?: { op: TurnOp; context: AsyncContext };
  joined: Promise<unknown> | undefined;
  private timer?: NodeJS.Timeout;
  private resolve?: (end: WaitEnd) => void;

  private readonly onAbort = (): void => this.end('closed');

  constructor(
    private readonly events: QueueEvents,
    /** The queue it waits on, or with {@link byPrefix} the prefix of the queues it waits on. */
    readonly queueId: string,
    private readonly signal?: AbortSignal,
    readonly byPrefix = false,
  ) {
    signal?.addEventListener('abort', this.onAbort, { once: true });
  }

  wait(ms: number, take?: TurnOp): Promise<WaitEnd> {
    this.joined = undefined;
    if (this.state === 'closed' || this.events.closed || this.signal?.aborted) return Promise.resolve('closed');
    if (this.pending) {
      this.events.countWakeUp(this.pending);
      this.pending = undefined;
      return Promise.resolve('woken');
    }
    this.offer = take ? { op: take, context: captureAsyncContext() } : undefined;
    this.state = 'waiting';
    this.events.parked += 1;
    return new Promise((resolve) => {
      this.resolve = resolve;
      this.timer = setTimeout(() => this.end('timeout'), Math.max(0, ms));
    });
  }

  /**
   * Ends the wait with its offered operation put in a push's turn: the operation to put in the
   * line, answering {@link joined}.
   */
  join(): Pending {
    const { op, context } = this.offer!;
    let pending!: Pending;
    // A turn that failed wrote nothing: for the poll, nothing was taken (it waits on).
    this.joined = new Promise<unknown>((resolve) => (pending = { op, context, resolve, reject: () => resolve(undefined) }));
    this.end('joined');
    return pending;
  }

  /** Ends the wait (the poll goes back to a turn, or answers). */
  end(how: WaitEnd): void {
    if (this.state !== 'waiting') return;
    clearTimeout(this.timer);
    this.offer = undefined;
    this.state = 'turn';
    this.events.parked -= 1;
    const resolve = this.resolve!;
    this.resolve = undefined;
    resolve(how);
  }

  waitedInVain(): void {
    // A prefix names no one queue to call quiet.
    if (!this.byPrefix) this.events.markQuiet(this.queueId);
  }

  close(): void {
    if (this.state === 'closed') return;
    this.signal?.removeEventListener('abort', this.onAbort);
    this.end('closed');
    this.state = 'closed';
    this.events.remove(this);
  }
}

/**
 * The long polls of this process and what wakes them. A long poll waits outside the queue's
 * turn, so it never holds up pushes, and costs nothing while it waits: no timer per poll other
 * than its deadline, no database work. It is woken
 * - by a turn of this process that committed and left items on its queue (the turn runner),
 * - by a notification that another process made the queue non-empty, or by the periodic
 *   re-check that catches what notifications missed (see `QueueWakeUps`).
 *
 * A wake-up names how many items arrived, and wakes at most that many polls of the queue, the
 * longest waiting first; the others keep waiting. A woken poll takes its items in an ordinary
 * turn, and if that turn leaves items, it wakes the next ones in turn. So one push wakes one poll
 * however many wait, and polls woken together share turns (group commit): no thundering herd.
 *
 * The long polls of fair pops wait on a prefix ({@link registerPrefix}): a wake-up of any queue
 * whose id starts with it wakes them too (up to as many as items arrived, over all its
 * prefixes), looked up once per length of the prefixes registered, so a wake-up costs nothing
 * more while no fair pop waits. The periodic re-check does not look at them: they look again
 * by themselves (see `FairPopService`).
 *
 * At most `MAX_WAITING_POLLS` long polls are registered at once; past it {@link register}
 * refuses (the pop answers at once). At shutdown every waiting poll is answered at once.
 */
@Injectable()
export class QueueEvents implements OnModuleDestroy {
  /** Per queue, its polls in registration order (the longest waiting first). */
  private readonly polls = new Map<string, Set<Poll>>();
  /** Per prefix, the polls of fair pops on it, in registration order. */
  private readonly prefixPolls = new Map<string, Set<Poll>>();
  /** The lengths of the prefixes in {@link prefixPolls}, with how many prefixes have each: a wake-up looks up one prefix of its queue id per length. */
  private readonly prefixLengths = new Map<number, number>();
  private registered = 0;
  /** Polls parked in their wait now (not in a turn). */
  parked = 0;
  /** Set at shutdown: long polls answer at once instead of waiting. */
  closed = false;
  /** Polls woken, by cause. */
  readonly wakeUps: Record<WakeCause, number> = { local: 0, notification: 0, recheck: 0 };
  /** Pops with `wait_seconds` answered at once because `MAX_WAITING_POLLS` polls were waiting. */
  refused = 0;
  /**
   * Queues a long poll waited on in vain, with when: nothing has woken them since (no turn of
   * this process left items, no notification, no re-check found any). Forgotten on any wake-up.
   */
  private readonly quiet = new Map<string, number>();

  constructor(private readonly config: AppConfig) {}

  /**
   * Registers a long poll on a queue, before it first looks at the queue (its first look or
   * turn). Undefined when the process is shutting down, or already holds `MAX_WAITING_POLLS`
   * long polls (counted in {@link refused}): the pop then answers at once. `signal` (the client went away) ends its wait for good.
   */
  register(queueId: string, signal?: AbortSignal): LongPoll | undefined {
    if (this.closed) return undefined;
    if (this.registered >= this.config.env.MAX_WAITING_POLLS) {
      this.refused += 1;
      return undefined;
    }
    const poll = new Poll(this, queueId, signal);
    let set = this.polls.get(queueId);
    if (!set) this.polls.set(queueId, (set = new Set()));
    set.add(poll);
    this.registered += 1;
    return poll;
  }

  /**
   * Registers the long poll of a fair pop on the queues whose ids start with `prefix` (queues
   * created later included), before its first look, as {@link register} does for one queue;
   * counted against `MAX_WAITING_POLLS` the same way. It is woken by any wake-up of such a queue.
   */
  registerPrefix(prefix: string, signal?: AbortSignal): LongPoll | undefined {
    if (this.closed) return undefined;
    if (this.registered >= this.config.env.MAX_WAITING_POLLS) {
      this.refused += 1;
      return undefined;
    }
    const poll = new Poll(this, prefix, signal, true);
    let set = this.prefixPolls.get(prefix);
    if (!set) {
      this.prefixPolls.set(prefix, (set = new Set()));
      this.prefixLengths.set(prefix.length, (this.prefixLengths.get(prefix.length) ?? 0) + 1);
    }
    set.add(poll);
    this.registered += 1;
    return poll;
  }

  /**
   * Items arrived on a queue (`available` of them, as far as the caller knows): wakes up to that
   * many of its waiting polls, the longest waiting first, and marks those in a turn to look
   * again. Returns the number of waiting polls woken.
   */
  wake(queueId: string, available: number, cause: WakeCause): number {
    this.quiet.delete(queueId);
    const set = this.polls.get(queueId);
    const woken = set ? this.wakeSet(set, available, cause) : 0;
    if (this.prefixPolls.size === 0) return woken;
    // The fair pops on every prefix of the queue id: as many again (they take from any queue under it).
    let byPrefix = 0;
    for (const length of this.prefixLengths.keys()) {
      if (length > queueId.length) continue;
      const polls = this.prefixPolls.get(queueId.slice(0, length));
      if (polls) byPrefix += this.wakeSet(polls, available - byPrefix, cause);
    }
    return woken + byPrefix;
  }

  /** Wakes up to `available` of the waiting polls in `set`, the longest waiting first, and marks those in a turn to look again. */
  private wakeSet(set: Set<Poll>, available: number, cause: WakeCause): number {
    let woken = 0;
    for (const poll of set) {
      if (poll.state === 'turn') {
        poll.pending ??= cause;
      } else if (poll.state === 'waiting' && woken < available) {
        woken += 1;
        this.countWakeUp(cause);
        poll.end('woken');
      }
    }
    return woken;
  }

  /**
   * A push of this process is joining its queue's line with `items` items to hand out: up to
   * that many of the queue's waiting polls that offered an operation (the longest waiting
   * first) end their wait `joined`, and their operations join the line right behind the push,
   * so that the push's turn hands them the items (one commit instead of two, and no wake-up in
   * between). The polls it passes over are woken as usual once the turn committed.
   */
  handOff(queueId: string, items: number): Pending[] {
    const set = this.polls.get(queueId);
    if (!set || items <= 0) return [];
    const joiners: Pending[] = [];
    for (const poll of set) {
      if (joiners.length >= items) break;
      if (poll.state !== 'waiting' || !poll.offer) continue;
      this.countWakeUp('local');
      joiners.push(poll.join());
    }
    return joiners;
  }

  /** @internal */
  markQuiet(queueId: string): void {
    this.quiet.delete(queueId);
    this.quiet.set(queueId, Date.now());
  }

  /**
   * Whether a long poll waited on the queue in vain since `since` (epoch ms) and nothing woke the
   * queue after: as far as this process can know, the queue is still empty.
   */
  isQuiet(queueId: string, since: number): boolean {
    return (this.quiet.get(queueId) ?? -Infinity) >= since;
  }

  /** Forgets the queues marked quiet before `before` (all of them when undefined: what they say can no longer be trusted). */
  forgetQuiet(before?: number): void {
    if (before === undefined) return this.quiet.clear();
    // Oldest first (a mark is deleted and set again when renewed): stop at the first kept one.
    for (const [queueId, at] of this.quiet) {
      if (at >= before) break;
      this.quiet.delete(queueId);
    }
  }

  /** Whether a long poll of this process is registered on the queue (waiting, or in a turn). */
  hasPolls(queueId: string): boolean {
    return this.polls.has(queueId);
  }

  /** Queue ids with at least one poll waiting (not in a turn). */
  waitingQueues(): string[] {
    const ids: string[] = [];
    for (const [queueId, set] of this.polls) {
      for (const poll of set) {
        if (poll.state === 'waiting') {
          ids.push(queueId);
          break;
        }
      }
    }
    return ids;
  }

  /** Long polls waiting now (parked between their turns). */
  get waiting(): number {
    return this.parked;
  }

  /** Long polls registered now (waiting, or in a turn), what `MAX_WAITING_POLLS` bounds. */
  get registeredPolls(): number {
    return this.registered;
  }

  /** @internal */
  countWakeUp(cause: WakeCause): void {
    this.wakeUps[cause] += 1;
  }

  /** @internal */
  remove(poll: Poll): void {
    const polls = poll.byPrefix ? this.prefixPolls : this.polls;
    const set = polls.get(poll.queueId);
    if (!set?.delete(poll)) return;
    this.registered -= 1;
    if (set.size > 0) return;
    polls.delete(poll.queueId);
    if (!poll.byPrefix) return;
    const left = this.prefixLengths.get(poll.queueId.length)! - 1;
    if (left === 0) this.prefixLengths.delete(poll.queueId.length);
    else this.prefixLengths.set(poll.queueId.length, left);
  }

  onModuleDestroy(): void {
    this.closed = true;
    for (const polls of [this.polls, this.prefixPolls]) for (const set of polls.values()) for (const poll of set) poll.end('closed');
  }
}
