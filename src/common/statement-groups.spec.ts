import { describe, expect, it } from 'vitest';
import { StatementGroups } from './statement-groups.js';

/** A sender whose groups are answered by hand, recording what each carried. */
function manual(): { sent: number[][]; answer(i: number): void; fail(i: number): void; groups: StatementGroups<number, number> } {
  const sent: number[][] = [];
  const pending: { resolve(r: PromiseSettledResult<number>[]): void; reject(e: unknown): void }[] = [];
  const groups = new StatementGroups<number, number>(
    (items) =>
      new Promise((resolve, reject) => {
        sent.push(items);
        pending.push({
          resolve: () => resolve(items.map((n) => (n < 0 ? { status: 'rejected', reason: new Error(`bad ${n}`) } : { status: 'fulfilled', value: n * 10 }))),
          reject,
        });
      }),
    2,
    3,
  );
  return { sent, groups, answer: (i) => pending[i].resolve([]), fail: (i) => pending[i].reject(new Error('lost')) };
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('StatementGroups', () => {
  it('sends at once while fewer than maxInFlight are out; the rest wait and go together, at most maxGroup each', async () => {
    const m = manual();
    const answers = [1, 2, 3, 4, 5, 6].map((n) => m.groups.request(n));
    expect(m.sent).toEqual([[1], [2]]);
    m.answer(0);
    await tick();
    expect(m.sent).toEqual([[1], [2], [3, 4, 5]]);
    m.answer(1);
    await tick();
    expect(m.sent).toEqual([[1], [2], [3, 4, 5], [6]]);
    m.answer(2);
    m.answer(3);
    expect(await Promise.all(answers)).toEqual([10, 20, 30, 40, 50, 60]);
    expect({ groups: m.groups.groups, grouped: m.groups.grouped }).toEqual({ groups: 4, grouped: 1 });
  });

  it('each request of a group gets its own outcome; a group that fails as a whole rejects all of it', async () => {
    const m = manual();
    const first = [1, 2].map((n) => m.groups.request(n).catch((e: Error) => e.message));
    const group = [3, -4, 5].map((n) => m.groups.request(n).catch((e: Error) => e.message));
    const lost = [6, 7].map((n) => m.groups.request(n).catch((e: Error) => e.message));
    m.answer(0);
    await tick();
    expect(m.sent).toEqual([[1], [2], [3, -4, 5]]);
    m.fail(1);
    await tick();
    expect(m.sent.at(-1)).toEqual([6, 7]);
    m.answer(2);
    m.fail(3);
    expect(await Promise.all(first)).toEqual([10, 'lost']);
    expect(await Promise.all(group)).toEqual([30, 'bad -4', 50]);
    expect(await Promise.all(lost)).toEqual(['lost', 'lost']);
  });
});
