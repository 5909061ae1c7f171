import { describe, expect, it } from 'vitest';
import { QueueCore } from '../core/queue-core.js';
import { decodeQueueState, encodeQueueState } from './queue-state-payload.js';

function pushedCore(): QueueCore {
  const core = QueueCore.absent({ segmentSize: 100, bufferSegments: 1 });
  core.push(
    [
      { priority: 0, json: '{"n":1}' },
      { priority: 3, json: '"x"' },
    ],
    0,
    0,
  );
  const write = core.pendingWrite(() => 123_456_789);
  core.committed(write);
  return core;
}

describe('queue state payloads', () => {
  it('carry a queue id and the state a load would read, and start with { (no queue id does)', () => {
    const payload = encodeQueueState('orders:eu', pushedCore().snapshot()!);
    expect(payload.startsWith('{')).toBe(true);
    const decoded = decodeQueueState(payload)!;
    expect(decoded.queueId).toBe('orders:eu');
    expect(decoded.state.queue.version).toBe(123_456_789);
    expect(decoded.state.front).toEqual({ priority: 0, segment: 0, entries: [{ position: 0, json: '{"n":1}' }] });
    const again = QueueCore.fromRecord(decoded.state.queue);
    again.provide({ priority: 0, segment: 0, from: 'state', purpose: 'use' }, { entries: decoded.state.front!.entries });
    expect(again.pop(1, 0)).toMatchObject({ items: [{ priority: 0, json: '{"n":1}' }] });
  });

  it('anything else decodes to nothing: another form, a bad queue id, a lock, broken rows, not JSON', () => {
    const good = JSON.parse(encodeQueueState('q', pushedCore().snapshot()!)) as {
      v: number;
      q: string;
      s: { queue: Record<string, unknown>; front: { entries: unknown[] } };
    };
    const variant = (change: (p: typeof good) => void): string => {
      const copy = structuredClone(good);
      change(copy);
      return JSON.stringify(copy);
    };
    expect(decodeQueueState(JSON.stringify(good))).toBeDefined();
    for (const payload of [
      'q',
      '{not json',
      variant((p) => (p.v = 2)),
      variant((p) => (p.q = '../x')),
      variant((p) => (p.s.queue.lock = { lockId: 'L' })),
      variant((p) => (p.s.queue.version = 1.5)),
      variant((p) => (p.s.front.entries = [{ position: 0 }])),
      variant((p) => delete (p.s as Partial<typeof p.s>).front),
    ]) {
      expect(decodeQueueState(payload), payload.slice(0, 80)).toBeUndefined();
    }
  });
});
