import { describe, expect, it } from 'vitest';
import { changeSettings, lockModeOf } from './queue-settings.js';

const CURRENT = { segmentSize: 100, bufferSegments: 2 };
const idle = { holdsAnything: false, lockLives: false };

describe('changeSettings', () => {
  it('absent fields stay as they are; the result names every field', () => {
    expect(changeSettings(CURRENT, { maxDeliveries: 3, deadLetterQueue: 'dead' }, idle)).toEqual({
      segmentSize: 100,
      bufferSegments: 2,
      lockMode: 'exclusive',
      maxDeliveries: 3,
      deadLetterQueue: 'dead',
    });
    expect(changeSettings({ ...CURRENT, maxDeliveries: 3, deadLetterQueue: 'dead' }, { maxDeliveries: null }, idle)).toMatchObject({
      maxDeliveries: null,
      deadLetterQueue: 'dead',
    });
  });

  it('the segment layout changes only while the queue holds nothing and no lock lives; the same values are no change', () => {
    expect(changeSettings(CURRENT, { segmentSize: 10 }, { holdsAnything: true, lockLives: false })).toBe('QUEUE_NOT_EMPTY');
    expect(changeSettings(CURRENT, { bufferSegments: 1 }, { holdsAnything: false, lockLives: true })).toBe('QUEUE_NOT_EMPTY');
    expect(changeSettings(CURRENT, { segmentSize: 100, bufferSegments: 2 }, { holdsAnything: true, lockLives: true })).toMatchObject(CURRENT);
    expect(changeSettings(CURRENT, { segmentSize: 10 }, idle)).toMatchObject({ segmentSize: 10 });
  });

  it('the lock mode changes only while no lock lives', () => {
    expect(changeSettings(CURRENT, { lockMode: 'shared' }, { holdsAnything: true, lockLives: true })).toBe('QUEUE_LOCKED');
    expect(changeSettings(CURRENT, { lockMode: 'exclusive' }, { holdsAnything: true, lockLives: true })).toMatchObject({ lockMode: 'exclusive' });
    expect(changeSettings(CURRENT, { lockMode: 'shared' }, { holdsAnything: true, lockLives: false })).toMatchObject({ lockMode: 'shared' });
    expect(lockModeOf(CURRENT)).toBe('exclusive');
  });
});
