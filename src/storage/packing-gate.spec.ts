import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { AppConfig } from '../config/app-config.js';
import type { DatabaseProvider } from '../database/database.provider.js';
import type { UnitOfWork } from '../database/unit-of-work.js';
import { PACKING_RECHECK_MS, PackingGate } from './packing-gate.js';

/** A gate over a database whose answers to "connections of the previous release?" are `answers`, in turn (an Error: the look fails). */
function gateOver(answers: (number | Error)[], packedSegments = true): { gate: PackingGate; looks: () => number } {
  let looks = 0;
  const uow = {
    autocommit: {
      query: vi.fn(() => {
        const answer = answers[Math.min(looks++, answers.length - 1)];
        return answer instanceof Error ? Promise.reject(answer) : Promise.resolve([{ n: answer }]);
      }),
    },
  } as unknown as UnitOfWork;
  const config = { env: { PACKED_SEGMENTS: packedSegments } } as AppConfig;
  const db = { ready: Promise.resolve() } as DatabaseProvider;
  return { gate: new PackingGate(config, db, uow), looks: () => looks };
}

describe('PackingGate', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('opens once the database is open when no connection of the previous release is there, and stays open', async () => {
    const { gate, looks } = gateOver([0, 3]);
    expect(gate.packing).toBe(false);
    await vi.advanceTimersByTimeAsync(0);
    expect(gate.packing).toBe(true);
    expect(await gate.look()).toBe(true);
    await vi.advanceTimersByTimeAsync(10 * PACKING_RECHECK_MS);
    expect(looks(), 'no look once open').toBe(1);
  });

  it('stays shut while such connections are there, looking again every recheck period until they are gone', async () => {
    const { gate, looks } = gateOver([2, 1, 0]);
    await vi.advanceTimersByTimeAsync(0);
    expect(gate.packing).toBe(false);
    await vi.advanceTimersByTimeAsync(PACKING_RECHECK_MS - 1);
    expect(looks()).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(looks()).toBe(2);
    expect(gate.packing).toBe(false);
    await vi.advanceTimersByTimeAsync(PACKING_RECHECK_MS);
    expect(looks()).toBe(3);
    expect(gate.packing).toBe(true);
  });

  it('a look that fails keeps the gate shut and is made again later', async () => {
    const { gate, looks } = gateOver([new Error('connection lost'), 0]);
    await vi.advanceTimersByTimeAsync(0);
    expect(gate.packing).toBe(false);
    await vi.advanceTimersByTimeAsync(PACKING_RECHECK_MS);
    expect(looks()).toBe(2);
    expect(gate.packing).toBe(true);
  });

  it('PACKED_SEGMENTS=false keeps it shut without looking', async () => {
    const { gate, looks } = gateOver([0], false);
    await vi.advanceTimersByTimeAsync(10 * PACKING_RECHECK_MS);
    expect(gate.packing).toBe(false);
    expect(looks()).toBe(0);
  });

  it('looks no more after shutdown', async () => {
    const { gate, looks } = gateOver([1]);
    await vi.advanceTimersByTimeAsync(0);
    gate.onApplicationShutdown();
    await vi.advanceTimersByTimeAsync(10 * PACKING_RECHECK_MS);
    expect(looks()).toBe(1);
  });
});
