import { describe, expect, it } from 'vitest';
import { newLockId } from './queue-turns.js';

describe('newLockId', () => {
  it('gives 11 URL-safe characters (8 bytes), never the same id twice, across refills of its random bytes', () => {
    const ids = Array.from({ length: 1000 }, newLockId);
    for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9_-]{11}$/);
    expect(Buffer.from(ids[0], 'base64url')).toHaveLength(8);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
