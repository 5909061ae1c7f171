import { describe, expect, it } from 'vitest';
import { itemsChannel } from './item-notifications.js';

describe('itemsChannel', () => {
  it('is pushpop_items in public, and names the schema elsewhere', () => {
    expect(itemsChannel('public')).toBe('pushpop_items');
    expect(itemsChannel('t_pushpop_test_ab12')).toBe('pushpop_items.t_pushpop_test_ab12');
  });

  it('stays within the 63 bytes PostgreSQL allows a channel name, and apart for schemas that differ only at the end', () => {
    const a = itemsChannel(`s${'x'.repeat(61)}a`);
    const b = itemsChannel(`s${'x'.repeat(61)}b`);
    for (const channel of [a, b]) expect(Buffer.byteLength(channel)).toBeLessThanOrEqual(63);
    expect(a).not.toBe(b);
    expect(itemsChannel('s'.repeat(49))).toBe(`pushpop_items.${'s'.repeat(49)}`);
  });
});
