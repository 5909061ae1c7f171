import { describe, expect, it } from 'vitest';
import { parseEnvironment } from '../../config/environment.js';
import { createFunctionStatement } from './database-function.js';
import { DEFAULT_ENQUEUE_LIMITS, enqueueLimitFunctions } from './enqueue-limits.function.js';

describe('enqueueLimitFunctions', () => {
  it('holds the configuration’s defaults when no service set others', () => {
    const env = parseEnvironment({});
    expect(DEFAULT_ENQUEUE_LIMITS).toEqual({ maxItemBytes: env.MAX_ITEM_BYTES, maxPriority: env.MAX_PRIORITY });
  });

  it('makes each limit the constant body of an IMMUTABLE sql function', () => {
    const [bytes, priority] = enqueueLimitFunctions({ maxItemBytes: 1000, maxPriority: 9 }).map(createFunctionStatement);
    expect(bytes).toBe('CREATE OR REPLACE FUNCTION pushpop_enqueue_max_item_bytes(\n\n) RETURNS integer LANGUAGE sql IMMUTABLE AS $fn$\n  SELECT 1000\n$fn$');
    expect(priority).toContain('pushpop_enqueue_max_priority(');
    expect(priority).toContain('$fn$\n  SELECT 9\n$fn$');
  });

  it('refuses anything but a non-negative integer (it is written into the function’s text)', () => {
    for (const bad of [1.5, -1, Number.NaN, 2 ** 60]) {
      expect(() => enqueueLimitFunctions({ maxItemBytes: bad, maxPriority: 9 })).toThrow(/non-negative integer/);
    }
  });
});
