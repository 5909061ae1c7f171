import { describe, expect, it } from 'vitest';
import type { LoadedQueue } from '../../database/stored-queue.js';
import type { QueueStateRepository } from '../../storage/queue-state.repository.js';
import { OFFERED_STATE_TTL_MS, QueueLoads } from './queue-loads.js';

const state = (version: number): LoadedQueue => ({
  queue: {
    version,
    settings: { segmentSize: 10, bufferSegments: 1 },
    priorities: {},
    lock: null,
    delayed: { count: 0, nextDueAt: null, nextSeq: 0 },
    shared: { live: 0, items: 0, nextExpiry: null },
  },
});

describe('QueueLoads: states offered by other processes', () => {
  const loads = (): QueueLoads => new QueueLoads({} as QueueStateRepository);

  it('gives an offered state once, the newest offer winning', () => {
    const l = loads();
    l.offer('q', state(1), 1000);
    l.offer('q', state(2), 1001);
    expect(l.hasOffered('q')).toBe(true);
    expect(l.take('q', 1002)?.queue.version).toBe(2);
    expect(l.take('q', 1002)).toBeUndefined();
    expect(l.hasOffered('q')).toBe(false);
    expect(l.take('other', 1002)).toBeUndefined();
    expect({ offered: l.statesOffered, taken: l.statesTaken }).toEqual({ offered: 2, taken: 1 });
  });

  it('does not give a state older than the TTL, and forgets old ones as new ones come', () => {
    const l = loads();
    l.offer('old', state(1), 0);
    expect(l.take('old', OFFERED_STATE_TTL_MS + 1)).toBeUndefined();
    l.offer('a', state(1), 0);
    l.offer('b', state(2), OFFERED_STATE_TTL_MS + 1);
    expect(l.offeredStates, 'the expired one went when the new one came').toBe(1);
    expect(l.take('b', OFFERED_STATE_TTL_MS + 2)?.queue.version).toBe(2);
  });

  it('keeps at most 2,000, forgetting the oldest', () => {
    const l = loads();
    for (let i = 0; i < 2_500; i++) l.offer(`q${i}`, state(i), 5);
    expect(l.offeredStates).toBe(2_000);
    expect(l.take('q0', 5)).toBeUndefined();
    expect(l.take('q2499', 5)?.queue.version).toBe(2499);
  });
});
