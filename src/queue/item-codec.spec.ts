import { describe, expect, it } from 'vitest';
import { ItemTooDeepError, ItemTooLargeError, PushpopError, ValidationFailedError } from '../common/errors.js';
import { encodeHeaders, encodeItem, MAX_ITEM_DEPTH, requestTraceparent } from './item-codec.js';

/** `levels` nested objects: the item itself is level 1. */
function nestedObjects(levels: number): Record<string, unknown> {
  let value: Record<string, unknown> = {};
  for (let i = 1; i < levels; i++) value = { n: value };
  return value;
}

/** An object (level 1) holding `levels - 1` nested arrays. */
function nestedArrays(levels: number): Record<string, unknown> {
  let value: unknown[] = [];
  for (let i = 2; i < levels; i++) value = [value];
  return { a: value };
}

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

/** An item `{"s":"…"}` whose JSON is exactly `bytes` UTF-8 bytes, made of `unit` and ASCII padding. */
function itemOfBytes(bytes: number, unit: string): { s: string } {
  const room = bytes - Buffer.byteLength('{"s":""}');
  const unitBytes = Buffer.byteLength(unit);
  const item = { s: unit.repeat(Math.floor(room / unitBytes)) + 'x'.repeat(room % unitBytes) };
  expect(Buffer.byteLength(JSON.stringify(item))).toBe(bytes);
  return item;
}

describe('encodeItem', () => {
  describe('accepts JSON objects and returns their JSON text', () => {
    it('returns the JSON text with the key order kept', () => {
      expect(encodeItem({ z: 1, a: [1, 'two', null, { b: false }], m: { y: 1, b: 2 } }, 1000)).toBe('{"z":1,"a":[1,"two",null,{"b":false}],"m":{"y":1,"b":2}}');
    });

    it('accepts the empty object', () => {
      expect(encodeItem({}, 2)).toBe('{}');
    });

    it('keeps \\u0000, emoji and other Unicode in a form that parses back to the same value', () => {
      const item = { nul: 'a\u0000b', emoji: '😀👩‍👧', text: 'Ωμέγα 日本語 עברית', lone: '\ud800', line: '\u2028' };
      const json = encodeItem(item, 10_000);
      expect(json).not.toContain('\u0000');
      expect(JSON.parse(json)).toEqual(item);
    });

    it('keeps an own __proto__ key', () => {
      const item = JSON.parse('{"__proto__":{"x":1},"a":1}') as Record<string, unknown>;
      expect(encodeItem(item, 1000)).toBe('{"__proto__":{"x":1},"a":1}');
    });
  });

  describe('refuses non-objects with VALIDATION_FAILED', () => {
    const notObjects: [string, unknown][] = [
      ['null', null],
      ['undefined', undefined],
      ['an array', [{ a: 1 }]],
      ['an empty array', []],
      ['a string', '{"a":1}'],
      ['a number', 42],
      ['zero', 0],
      ['true', true],
      ['false', false],
    ];

    it.each(notObjects)('refuses %s', (_label, value) => {
      const error = thrown(() => encodeItem(value, 1_000_000));
      expect(error).toBeInstanceOf(ValidationFailedError);
      expect(error).toMatchObject({ status: 400, errorCode: 'VALIDATION_FAILED', message: 'item must be a JSON object' });
    });

    it('names the field it was given', () => {
      expect(thrown(() => encodeItem([1], 100, 'items.3.item'))).toMatchObject({
        errorCode: 'VALIDATION_FAILED',
        message: 'items.3.item must be a JSON object',
      });
    });
  });

  describe('depth', () => {
    it('has a limit of 64 levels', () => {
      expect(MAX_ITEM_DEPTH).toBe(64);
    });

    it('accepts 64 levels of objects and refuses 65 with ITEM_TOO_DEEP', () => {
      expect(JSON.parse(encodeItem(nestedObjects(64), 1_000_000))).toEqual(nestedObjects(64));
      const error = thrown(() => encodeItem(nestedObjects(65), 1_000_000));
      expect(error).toBeInstanceOf(ItemTooDeepError);
      expect(error).toMatchObject({ status: 400, errorCode: 'ITEM_TOO_DEEP' });
      expect((error as Error).message).toContain('64');
    });

    it('counts arrays as levels', () => {
      expect(() => encodeItem(nestedArrays(64), 1_000_000)).not.toThrow();
      expect(() => encodeItem(nestedArrays(65), 1_000_000)).toThrow(ItemTooDeepError);
    });

    it('does not count scalars as levels', () => {
      let inner: Record<string, unknown> = { s: 'leaf', n: 1, z: null, b: true };
      for (let i = 1; i < 64; i++) inner = { n: inner, s: 'x' };
      expect(() => encodeItem(inner, 1_000_000)).not.toThrow();
    });

    it('finds the deep branch among shallow siblings, wherever it is', () => {
      const deepFirst = { deep: nestedObjects(64), a: 1, b: [1, 2], c: {} };
      const deepLast = { a: 1, b: [1, 2], c: {}, deep: nestedArrays(64) };
      expect(() => encodeItem(deepFirst, 1_000_000)).toThrow(ItemTooDeepError);
      expect(() => encodeItem(deepLast, 1_000_000)).toThrow(ItemTooDeepError);
      expect(() => encodeItem({ a: nestedObjects(63), b: nestedArrays(63) }, 1_000_000)).not.toThrow();
    });

    it('refuses very deep nesting with ITEM_TOO_DEEP, not a stack overflow', () => {
      let value: unknown = 1;
      for (let i = 0; i < 200_000; i++) value = [value];
      expect(() => encodeItem({ a: value }, 1_000_000_000)).toThrow(ItemTooDeepError);
    });

    it('accepts wide shallow items', () => {
      const wide = Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`k${i}`, [i, { i }]]));
      expect(JSON.parse(encodeItem(wide, 10_000_000))).toEqual(wide);
    });

    it('checks depth before size', () => {
      expect(() => encodeItem(nestedObjects(65), 2)).toThrow(ItemTooDeepError);
    });
  });

  describe('size in UTF-8 bytes of the JSON text', () => {
    it.each([
      ['ASCII', 'a'],
      ['2-byte characters', 'é'],
      ['3-byte characters', '€'],
      ['4-byte characters (surrogate pairs)', '😀'],
    ])('accepts %s exactly at the limit and refuses one byte over', (_label, unit) => {
      const atLimit = itemOfBytes(1000, unit);
      expect(encodeItem(atLimit, 1000)).toBe(JSON.stringify(atLimit));
      const over = itemOfBytes(1001, unit);
      const error = thrown(() => encodeItem(over, 1000));
      expect(error).toBeInstanceOf(ItemTooLargeError);
      expect(error).toBeInstanceOf(PushpopError);
      expect(error).toMatchObject({ status: 413, errorCode: 'ITEM_TOO_LARGE', message: 'item is 1001 bytes of JSON, more than the limit of 1000' });
    });

    it('counts bytes, not UTF-16 code units', () => {
      const item = { s: '😀'.repeat(10) }; // 28 code units, 48 bytes
      expect(JSON.stringify(item)).toHaveLength(28);
      expect(() => encodeItem(item, 47)).toThrow(ItemTooLargeError);
      expect(() => encodeItem(item, 48)).not.toThrow();
      const accents = { s: 'é'.repeat(100) }; // 108 code units, 208 bytes
      expect(() => encodeItem(accents, 108)).toThrow(ItemTooLargeError);
      expect(() => encodeItem(accents, 207)).toThrow(ItemTooLargeError);
      expect(() => encodeItem(accents, 208)).not.toThrow();
    });

    it('counts the escaped form of \\u0000 and quotes', () => {
      const nul = { s: '\u0000' }; // {"s":"\u0000"} = 14 bytes
      expect(() => encodeItem(nul, 13)).toThrow(ItemTooLargeError);
      expect(encodeItem(nul, 14)).toBe('{"s":"\\u0000"}');
      const quote = { s: '"' }; // {"s":"\""} = 10 bytes
      expect(() => encodeItem(quote, 9)).toThrow(ItemTooLargeError);
      expect(() => encodeItem(quote, 10)).not.toThrow();
    });

    it('counts the keys and the punctuation of the whole item', () => {
      const item = { key: [1, 2, 3], other: { x: 'y' } };
      const bytes = JSON.stringify(item).length;
      expect(() => encodeItem(item, bytes)).not.toThrow();
      expect(() => encodeItem(item, bytes - 1)).toThrow(ItemTooLargeError);
    });

    it('accepts {} at the smallest limit, 2 bytes', () => {
      expect(encodeItem({}, 2)).toBe('{}');
      expect(() => encodeItem({ a: 1 }, 2)).toThrow(ItemTooLargeError);
    });
  });
});

