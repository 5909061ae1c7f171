import { describe, expect, it } from 'vitest';
import { PrioritySegments } from './priority-segments.js';
import { TurnState, type CoreContext } from './turn-state.js';
import type { HeldItem, PriorityMetadata, QueueSettings } from './types.js';

/** A context of one turn, as the core gives its parts. */
function context(settings: QueueSettings = { segmentSize: 3, bufferSegments: 1 }): CoreContext & { present: boolean } {
  return {
    settings,
    turn: new TurnState(),
    present: false,
    markPresent() {
      this.present = true;
    },
  };
}

const stored = (meta: Partial<PriorityMetadata>): PriorityMetadata => ({
  count: 0,
  head_segment: 0,
  tail_segment: 0,
  head_offloaded_segment: null,
  tail_offloaded_segment: null,
  next_position: 0,
  head_position: 0,
  ...meta,
});

describe('PrioritySegments', () => {
  it('append: items fill the tail segment, a full tail gets a successor; the rows go to the write set', () => {
    const ctx = context();
    const segments = new PrioritySegments(ctx);
    for (const n of [0, 1, 2, 3]) segments.append(5, `"${n}"`);
    expect(segments.get(5)).toMatchObject({ count: 4, head_segment: 0, tail_segment: 1, next_position: 1 });
    expect(segments.list()).toEqual([5]);
    expect(segments.cachedSegments(5)).toEqual([0, 1]);
    expect(segments.itemsInMemory).toBe(4);
    expect(ctx.turn.writes.insertRows().map((r) => [r.segment, r.position, r.json])).toEqual([
      [0, 0, '"0"'],
      [0, 1, '"1"'],
      [0, 2, '"2"'],
      [1, 0, '"3"'],
    ]);
    expect([...ctx.turn.pushed]).toEqual([5]);
  });

  it('take: items leave the head in order; an emptied head segment goes and the head moves on; the last item drops the priority', () => {
    const ctx = context();
    const segments = new PrioritySegments(ctx);
    for (const n of [0, 1, 2, 3]) segments.append(0, `"${n}"`);
    const items: HeldItem[] = [];
    segments.take({ priority: 0, segment: 0, take: 3 }, items, false);
    expect(items.map((i) => [i.json, i.origin])).toEqual([
      ['"0"', { segment: 0, position: 0 }],
      ['"1"', { segment: 0, position: 1 }],
      ['"2"', { segment: 0, position: 2 }],
    ]);
    expect(segments.get(0)).toMatchObject({ count: 1, head_segment: 1, head_position: 0 });
    segments.take({ priority: 0, segment: 1, take: 1 }, items, false);
    expect(segments.get(0)).toBeUndefined();
    expect(segments.list()).toEqual([]);
    expect(segments.itemsInMemory).toBe(0);
  });

  it('returnToFront: items go ahead of everything queued at their priority, in the order given, below the head position', () => {
    const ctx = context();
    const segments = new PrioritySegments(ctx);
    segments.append(0, '"c"');
    const popped: HeldItem[] = [];
    segments.take({ priority: 0, segment: 0, take: 1 }, popped, true);
    segments.append(0, '"d"');
    segments.returnToFront([
      { priority: 0, json: '"a"' },
      { priority: 0, json: '"b"' },
    ]);
    const meta = segments.get(0)!;
    expect(meta.count).toBe(3);
    expect(meta.head_position).toBe(-1);
    const seg = segments.cached(0, meta.head_segment)!;
    expect(seg.entries.slice(seg.offset).map((e) => [e.position, e.json])).toEqual([
      [-1, '"a"'],
      [0, '"b"'],
      [1, '"d"'],
    ]);
    expect(ctx.present).toBe(true);
  });

  it("provide: a segment read from the table is merged with the turn's pending deletes and inserts", () => {
    const ctx = context({ segmentSize: 4, bufferSegments: 1 });
    const segments = new PrioritySegments(ctx, { '0': stored({ count: 3, next_position: 3 }) });
    // The turn pushes one more item before the segment is read (the tail it did not hold).
    segments.append(0, '"3"');
    ctx.turn.writes.deleteRange(0, 0, 0, 0);
    segments.provide(
      { priority: 0, segment: 0, from: 'state', purpose: 'use' },
      { entries: [0, 1, 2].map((position) => ({ position, json: `"${position}"` })) },
    );
    expect(segments.cached(0, 0)!.entries.map((e) => e.json)).toEqual(['"1"', '"2"', '"3"']);
  });

  it('evictOutsideWindow keeps the head, buffer_segments after it and the tail; expectedCount follows the pointers', () => {
    const ctx = context({ segmentSize: 2, bufferSegments: 1 });
    const segments = new PrioritySegments(ctx);
    for (let n = 0; n < 9; n++) segments.append(0, `"${n}"`);
    expect(segments.cachedSegments(0)).toEqual([0, 1, 2, 3, 4]);
    segments.evictOutsideWindow();
    expect(segments.cachedSegments(0)).toEqual([0, 1, 4]);
    const meta = segments.get(0)!;
    expect([0, 1, 2, 3, 4].map((s) => segments.expectedCount(meta, s))).toEqual([2, 2, 2, 2, 1]);
  });

  it('provide: a segment loaded back from the store is written packed, not as rows, and its store copy deleted', () => {
    const ctx = context({ segmentSize: 2, bufferSegments: 1 });
    const segments = new PrioritySegments(ctx, {
      '0': stored({ count: 8, head_segment: 0, tail_segment: 3, head_offloaded_segment: 1, tail_offloaded_segment: 2, next_position: 2 }),
    });
    // The table's rows of the offloaded segment (none), then the store's copy.
    segments.provide({ priority: 0, segment: 1, from: 'state', purpose: 'use' }, { entries: [] });
    segments.provide(
      { priority: 0, segment: 1, from: 'offload', purpose: 'use' },
      { entries: [0, 1].map((position) => ({ position, json: `"${position}"` })) },
    );
    expect(ctx.turn.writes.packRows()).toEqual([{ priority: 0, segment: 1, items: ['"0"', '"1"'] }]);
    expect(ctx.turn.writes.insertRows()).toEqual([]);
    expect(ctx.turn.writes.storeDeletes).toEqual([{ priority: 0, segment: 1 }]);
    expect(segments.get(0)).toMatchObject({ head_offloaded_segment: 2, tail_offloaded_segment: 2 });
    expect(segments.cached(0, 1)!.entries.map((e) => e.json)).toEqual(['"0"', '"1"']);
  });

  it("provide: a packed head read from the table leaves out the items below the head's position; a row at a packed item's position stands", () => {
    const ctx = context({ segmentSize: 4, bufferSegments: 1 });
    // Head segment 2, popped through position 1, then two items given back at positions 0 and 1.
    const segments = new PrioritySegments(ctx, {
      '0': stored({ count: 8, head_segment: 2, tail_segment: 3, head_position: 0, next_position: 2 }),
    });
    // What the repository reads: the given-back rows at 0 and 1 (standing for the packed items there), packed items 2 and 3.
    const read = [
      { position: 0, json: '"g0"', deliveries: 1 },
      { position: 1, json: '"g1"', deliveries: 1 },
      { position: 2, json: '"2"' },
      { position: 3, json: '"3"' },
    ];
    segments.provide({ priority: 0, segment: 2, from: 'state', purpose: 'use' }, { entries: read });
    expect(segments.cached(0, 2)!.entries.map((e) => e.json)).toEqual(['"g0"', '"g1"', '"2"', '"3"']);

    // Popped through position 2 (no rows at 0..1 any more): the packed row still holds 0..3.
    const popped = new PrioritySegments(context({ segmentSize: 4, bufferSegments: 1 }), {
      '0': stored({ count: 3, head_segment: 2, tail_segment: 3, head_position: 3, next_position: 2 }),
    });
    const packed = [0, 1, 2, 3].map((position) => ({ position, json: `"${position}"` }));
    popped.provide({ priority: 0, segment: 2, from: 'state', purpose: 'use' }, { entries: packed });
    expect(popped.cached(0, 2)!.entries.map((e) => e.json)).toEqual(['"3"']);
    // A segment after the head keeps every item it holds.
    popped.provide({ priority: 0, segment: 3, from: 'state', purpose: 'peek' }, { entries: packed.slice(0, 2) });
    expect(popped.peek({ priority: 0, segment: 3, from: 'state', purpose: 'peek' })).toEqual({ entries: packed.slice(0, 2) });
  });

  it('provide: a segment packed earlier in the turn and peeked from the table shows the packed items not popped since', () => {
    const ctx = context({ segmentSize: 2, bufferSegments: 1 });
    const segments = new PrioritySegments(ctx, {
      '0': stored({ count: 6, head_segment: 1, tail_segment: 3, head_offloaded_segment: 2, tail_offloaded_segment: 2, next_position: 2 }),
    });
    segments.provide({ priority: 0, segment: 2, from: 'state', purpose: 'use' }, { entries: [] });
    segments.provide(
      { priority: 0, segment: 2, from: 'offload', purpose: 'use' },
      { entries: [0, 1].map((position) => ({ position, json: `"${position}"` })) },
    );
    ctx.turn.writes.deleteRange(0, 2, 0, 0);
    // The table does not have the pack yet.
    segments.provide({ priority: 0, segment: 2, from: 'state', purpose: 'peek' }, { entries: [] });
    expect(segments.peek({ priority: 0, segment: 2, from: 'state', purpose: 'peek' })).toEqual({ entries: [{ position: 1, json: '"1"' }] });
  });
});
