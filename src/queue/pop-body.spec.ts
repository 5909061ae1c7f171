import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { popAnswer, serializePopAnswer } from './pop-body.js';

describe('pop answers with items as stored JSON', () => {
  // As pushed items are stored: written by JSON.stringify.
  const stored = ['{"n":1}', '{"__proto__":{"x":1},"s":"é\\u0000\\ud800","a":[1e21,-0.5,null]}'].map((text) => JSON.stringify(JSON.parse(text)));

  it('serialise to exactly what JSON.stringify makes of the parsed answer, fields in the same order', () => {
    const rests = [
      { count: 2 },
      { count: 0, paused: true },
      { count: 0, locked: false, limited: true },
      { count: 2, locked: true, lock_id: 'AbCdEfGhIjK', lock_expires_at: 1764100000.5, delivery_counts: [1, 3] },
    ];
    for (const rest of rests) {
      const answer = popAnswer(stored, rest);
      const plain = { items: stored.map((s) => JSON.parse(s) as unknown), ...rest };
      expect(serializePopAnswer(answer)).toBe(JSON.stringify(plain));
      expect(JSON.parse(serializePopAnswer(answer))).toEqual(plain);
    }
  });

  it('an empty answer', () => {
    expect(serializePopAnswer(popAnswer([], { count: 0 }))).toBe('{"items":[],"count":0}');
  });

  it('any JSON object pushed comes back the same', () => {
    fc.assert(
      fc.property(fc.array(fc.dictionary(fc.string(), fc.jsonValue()), { maxLength: 5 }), (items) => {
        const texts = items.map((i) => JSON.stringify(i));
        const body = serializePopAnswer(popAnswer(texts, { count: texts.length }));
        expect(body).toBe(JSON.stringify({ items: texts.map((t) => JSON.parse(t) as unknown), count: texts.length }));
      }),
      { numRuns: 200 },
    );
  });

  it('read in code it is an ordinary answer: items parsed once, on first access', () => {
    const answer = popAnswer(stored, { count: 2 });
    expect(answer).toEqual({ items: [{ n: 1 }, JSON.parse(stored[1])], count: 2 });
    expect(answer.items).toBe(answer.items);
    expect(JSON.stringify(answer)).toBe(serializePopAnswer(answer));
  });

  it('an answer carrying a pop answer as next (an acknowledgement): its items spliced in too, same text as JSON.stringify', () => {
    const headers = [JSON.stringify({ traceparent: 'tp' }), '{}'];
    const next = popAnswer(stored, { count: 2, locked: true, lock_id: 'AbCdEfGhIjK', lock_expires_at: 1.5 }, headers);
    const acknowledged = { success: true, message: 'Successfully acknowledged 1 item(s)', items_acknowledged: 1, next };
    const plainNext = {
      items: stored.map((s) => JSON.parse(s) as unknown),
      headers: [{ traceparent: 'tp' }, {}],
      count: 2,
      locked: true,
      lock_id: 'AbCdEfGhIjK',
      lock_expires_at: 1.5,
    };
    expect(serializePopAnswer(acknowledged)).toBe(JSON.stringify({ ...acknowledged, next: plainNext }));
    const batch = { success: true, items_acknowledged: 1, results: [{ lock_id: 'a', status: 200, items_acknowledged: 1 }], skipped: undefined, next };
    expect(serializePopAnswer(batch)).toBe(JSON.stringify({ ...batch, next: plainNext }));
    expect(serializePopAnswer({ success: true, next: { items: [] } }), 'a next made otherwise').toBe('{"success":true,"next":{"items":[]}}');
  });

  it('anything else (an error body sent on the same reply) is JSON.stringify', () => {
    const error = { statusCode: 423, error_code: 'QUEUE_LOCKED', message: 'locked' };
    expect(serializePopAnswer(error)).toBe(JSON.stringify(error));
    expect(serializePopAnswer(null)).toBe('null');
  });

  it('with headers: spliced in as stored after items, same text as JSON.stringify; parsed on first access in code', () => {
    const headers = [JSON.stringify({ traceparent: 'tp', a: 'é\u0000' }), '{}'];
    for (const rest of [{ count: 2 }, { count: 2, locked: true, lock_id: 'AbCdEfGhIjK', lock_expires_at: 1.5, delivery_counts: [1, 1] }]) {
      const answer = popAnswer(stored, rest, headers);
      const plain = { items: stored.map((s) => JSON.parse(s) as unknown), headers: headers.map((h) => JSON.parse(h) as unknown), ...rest };
      expect(serializePopAnswer(answer)).toBe(JSON.stringify(plain));
      expect(answer).toEqual(plain);
      expect(answer.headers).toBe(answer.headers);
    }
    expect(serializePopAnswer(popAnswer([], { count: 0 }, []))).toBe('{"items":[],"headers":[],"count":0}');
    // Not asked for: no field at all.
    expect('headers' in popAnswer(stored, { count: 2 })).toBe(false);
  });
});
