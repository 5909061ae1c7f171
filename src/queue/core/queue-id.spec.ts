import { describe, expect, it } from 'vitest';
import { isQueueId } from './queue-id.js';

describe('isQueueId', () => {
  it.each(['a', 'orders', 'A-Z_a.z:0@9', 'x'.repeat(200), '...', '.a', 'a..'])('accepts %j', (id) => expect(isQueueId(id)).toBe(true));
  it.each(['', '.', '..', 'x'.repeat(201), 'a b', 'a/b', 'é', 'a%2F', 'a\n', 'a?'])('refuses %j', (id) => expect(isQueueId(id)).toBe(false));
  it.each([null, undefined, 42, ['a'], { id: 'a' }])('refuses a non-string %j', (id) => expect(isQueueId(id)).toBe(false));
});
