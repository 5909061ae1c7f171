import { describe, expect, it } from 'vitest';
import { QueueCore } from './queue-core.js';
import { TurnState } from './turn-state.js';
import { Needed } from './types.js';

const SETTINGS = { segmentSize: 3, bufferSegments: 1 };

describe('TurnState', () => {
  it('starts empty: nothing to write, nothing read', () => {
    const turn = new TurnState();
    expect(turn.writes.isEmpty).toBe(true);
    expect([turn.dedupLive.size, turn.lockRows.size, turn.returnedCache.size, turn.peeked.size]).toEqual([0, 0, 0, 0]);
    turn.touch();
    expect(turn.writes.isEmpty).toBe(false);
  });

  it('what one turn read is not trusted in the next: a committed core asks again', () => {
    const core = QueueCore.fromRecord({ version: 1, settings: { ...SETTINGS, lockMode: 'shared' }, priorities: {}, lock: null });
    expect(core.push([{ priority: 0, json: '1', dedupId: 'a' }], 0, 1000)).toBeInstanceOf(Needed);
    core.provideDedupIds(['a', 'b'], new Set());
    core.provideLockRows({ kind: 'locks', locks: new Map([['L', null]]) });
    expect(core.checkLock('L', 0)).toBe('LOCK_NOT_FOUND');
    expect(
      core.push(
        [
          { priority: 0, json: '1', dedupId: 'b' },
          { priority: 0, json: '2', dedupId: 'a' },
        ],
        0,
        1000,
      ),
    ).toMatchObject({ enqueued: 2 });
    core.committed(core.pendingWrite(() => 1));
    expect(core.checkLock('L', 0)).toBeInstanceOf(Needed);
    expect(core.push([{ priority: 0, json: '3', dedupId: 'a' }], 0, 1000)).toBeInstanceOf(Needed);
  });
});
