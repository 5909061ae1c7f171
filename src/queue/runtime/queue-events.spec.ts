import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { AppConfig } from '../../config/app-config.js';
import { parseEnvironment } from '../../config/environment.js';
import { QueueEvents, type LongPoll, type WaitEnd } from './queue-events.js';

const events = (maxWaiting = 10_000): QueueEvents => new QueueEvents(new AppConfig(parseEnvironment({ MAX_WAITING_POLLS: String(maxWaiting) })));

/** A poll parked in its wait, and how its wait ended once it has. */
function parked(poll: LongPoll, ms = 10_000): { ended: () => WaitEnd | undefined; promise: Promise<WaitEnd> } {
  let end: WaitEnd | undefined;
  const promise = poll.wait(ms).then((e) => (end = e));
  return { ended: () => end, promise };
}

const flush = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('QueueEvents', () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] }));
  afterEach(() => vi.useRealTimers());

  it('wakes as many waiting polls as items arrived, the longest waiting first; the others keep waiting', async () => {
    const e = events();
    const polls = [0, 1, 2].map(() => e.register('q')!);
    const waits = polls.map((p) => parked(p));
    expect(e.wake('q', 2, 'local')).toBe(2);
    await flush();
    expect(waits.map((w) => w.ended())).toEqual(['woken', 'woken', undefined]);
    expect(e.wakeUps).toEqual({ local: 2, notification: 0, recheck: 0 });
  });

  it('a wake-up of another queue wakes nobody', async () => {
    const e = events();
    const w = parked(e.register('a')!);
    expect(e.wake('b', 5, 'notification')).toBe(0);
    await flush();
    expect(w.ended()).toBeUndefined();
  });

  it('a wake-up during a turn is not lost: the next wait ends at once', async () => {
    const e = events();
    const poll = e.register('q')!;
    // the poll is in its first turn (not waiting): the wake-up is remembered, not counted against the items
    expect(e.wake('q', 1, 'notification')).toBe(0);
    expect(await poll.wait(10_000)).toBe('woken');
    expect(e.wakeUps.notification).toBe(1);
    // consumed: the wait after that one waits
    const w = parked(poll);
    await flush();
    expect(w.ended()).toBeUndefined();
  });

  it('a poll woken and back in a turn does not take a second wake-up meant for a waiting one', async () => {
    const e = events();
    const first = e.register('q')!;
    const second = e.register('q')!;
    const a = parked(first);
    const b = parked(second);
    e.wake('q', 1, 'local');
    await flush();
    expect(a.ended()).toBe('woken');
    // `first` is in its turn now; one more item wakes `second`
    expect(e.wake('q', 1, 'local')).toBe(1);
    await flush();
    expect(b.ended()).toBe('woken');
  });

  it('ends a wait at its deadline', async () => {
    const e = events();
    const w = parked(e.register('q')!, 1000);
    await vi.advanceTimersByTimeAsync(999);
    expect(w.ended()).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(w.ended()).toBe('timeout');
  });

  it('lists the queues with a poll waiting, not those whose polls are in a turn', () => {
    const e = events();
    void parked(e.register('a')!);
    e.register('b');
    void parked(e.register('c')!);
    expect(e.waitingQueues().sort()).toEqual(['a', 'c']);
  });

  it('counts registered polls and those waiting, and forgets closed ones', async () => {
    const e = events();
    const a = e.register('q')!;
    const b = e.register('q')!;
    expect(e.registeredPolls).toBe(2);
    expect(e.waiting, 'both in their first turn').toBe(0);
    const waitA = parked(a);
    expect(e.waiting).toBe(1);
    a.close();
    a.close();
    await flush();
    expect(waitA.ended()).toBe('closed');
    expect(e.registeredPolls).toBe(1);
    expect(e.waiting).toBe(0);
    b.close();
    expect(e.registeredPolls).toBe(0);
    expect(e.waitingQueues()).toEqual([]);
    expect(e.wake('q', 1, 'local')).toBe(0);
  });

  it('refuses past MAX_WAITING_POLLS, counting the refusals, and takes polls again once some answered', () => {
    const e = events(2);
    const a = e.register('a')!;
    e.register('b');
    expect(e.register('c')).toBeUndefined();
    expect(e.register('d')).toBeUndefined();
    expect(e.refused).toBe(2);
    a.close();
    expect(e.register('c')).toBeDefined();
  });

  it('a poll whose client went away stops waiting, and waits no more', async () => {
    const e = events();
    const gone = new AbortController();
    const poll = e.register('q', gone.signal)!;
    const w = parked(poll);
    gone.abort();
    await flush();
    expect(w.ended()).toBe('closed');
    expect(e.waiting).toBe(0);
    expect(await poll.wait(10_000)).toBe('closed');
    expect(e.wake('q', 1, 'local')).toBe(0);
  });

  it('MAX_WAITING_POLLS=0 turns long polling off', () => {
    const e = events(0);
    expect(e.register('a')).toBeUndefined();
    expect(e.refused).toBe(1);
  });

  it('at shutdown answers every waiting poll at once, and registers none', async () => {
    const e = events();
    const waits = [e.register('a')!, e.register('a')!, e.register('b')!].map((p) => parked(p));
    const inTurn = e.register('c')!;
    e.onModuleDestroy();
    await flush();
    expect(waits.map((w) => w.ended())).toEqual(['closed', 'closed', 'closed']);
    expect(await inTurn.wait(10_000)).toBe('closed');
    expect(e.register('d')).toBeUndefined();
    expect(e.refused).toBe(0);
  });

  it('a queue waited on in vain stays quiet until any wake-up of it (with no poll waiting too), and marks are forgotten by age or all at once', () => {
    const e = events();
    const t0 = Date.now();
    const poll = e.register('q')!;
    expect(e.isQuiet('q', t0)).toBe(false);
    poll.waitedInVain();
    poll.close();
    expect(e.isQuiet('q', t0)).toBe(true);
    expect(e.isQuiet('q', Date.now() + 1), 'a mark older than asked for is not trusted').toBe(false);
    expect(e.isQuiet('other', t0)).toBe(false);
    // A turn of this process left items, or another process's push was heard: no poll waits, the mark goes.
    expect(e.wake('q', 1, 'notification')).toBe(0);
    expect(e.isQuiet('q', t0)).toBe(false);

    for (const id of ['a', 'b']) e.register(id)!.waitedInVain();
    e.forgetQuiet(t0 - 1);
    expect(e.isQuiet('a', t0) && e.isQuiet('b', t0), 'newer than the cut: kept').toBe(true);
    e.forgetQuiet(Date.now() + 1);
    expect(e.isQuiet('a', t0) || e.isQuiet('b', t0)).toBe(false);
    e.register('c')!.waitedInVain();
    e.forgetQuiet();
    expect(e.isQuiet('c', t0)).toBe(false);
  });

  describe('polls of fair pops on a prefix', () => {
    it('are woken by a wake-up of any queue whose id starts with the prefix, as many as items arrived, and by none other', async () => {
      const e = events();
      const [a, b, other] = [e.registerPrefix('tenant-')!, e.registerPrefix('tenant-')!, e.registerPrefix('tenant-2')!];
      const waits = [a, b, other].map((p) => parked(p));
      expect(e.wake('tenant', 5, 'local')).toBe(0);
      expect(e.wake('tenants-1', 5, 'local')).toBe(0);
      expect(e.wake('tenant-1', 1, 'notification')).toBe(1);
      await flush();
      expect(waits.map((w) => w.ended())).toEqual(['woken', undefined, undefined]);
      // A queue under both prefixes: up to as many as arrived, over both prefixes.
      expect(e.wake('tenant-2x', 2, 'local')).toBe(2);
      await flush();
      expect(waits.map((w) => w.ended())).toEqual(['woken', 'woken', 'woken']);
      expect(e.wakeUps).toEqual({ local: 2, notification: 1, recheck: 0 });
    });

    it('share a wake-up with the polls of the queue itself, each set up to the items that arrived', async () => {
      const e = events();
      const queuePoll = parked(e.register('t-1')!);
      const prefixPoll = parked(e.registerPrefix('t-')!);
      expect(e.wake('t-1', 1, 'local')).toBe(2);
      await flush();
      expect([queuePoll.ended(), prefixPoll.ended()]).toEqual(['woken', 'woken']);
    });

    it('a wake-up during its look is kept for its wait; closed, it is forgotten, and it counts against MAX_WAITING_POLLS', async () => {
      const e = events(2);
      const poll = e.registerPrefix('p-')!;
      e.wake('p-9', 1, 'local');
      expect(await poll.wait(10_000)).toBe('woken');
      const other = e.register('q')!;
      expect(e.registerPrefix('p-')).toBeUndefined();
      expect(e.refused).toBe(1);
      poll.close();
      other.close();
      expect(e.registeredPolls).toBe(0);
      expect(e.wake('p-9', 1, 'local')).toBe(0);
      // The prefix, gone with its last poll, is looked up no more; a new one of another length is.
      const next = parked(e.registerPrefix('p-9')!);
      expect(e.wake('p-9', 1, 'local')).toBe(1);
      await flush();
      expect(next.ended()).toBe('woken');
    });

    it('waiting in vain marks no queue quiet, and shutdown ends its wait', async () => {
      const e = events();
      const poll = e.registerPrefix('p-')!;
      poll.waitedInVain();
      expect(e.isQuiet('p-', 0)).toBe(false);
      const w = parked(poll);
      e.onModuleDestroy();
      expect(await w.promise).toBe('closed');
    });
  });
});
