import { describe, expect, it } from 'vitest';
import { changeSettings, CONTROL_DEFAULTS, lockModeOf, retryDelayMs, withControlDefaults } from './queue-settings.js';
import type { QueueSettings } from './types.js';

const CURRENT = { segmentSize: 100, bufferSegments: 2 };
const idle = { holdsAnything: false, lockLives: false };
const busy = { holdsAnything: true, lockLives: true };

describe('changeSettings', () => {
  it('absent fields stay as they are; the result names every field', () => {
    expect(changeSettings(CURRENT, { maxDeliveries: 3, deadLetterQueue: 'dead' }, idle)).toEqual({
      segmentSize: 100,
      bufferSegments: 2,
      lockMode: 'exclusive',
      maxDeliveries: 3,
      deadLetterQueue: 'dead',
      paused: false,
      retryDelaySeconds: 0,
      retryBackoff: 'exponential',
      retryDelayMaxSeconds: 900,
      maxInFlight: null,
      maxPopsPerSecond: null,
    });
    expect(changeSettings({ ...CURRENT, maxDeliveries: 3, deadLetterQueue: 'dead' }, { maxDeliveries: null }, idle)).toMatchObject({
      maxDeliveries: null,
      deadLetterQueue: 'dead',
    });
  });

  it('the segment layout changes only while the queue holds nothing and no lock lives; the same values are no change', () => {
    expect(changeSettings(CURRENT, { segmentSize: 10 }, { holdsAnything: true, lockLives: false })).toEqual({ refused: 'QUEUE_NOT_EMPTY' });
    expect(changeSettings(CURRENT, { bufferSegments: 1 }, { holdsAnything: false, lockLives: true })).toEqual({ refused: 'QUEUE_NOT_EMPTY' });
    expect(changeSettings(CURRENT, { segmentSize: 100, bufferSegments: 2 }, { holdsAnything: true, lockLives: true })).toMatchObject(CURRENT);
    expect(changeSettings(CURRENT, { segmentSize: 10 }, idle)).toMatchObject({ segmentSize: 10 });
  });

  it('the lock mode changes only while no lock lives', () => {
    expect(changeSettings(CURRENT, { lockMode: 'shared' }, { holdsAnything: true, lockLives: true })).toMatchObject({ refused: 'QUEUE_LOCKED' });
    expect(changeSettings(CURRENT, { lockMode: 'exclusive' }, { holdsAnything: true, lockLives: true })).toMatchObject({ lockMode: 'exclusive' });
    expect(changeSettings(CURRENT, { lockMode: 'shared' }, { holdsAnything: true, lockLives: false })).toMatchObject({ lockMode: 'shared' });
    expect(lockModeOf(CURRENT)).toBe('exclusive');
  });

  it('the controls change at any time, items and locks or not, and stay when not named', () => {
    const changed = changeSettings(
      CURRENT,
      { paused: true, retryDelaySeconds: 5, retryBackoff: 'fixed', retryDelayMaxSeconds: 60, maxInFlight: 10, maxPopsPerSecond: 0.5 },
      busy,
    );
    expect(changed).toMatchObject({
      paused: true,
      retryDelaySeconds: 5,
      retryBackoff: 'fixed',
      retryDelayMaxSeconds: 60,
      maxInFlight: 10,
      maxPopsPerSecond: 0.5,
    });
    const kept = changeSettings(changed as QueueSettings, { segmentSize: 100 }, busy);
    expect(kept).toEqual(changed);
    expect(changeSettings(changed as QueueSettings, { paused: false, maxInFlight: null, maxPopsPerSecond: null }, busy)).toMatchObject({
      paused: false,
      maxInFlight: null,
      maxPopsPerSecond: null,
      retryDelaySeconds: 5,
    });
  });

  it('a change is judged by the settings it leaves: a retry delay above the stored maximum is refused, even when only one is named', () => {
    const stored = { ...CURRENT, retryDelaySeconds: 10, retryDelayMaxSeconds: 20 };
    expect(changeSettings(stored, { retryDelaySeconds: 21 }, idle)).toEqual({ refused: 'RETRY_DELAY_ABOVE_MAX', delay: 21, max: 20 });
    expect(changeSettings(stored, { retryDelayMaxSeconds: 9 }, idle)).toEqual({ refused: 'RETRY_DELAY_ABOVE_MAX', delay: 10, max: 9 });
    expect(changeSettings(stored, { retryDelaySeconds: 20 }, idle)).toMatchObject({ retryDelaySeconds: 20, retryDelayMaxSeconds: 20 });
    expect(changeSettings(stored, { retryDelaySeconds: 30, retryDelayMaxSeconds: 30 }, idle)).toMatchObject({ retryDelaySeconds: 30 });
    expect(changeSettings(CURRENT, { retryDelaySeconds: 900 }, idle), 'the default maximum is 900').toMatchObject({ retryDelaySeconds: 900 });
    expect(changeSettings({ ...CURRENT, retryDelaySeconds: 10 }, { retryDelayMaxSeconds: 5 }, idle)).toMatchObject({ refused: 'RETRY_DELAY_ABOVE_MAX' });
  });

  it('max_deliveries needs a dead-letter queue in the settings the change leaves, checked before anything else', () => {
    expect(changeSettings(CURRENT, { maxDeliveries: 3 }, idle)).toEqual({ refused: 'NEEDS_DEAD_LETTER_QUEUE' });
    expect(changeSettings({ ...CURRENT, deadLetterQueue: 'dead' }, { maxDeliveries: 3 }, idle), 'the stored one counts').toMatchObject({ maxDeliveries: 3 });
    expect(changeSettings({ ...CURRENT, maxDeliveries: 3, deadLetterQueue: 'dead' }, { deadLetterQueue: null }, idle)).toEqual({
      refused: 'NEEDS_DEAD_LETTER_QUEUE',
    });
    expect(changeSettings({ ...CURRENT, maxDeliveries: 3, deadLetterQueue: 'dead' }, { maxDeliveries: null, deadLetterQueue: null }, idle)).toMatchObject({
      maxDeliveries: null,
    });
    expect(changeSettings(CURRENT, { maxDeliveries: 3, segmentSize: 5, lockMode: 'shared' }, busy), 'first in order').toEqual({
      refused: 'NEEDS_DEAD_LETTER_QUEUE',
    });
    expect(changeSettings(CURRENT, { segmentSize: 5, lockMode: 'shared', retryDelaySeconds: 901 }, busy), 'then the layout').toEqual({
      refused: 'QUEUE_NOT_EMPTY',
    });
    expect(changeSettings(CURRENT, { lockMode: 'shared', retryDelaySeconds: 901 }, { ...busy, lockExpiresAt: 7000 }), 'then the lock mode').toEqual({
      refused: 'QUEUE_LOCKED',
      lockExpiresAt: 7000,
    });
  });

  it('withControlDefaults names every control, at its default when absent', () => {
    expect(withControlDefaults(CURRENT)).toMatchObject({ ...CURRENT, ...CONTROL_DEFAULTS, lockMode: 'exclusive' });
    expect(withControlDefaults({ ...CURRENT, paused: true, maxInFlight: 3 })).toMatchObject({ paused: true, maxInFlight: 3, retryDelaySeconds: 0 });
  });
});

