import { describe, expect, it } from 'vitest';
import { GivenBackItems } from './given-back-items.js';
import { PrioritySegments } from './priority-segments.js';
import { QueueFront } from './queue-front.js';
import { TurnState, type CoreContext } from './turn-state.js';
import { DelayedItems } from './delayed-items.js';
import { Needed, type HeldItem, type PriorityMetadata } from './types.js';

function front(stored: Record<string, PriorityMetadata> = {}): { ctx: CoreContext; segments: PrioritySegments; front: QueueFront } {
  const ctx: CoreContext = { settings: { segmentSize: 2, bufferSegments: 1 }, turn: new TurnState(), markPresent: () => undefined };
  const segments = new PrioritySegments(ctx, stored);
  return { ctx, segments, front: new QueueFront(ctx, segments, new GivenBackItems(ctx, segments, new DelayedItems(ctx, segments))) };
}

const jsons = (items: readonly HeldItem[]): string[] => items.map((i) => i.json);

describe('QueueFront', () => {
  it('takes the lowest priority first, FIFO within it, spilling over segments and into the next priority', () => {
    const { segments, front: f } = front();
    for (const [p, n] of [
      [2, 0],
      [1, 0],
      [1, 1],
      [1, 2],
      [2, 1],
    ]) {
      segments.append(p, `"${p}.${n}"`);
    }
    const items: HeldItem[] = [];
    expect(f.take(4, items, undefined)).toBeUndefined();
    expect(jsons(items)).toEqual(['"1.0"', '"1.1"', '"1.2"', '"2.0"']);
    expect(segments.list()).toEqual([2]);
  });

  it('a segment not in memory: asks for it before taking anything', () => {
    const meta: PriorityMetadata = {
      count: 2,
      head_segment: 0,
      tail_segment: 0,
      head_offloaded_segment: null,
      tail_offloaded_segment: null,
      next_position: 2,
      head_position: 0,
    };
    const { ctx, segments, front: f } = front({ '0': meta });
    const items: HeldItem[] = [];
    expect(f.take(1, items, undefined)).toBeInstanceOf(Needed);
    expect(items).toEqual([]);
    expect(segments.get(0)).toEqual(meta);
    expect(ctx.turn.writes.isEmpty).toBe(true);
  });

  it('stops at a segment that could not be loaded, and says which', () => {
    const meta: PriorityMetadata = {
      count: 4,
      head_segment: 0,
      tail_segment: 1,
      head_offloaded_segment: 0,
      tail_offloaded_segment: 0,
      next_position: 2,
      head_position: 0,
    };
    const { segments, front: f } = front({ '0': meta });
    segments.provide({ priority: 0, segment: 0, from: 'state', purpose: 'use' }, { entries: [] });
    segments.provide({ priority: 0, segment: 0, from: 'offload', purpose: 'use' }, { failed: true });
    const items: HeldItem[] = [];
    expect(f.take(3, items, undefined)).toEqual({ priority: 0, segment: 0 });
    expect(items).toEqual([]);
  });

  it('for a shared lock: counts what it takes per priority, and an emptied priority keeps its entry', () => {
    const { segments, front: f } = front();
    segments.append(0, '"a"');
    const items: HeldItem[] = [];
    const heldAfter = new Map<number, number>();
    f.take(5, items, heldAfter);
    expect(jsons(items)).toEqual(['"a"']);
    expect([...heldAfter]).toEqual([[0, 1]]);
    expect(segments.get(0)).toMatchObject({ count: 0 });
  });
});
