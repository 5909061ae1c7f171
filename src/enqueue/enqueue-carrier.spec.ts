import { describe, expect, it } from 'vitest';
import type { AppConfig } from '../config/app-config.js';
import type { DatabaseProvider } from '../database/database.provider.js';
import type { ItemNotifications } from '../database/item-notifications.js';
import type { NewItem } from '../queue/core/types.js';
import type { EnqueuedRow, EnqueueInboxRepository } from '../storage/enqueue-inbox.repository.js';
import type { SweepClock } from '../sweeps/sweep-clock.js';
import { CARRY_BATCH, EnqueueCarrier, PUSH_MAX } from './enqueue-carrier.js';
import { EnqueueStats } from './enqueue-stats.js';
import type { TurnRunner } from '../queue/runtime/turn-runner.js';

/** A row as the inbox hands it over, in commit order by `seq` here. */
const row = (seq: number, queueId: string, extra: Partial<EnqueuedRow> = {}): EnqueuedRow => ({
  xid: String(1000 + Math.floor(seq / 10)),
  seq: String(seq),
  queueId,
  item: JSON.stringify({ seq }),
  priority: 0,
  delayMs: 0,
  dedupId: null,
  headers: null,
  ...extra,
});

/**
 * The carrier over an inbox holding `rows` (the lock taken unless `locked`), pushing through
 * `append`; a push runs its statements in commit (the deletion of its rows) once `append`
 * resolved, as a turn does after its write.
 */
function carrierOver(rows: EnqueuedRow[], append: (queueId: string, items: readonly NewItem[]) => Promise<unknown>, locked = false, gatherMs = 0) {
  const inbox = {
    rows: [...rows],
    /** Rows deleted, by a push's commit or by the carriage. */
    removed: [] as string[],
    /** Rows deleted by the carriage itself (dropped ones). */
    droppedByCarriage: [] as string[],
    /** Transactions the carriages asked to forget once they have no row left. */
    forgotten: [] as string[],
    anyCommitted: async () => inbox.rows.length > 0,
    /** Looks after a carriage that found nothing; `committing` for as many looks as `committingLooks`. */
    committingLooks: 0,
    looks: 0,
    settled: async () => {
      inbox.looks += 1;
      if (inbox.committingLooks > 0) {
        inbox.committingLooks -= 1;
        return 'committing';
      }
      return inbox.rows.length > 0 ? 'rows' : 'idle';
    },
    underCarrierLock: async <T>(fn: (session: unknown) => Promise<T>) => (locked ? undefined : fn({})),
    next: async (_session: unknown, limit: number) => {
      const rows = inbox.rows.slice(0, limit);
      return { rows, xids: [...new Set(rows.map((r) => r.xid))] };
    },
    claim: (part: readonly Pick<EnqueuedRow, 'seq'>[]) => async () => {
      const seqs = new Set(part.map((d) => d.seq));
      const left = inbox.rows.filter((r) => !seqs.has(r.seq));
      if (inbox.rows.length - left.length !== seqs.size) throw new Error('carried already');
      inbox.removed.push(...seqs);
      inbox.rows = left;
    },
    remove: async (_session: unknown, dropped: readonly Pick<EnqueuedRow, 'seq'>[], xids: readonly string[]) => {
      const seqs = new Set(dropped.map((d) => d.seq));
      inbox.removed.push(...seqs);
      inbox.droppedByCarriage.push(...seqs);
      inbox.rows = inbox.rows.filter((r) => !seqs.has(r.seq));
      inbox.forgotten.push(...xids);
    },
  };
  const stats = new EnqueueStats();
  const carrier = new EnqueueCarrier(
    { env: { MAX_ITEM_BYTES: 1000, MAX_PRIORITY: 9, ENQUEUE_GATHER_MS: gatherMs } } as AppConfig,
    { ready: Promise.resolve() } as DatabaseProvider,
    inbox as unknown as EnqueueInboxRepository,
    {
      push: async (queueId: string, items: readonly NewItem[], inCommit?: (session: unknown) => Promise<void>) => {
        await append(queueId, items);
        await inCommit?.({});
      },
    } as unknown as TurnRunner,
    stats,
    { onItems: () => undefined, onListening: () => undefined } as unknown as ItemNotifications,
    { register: () => ({ stopped: false, stop: async () => undefined }) } as unknown as SweepClock,
  );
  return { carrier, inbox, stats };
}

