import { validateSync } from 'class-validator';
import { describe, expect, it } from 'vitest';
import { ArrayDistinct } from './validation.js';

class Ids {
  @ArrayDistinct()
  ids!: unknown;
}

const problems = (ids: unknown): string[] => {
  const body = Object.assign(new Ids(), { ids });
  return validateSync(body).flatMap((error) => Object.values(error.constraints ?? {}));
};

describe('ArrayDistinct', () => {
  it('takes an array whose elements all differ, the empty array included', () => {
    expect(problems(['a', 'b', 'c'])).toEqual([]);
    expect(problems([])).toEqual([]);
    expect(problems(Array.from({ length: 1000 }, (_, i) => `id-${i}`))).toEqual([]);
  });

  it("refuses a repeated element wherever it is, with class-validator's message for @ArrayUnique()", () => {
    expect(problems(['a', 'b', 'a'])).toEqual(["All ids's elements must be unique"]);
    expect(problems([...Array.from({ length: 999 }, (_, i) => `id-${i}`), 'id-0'])).toEqual(["All ids's elements must be unique"]);
  });

  it('compares as === does: 1 and "1" differ, the same object twice does not', () => {
    const same = {};
    expect(problems([1, '1'])).toEqual([]);
    expect(problems([same, same])).toHaveLength(1);
    expect(problems([{}, {}])).toEqual([]);
  });

  it('refuses what is not an array', () => {
    expect(problems('a')).toHaveLength(1);
    expect(problems(null)).toHaveLength(1);
  });
});