describe('retryDelayMs', () => {
  it('no retry delay: back at once, whatever the backoff and deliveries', () => {
    expect(retryDelayMs(CURRENT, 1)).toBe(0);
    expect(retryDelayMs({ ...CURRENT, retryBackoff: 'fixed' }, 7)).toBe(0);
  });

  it('fixed: the base delay every time', () => {
    const s = { ...CURRENT, retryDelaySeconds: 3, retryBackoff: 'fixed' as const, retryDelayMaxSeconds: 4 };
    expect([1, 2, 5, 100].map((d) => retryDelayMs(s, d))).toEqual([3000, 3000, 3000, 3000]);
  });

  it('exponential: base × 2^(d−1), at most the maximum (the default backoff)', () => {
    const s = { ...CURRENT, retryDelaySeconds: 2, retryDelayMaxSeconds: 30 };
    expect([1, 2, 3, 4, 5, 6].map((d) => retryDelayMs(s, d))).toEqual([2000, 4000, 8000, 16000, 30000, 30000]);
    expect(retryDelayMs(s, 0), 'an item never delivered counts as the first').toBe(2000);
    expect(retryDelayMs({ ...s, retryDelayMaxSeconds: 900 }, 1000), 'huge delivery counts do not overflow').toBe(900_000);
    expect(retryDelayMs({ ...CURRENT, retryDelaySeconds: 1 }, 11), 'default maximum 900').toBe(900_000);
  });
});
