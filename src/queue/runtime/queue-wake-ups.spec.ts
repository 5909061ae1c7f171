import { describe, expect, it } from 'vitest';
import type { DatabaseProvider } from '../../database/database.provider.js';
import type { ItemNotifications } from '../../database/item-notifications.js';
import type { QueueListingRepository } from '../../storage/queue-listing.repository.js';
import type { QueueCore } from '../core/queue-core.js';
import type { QueueEvents } from './queue-events.js';
import type { ActorRegistry } from './actor-registry.js';
import type { QueueLoads } from './queue-loads.js';
import { QueueWakeUps } from './queue-wake-ups.js';

interface Look {
  ids: string[];
  now: number;
  resolve(found: string[]): void;
  reject(error: Error): void;
}

/** QueueWakeUps with its first-look statement faked: each call is kept until the test answers it. */
function setUp(options: { ready?: boolean; actors?: Record<string, number> } = {}) {
  const looks: Look[] = [];
  const segments = {
    queuesToPopFrom: (ids: readonly string[], now: number) => new Promise<string[]>((resolve, reject) => looks.push({ ids: [...ids], now, resolve, reject })),
  } as unknown as QueueListingRepository;
  const registry = {
    peek: (queueId: string) => (options.actors && queueId in options.actors ? ({ count: options.actors[queueId] } as QueueCore) : undefined),
  } as unknown as ActorRegistry;
  const db = { isReady: options.ready ?? true } as DatabaseProvider;
  const clock = { now: () => 1_000 };
  const wakeUps = new QueueWakeUps({} as QueueEvents, {} as ItemNotifications, segments, db, registry, clock, {} as QueueLoads);
  return { wakeUps, looks };
}

const settled = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('QueueWakeUps.needsTurn (a long poll’s first look)', () => {
  it('sends the first look at once, and batches those asked for while it is in flight into one statement', async () => {
    const { wakeUps, looks } = setUp();
    const a = wakeUps.needsTurn('a');
    expect(looks.map((l) => l.ids)).toEqual([['a']]);
    const rest = ['b', 'c', 'b'].map((id) => wakeUps.needsTurn(id));
    expect(looks).toHaveLength(1);
    looks[0].resolve([]);
    expect(await a).toBe(false);
    await settled();
    expect(looks.map((l) => l.ids)).toEqual([['a'], ['b', 'c']]);
    expect(looks[1].now).toBe(1_000);
    looks[1].resolve(['c']);
    expect(await Promise.all(rest)).toEqual([false, true, false]);
    expect(wakeUps.lookStatements).toBe(2);
  });

  it('a failed look runs the turn (which reports the error), and the next looks are sent', async () => {
    const { wakeUps, looks } = setUp();
    const a = wakeUps.needsTurn('a');
    const b = wakeUps.needsTurn('b');
    looks[0].reject(new Error('connection lost'));
    expect(await a).toBe(true);
    await settled();
    looks[1].resolve([]);
    expect(await b).toBe(false);
  });

  it('no statement when the turn is cheaper or the only way: an actor in memory with items, a database not ready', async () => {
    const cached = setUp({ actors: { full: 3, empty: 0 } });
    expect(await cached.wakeUps.needsTurn('full')).toBe(true);
    expect(cached.looks).toHaveLength(0);
    void cached.wakeUps.needsTurn('empty');
    expect(cached.looks.map((l) => l.ids)).toEqual([['empty']]);
    const down = setUp({ ready: false });
    expect(await down.wakeUps.needsTurn('a')).toBe(true);
    expect(down.looks).toHaveLength(0);
  });

  it('asks about at most 1,000 queues per statement', async () => {
    const { wakeUps, looks } = setUp();
    const first = wakeUps.needsTurn('first');
    const many = Array.from({ length: 1_500 }, (_, i) => wakeUps.needsTurn(`q${i}`));
    looks[0].resolve([]);
    await first;
    await settled();
    expect(looks[1].ids).toHaveLength(1_000);
    looks[1].resolve(['q0']);
    await settled();
    expect(looks[2].ids).toHaveLength(500);
    looks[2].resolve([]);
    const answers = await Promise.all(many);
    expect(answers.filter(Boolean)).toHaveLength(1);
    expect(answers[0]).toBe(true);
  });
});