describe('item headers as stored', () => {
  const TP = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

  it('none at all: nothing stored', () => {
    expect(encodeHeaders(undefined, undefined)).toBeUndefined();
    expect(encodeHeaders({}, undefined)).toBeUndefined();
  });

  it("the request's traceparent is added unless the headers name one", () => {
    expect(encodeHeaders(undefined, TP)).toBe(JSON.stringify({ traceparent: TP }));
    expect(encodeHeaders({}, TP)).toBe(JSON.stringify({ traceparent: TP }));
    expect(JSON.parse(encodeHeaders({ a: 'b' }, TP)!)).toEqual({ a: 'b', traceparent: TP });
    expect(JSON.parse(encodeHeaders({ traceparent: 'mine' }, TP)!)).toEqual({ traceparent: 'mine' });
  });

  it('headers that break a rule are 400 VALIDATION_FAILED naming the field; names such as __proto__ are kept', () => {
    expect(() => encodeHeaders({ a: 1 } as unknown as Record<string, string>, undefined, 'items.2.headers')).toThrow(ValidationFailedError);
    expect(() => encodeHeaders({ a: 1 } as unknown as Record<string, string>, undefined, 'items.2.headers')).toThrow('items.2.headers.a must be a string');
    const proto = JSON.parse('{"__proto__": "x", "b": "c"}') as Record<string, string>;
    expect(encodeHeaders(proto, TP)).toBe(`{"__proto__":"x","b":"c","traceparent":"${TP}"}`);
  });

  it('only a well-formed W3C traceparent is taken from the request', () => {
    expect(requestTraceparent(TP)).toBe(TP);
    expect(requestTraceparent(` ${TP} `)).toBe(TP);
    expect(requestTraceparent(`01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra`)).toBe(
      '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra',
    );
    for (const bad of [
      undefined,
      [TP, TP],
      '',
      'garbage',
      TP.toUpperCase(),
      'ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7',
    ])
      expect(requestTraceparent(bad), String(bad)).toBeUndefined();
  });
});
