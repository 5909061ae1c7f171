import { describe, expect, it } from 'vitest';
import { headersProblem, MAX_HEADERS } from './item-headers.js';

describe('item headers rules', () => {
  it('accepts up to 16 string values with names of 1-64 allowed characters and values of up to 1024 characters', () => {
    expect(headersProblem({})).toBeUndefined();
    expect(headersProblem(Object.fromEntries(Array.from({ length: MAX_HEADERS }, (_, i) => [`h${i}`, ''])))).toBeUndefined();
    expect(headersProblem({ ['A'.repeat(64)]: 'x'.repeat(1024), 'a.b_c-9': '😀'.repeat(1024) })).toBeUndefined();
  });

  it.each<[string, unknown, string]>([
    ['null', null, 'must be an object'],
    ['an array', [], 'must be an object'],
    ['a string', 'x', 'must be an object'],
    ['17 entries', Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`h${i}`, ''])), 'at most 16 entries'],
    ['an empty name', { '': 'x' }, 'name "" must be 1-64 characters'],
    ['a 65-character name', { ['a'.repeat(65)]: 'x' }, 'must be 1-64 characters'],
    ['a name with a slash', { 'a/b': 'x' }, 'name "a/b"'],
    ['a number', { a: 1 }, '.a must be a string'],
    ['1025 characters', { a: 'x'.repeat(1025) }, '.a must be at most 1024 characters'],
    ['1025 characters outside the BMP', { a: '😀'.repeat(1025) }, '.a must be at most 1024 characters'],
  ])('refuses %s', (_, value, message) => {
    expect(headersProblem(value)).toContain(message);
  });
});