describe('EnqueueCarrier', () => {
  it('pushes each queue’s rows as one push in commit order, whose commit deletes them; a dedup id only where the row has one', async () => {
    const pushes: [string, NewItem[]][] = [];
    const { carrier, inbox, stats } = carrierOver(
      [row(1, 'a'), row(2, 'b', { dedupId: 'order-2', priority: 3, delayMs: 1500, headers: '{"tenant": "acme"}' }), row(3, 'a')],
      async (queueId, items) => void pushes.push([queueId, [...items]]),
    );
    expect(await carrier.carry()).toEqual({ taken: 3, removed: 3 });
    expect(pushes).toEqual([
      [
        'a',
        [
          { priority: 0, json: '{"seq":1}', delayMs: 0 },
          { priority: 0, json: '{"seq":3}', delayMs: 0 },
        ],
      ],
      ['b', [{ priority: 3, json: '{"seq":2}', headers: '{"tenant":"acme"}', delayMs: 1500, dedupId: 'order-2' }]],
    ]);
    expect(inbox.rows).toEqual([]);
    expect(inbox.droppedByCarriage).toEqual([]);
    expect(inbox.forgotten).toEqual(['1000']);
    expect(stats.rowsCarried).toBe(3);
  });

  it('rows are deleted only by the commit of the push that carries them: a push that never committed leaves them all', async () => {
    const { carrier, inbox } = carrierOver([row(1, 'a'), row(2, 'a'), row(3, 'b')], async (queueId) => {
      // The turn failed before its commit (its write lost, the connection gone): its statements in commit never ran.
      if (queueId === 'a') throw new Error('connection terminated');
    });
    expect(await carrier.carry()).toEqual({ taken: 3, removed: 1 });
    expect(inbox.rows.map((r) => r.seq)).toEqual(['1', '2']);
    expect(inbox.droppedByCarriage).toEqual([]);
  });

  it('a push whose rows another carriage carried meanwhile fails in its commit and counts nothing', async () => {
    const { carrier, inbox, stats } = carrierOver([row(1, 'a'), row(2, 'a')], async () => {
      // Another carriage's push committed these rows' deletion first.
      inbox.rows = inbox.rows.filter((r) => r.seq !== '2');
    });
    expect(await carrier.carry()).toEqual({ taken: 2, removed: 0 });
    expect(stats.rowsCarried).toBe(0);
    expect(inbox.rows.map((r) => r.seq)).toEqual(['1']);
  });

  it('a queue whose push fails keeps all its rows for the next carriage; the other queues’ rows go', async () => {
    const { carrier, inbox } = carrierOver([row(1, 'a'), row(2, 'b'), row(3, 'a'), row(4, 'b')], async (queueId) => {
      if (queueId === 'a') throw new Error('too many operations are waiting on queue a');
    });
    await carrier.carry();
    expect(inbox.removed.sort()).toEqual(['2', '4']);
    expect(inbox.rows.map((r) => r.seq)).toEqual(['1', '3']);
  });

  it('a queue’s share above a push’s weight goes in several pushes in order; one failing keeps it and the later ones', async () => {
    const sizes: number[] = [];
    const { carrier, inbox } = carrierOver(
      Array.from({ length: 2 * PUSH_MAX + 500 }, (_, i) => row(i, 'a')),
      async (_q, items) => {
        sizes.push(items.length);
        if (sizes.length === 2) throw new Error('too many operations are waiting on queue a');
      },
    );
    expect(await carrier.carry()).toEqual({ taken: 2 * PUSH_MAX + 500, removed: PUSH_MAX });
    expect(sizes).toEqual([PUSH_MAX, PUSH_MAX]);
    expect(inbox.rows.map((r) => Number(r.seq))).toEqual(Array.from({ length: PUSH_MAX + 500 }, (_, i) => PUSH_MAX + i));
  });

  it('a row this process cannot push (past its limits) is dropped with the carriage, not left to hold up its queue', async () => {
    const pushes: NewItem[][] = [];
    const { carrier, inbox, stats } = carrierOver(
      [row(1, 'a', { priority: 10 }), row(2, 'a', { item: JSON.stringify({ s: 'x'.repeat(1000) }) }), row(3, 'a')],
      async (_q, items) => void pushes.push([...items]),
    );
    await carrier.carry();
    expect(pushes.map((items) => items.map((i) => i.json))).toEqual([['{"seq":3}']]);
    expect(inbox.rows).toEqual([]);
    // deleted with the push of their queue's part
    expect(inbox.droppedByCarriage).toEqual([]);
    expect(stats.rowsDropped).toBe(2);
  });

  it('a part none of whose rows this process can push is deleted by the carriage itself', async () => {
    const pushes: NewItem[][] = [];
    const { carrier, inbox, stats } = carrierOver([row(1, 'a', { priority: 10 }), row(2, 'b')], async (_q, items) => void pushes.push([...items]));
    expect(await carrier.carry()).toEqual({ taken: 2, removed: 2 });
    expect(pushes.map((items) => items.map((i) => i.json))).toEqual([['{"seq":2}']]);
    expect(inbox.droppedByCarriage).toEqual(['1']);
    expect(inbox.rows).toEqual([]);
    expect(stats.rowsDropped).toBe(1);
  });

  it('nothing is pushed while another carriage holds the carrier lock; a carriage takes at most a batch', async () => {
    let pushed = 0;
    const rows = Array.from({ length: CARRY_BATCH + 5 }, (_, i) => row(i, `q${i % 7}`));
    const locked = carrierOver(rows, async (_q, items) => void (pushed += items.length), true);
    expect(await locked.carrier.carry()).toBeUndefined();
    expect(pushed).toBe(0);
    const free = carrierOver(rows, async (_q, items) => void (pushed += items.length));
    expect(await free.carrier.carry()).toEqual({ taken: CARRY_BATCH, removed: CARRY_BATCH });
    expect(await free.carrier.carry()).toEqual({ taken: 5, removed: 5 });
    expect(await free.carrier.carry()).toEqual({ taken: 0, removed: 0 });
    expect(pushed).toBe(CARRY_BATCH + 5);
    expect(free.inbox.rows).toEqual([]);
  });

  /** Wakes the carrier and waits until its carrying has stopped. */
  const carried = async (carrier: EnqueueCarrier): Promise<void> => {
    carrier.wake();
    await (carrier as unknown as { active?: Promise<void> }).active;
  };

  it('woken, it carries again at once while carriages find rows, and stops only once a look finds nothing waiting and nothing committing', async () => {
    const rows = Array.from({ length: 2 * CARRY_BATCH + 1 }, (_, i) => row(i, 'a'));
    const { carrier, inbox } = carrierOver(rows, async () => undefined);
    inbox.committingLooks = 3;
    await carried(carrier);
    expect(inbox.rows).toEqual([]);
    // three carriages took rows, then a look per commit under way and the one that found none
    expect(inbox.looks).toBe(4);
  });

  it('rows committed between its last carriage and its look are carried before it stops', async () => {
    const { carrier, inbox } = carrierOver([], async () => undefined);
    const settled = inbox.settled;
    let late = true;
    inbox.settled = async () => {
      if (late) {
        late = false;
        inbox.rows.push(row(7, 'a'));
      }
      return settled();
    };
    await carried(carrier);
    expect(inbox.rows).toEqual([]);
    expect(inbox.removed).toEqual(['7']);
  });

  it('with ENQUEUE_GATHER_MS, a carriage that moved rows is followed by the next no sooner than that after its start, which takes what committed meanwhile at once', async () => {
    const starts: number[] = [];
    const pushed: number[] = [];
    const { carrier, inbox } = carrierOver([row(1, 'a'), row(2, 'b')], async (_queueId, items) => void pushed.push(items.length), false, 40);
    const next = inbox.next;
    inbox.next = async (session, limit) => {
      starts.push(performance.now());
      const taken = await next(session, limit);
      // Commits that land once the first carriage has read its rows.
      if (starts.length === 1) inbox.rows.push(row(3, 'a'), row(4, 'a'), row(5, 'b'));
      return taken;
    };
    await carried(carrier);
    expect(inbox.rows).toEqual([]);
    expect(starts.length).toBe(3);
    expect(starts[1] - starts[0]).toBeGreaterThanOrEqual(35);
    // The second carriage took the three rows (one push per queue); the third, as late after it, found none and the carrier stopped.
    expect(pushed).toEqual([1, 1, 2, 1]);
    expect(starts[2] - starts[1]).toBeGreaterThanOrEqual(35);
    expect(inbox.looks).toBe(1);
  });

  it('closing ends the wait between carriages at once', async () => {
    const { carrier, inbox } = carrierOver([row(1, 'a')], async () => undefined, false, 60_000);
    carrier.wake();
    while (inbox.rows.length > 0) await new Promise((resolve) => setTimeout(resolve, 1));
    const started = performance.now();
    await carrier.onModuleDestroy();
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('a queue whose push keeps failing is tried again after a growing pause, not in a busy loop', async () => {
    let attempts = 0;
    const { carrier, inbox } = carrierOver([row(1, 'a')], async () => {
      attempts += 1;
      if (attempts < 4) throw new Error('too many operations are waiting on queue a');
    });
    const started = Date.now();
    await carried(carrier);
    expect(inbox.rows).toEqual([]);
    expect(attempts).toBe(4);
    // pauses of 2, 4 and 8 ms between the four attempts
    expect(Date.now() - started).toBeGreaterThanOrEqual(14);
  });

  it('while another process holds the carrier lock it stops at once: that process looks again after its carriage', async () => {
    const { carrier, inbox } = carrierOver([row(1, 'a')], async () => undefined, true);
    await carried(carrier);
    expect(inbox.rows.length).toBe(1);
    expect(inbox.looks).toBe(0);
  });
});
