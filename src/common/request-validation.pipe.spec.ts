import { ValidationPipe, type ArgumentMetadata } from '@nestjs/common';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ListQueuesQueryDto } from '../queue/dto/list-queues-query.dto.js';
import { ArrayMinSize, IsArray, IsString, MaxLength } from 'class-validator';
import { AcknowledgeBatchRequestDto, AcknowledgeRequestDto, NextPopDto, ReleaseBatchRequestDto } from '../queue/dto/lock.dto.js';
import { PopQueryDto } from '../queue/dto/pop-query.dto.js';
import { PushBatchDto, PushItemDto } from '../queue/dto/push-item.dto.js';
import { ValidationFailedError } from './errors.js';
import { RequestValidationPipe } from './request-validation.pipe.js';

const popQuery: ArgumentMetadata = { type: 'query', metatype: PopQueryDto };
const listQuery: ArgumentMetadata = { type: 'query', metatype: ListQueuesQueryDto };
/** A query object as Fastify parses it: no prototype, strings. */
const query = (fields: Record<string, string>): Record<string, string> => Object.assign(Object.create(null) as Record<string, string>, fields);

const pushBody: ArgumentMetadata = { type: 'body', metatype: PushItemDto };
const batchBody: ArgumentMetadata = { type: 'body', metatype: PushBatchDto };
const ackBody: ArgumentMetadata = { type: 'body', metatype: AcknowledgeRequestDto };
const ackBatchBody: ArgumentMetadata = { type: 'body', metatype: AcknowledgeBatchRequestDto };
const releaseBatchBody: ArgumentMetadata = { type: 'body', metatype: ReleaseBatchRequestDto };

/** A list whose entries have a rule of what they say: never compared by length alone. */
class ShortNamesDto {
  @IsArray()
  @ArrayMinSize(1)
  @IsString({ each: true })
  @MaxLength(3, { each: true })
  names: string[];
}
const shortNamesBody: ArgumentMetadata = { type: 'body', metatype: ShortNamesDto };

describe('RequestValidationPipe on query strings and body shapes', () => {
  afterEach(() => vi.restoreAllMocks());

  it('a query seen before gets an equal, separate DTO without being validated again', async () => {
    const pipe = new RequestValidationPipe();
    const validations = vi.spyOn(ValidationPipe.prototype, 'transform');
    const first = (await pipe.transform(query({ wait_seconds: '20', require_ack: 'true' }), popQuery)) as PopQueryDto;
    expect(first).toBeInstanceOf(PopQueryDto);
    expect(first).toMatchObject({ depth: 1, wait_seconds: 20, require_ack: true, ttl_seconds: 30 });
    first.depth = 99;
    const second = (await pipe.transform(query({ wait_seconds: '20', require_ack: 'true' }), popQuery)) as PopQueryDto;
    expect(validations).toHaveBeenCalledTimes(1);
    expect(second).toBeInstanceOf(PopQueryDto);
    expect(second, 'a change to an earlier answer does not leak').toMatchObject({ depth: 1, wait_seconds: 20, require_ack: true });
    expect(second).not.toBe(first);
    second.ttl_seconds = 5;
    expect(await pipe.transform(query({ wait_seconds: '20', require_ack: 'true' }), popQuery)).toMatchObject({ depth: 1, ttl_seconds: 30 });
  });

  it('a refused query is refused every time; other values and other DTO classes are validated on their own', async () => {
    const pipe = new RequestValidationPipe();
    const validations = vi.spyOn(ValidationPipe.prototype, 'transform');
    for (let i = 0; i < 3; i++) await expect(pipe.transform(query({ depth: '0' }), popQuery)).rejects.toBeInstanceOf(ValidationFailedError);
    await expect(pipe.transform(query({ depth: '1', nope: 'x' }), popQuery), 'unknown fields').rejects.toBeInstanceOf(ValidationFailedError);
    expect(await pipe.transform(query({ depth: '2' }), popQuery)).toMatchObject({ depth: 2 });
    expect(await pipe.transform(query({ depth: '3' }), popQuery)).toMatchObject({ depth: 3 });
    const listed = await pipe.transform(query({ limit: '2' }), listQuery);
    expect(listed).toBeInstanceOf(ListQueuesQueryDto);
    await expect(pipe.transform(query({ depth: '0' }), popQuery)).rejects.toBeInstanceOf(ValidationFailedError);
    expect(validations).toHaveBeenCalledTimes(8);
  });

  it('remembers at most 1,000 queries per DTO class, forgetting the oldest first', async () => {
    const pipe = new RequestValidationPipe();
    const validations = vi.spyOn(ValidationPipe.prototype, 'transform');
    const ttl = (n: number): Record<string, string> => query({ ttl_seconds: String(n) });
    for (let n = 1; n <= 300; n++) await pipe.transform(ttl(n), popQuery);
    for (let n = 1; n <= 100; n++) await pipe.transform(query({ depth: String(n) }), popQuery);
    for (let n = 0; n <= 20; n++) await pipe.transform(query({ wait_seconds: String(n) }), popQuery);
    for (let n = 0; n < 600; n++)
      await pipe.transform(query({ depth: '1', ttl_seconds: String(1 + (n % 300)), require_ack: n < 300 ? 'true' : 'false' }), popQuery);
    expect(validations).toHaveBeenCalledTimes(1021);
    await pipe.transform(ttl(300), popQuery);
    expect(validations, 'a recent one is still known').toHaveBeenCalledTimes(1021);
    await pipe.transform(ttl(1), popQuery);
    expect(validations, 'the oldest was forgotten').toHaveBeenCalledTimes(1022);
  });

  it('a push body of a shape seen before is not validated again, and carries its own item', async () => {
    const pipe = new RequestValidationPipe();
    const validations = vi.spyOn(ValidationPipe.prototype, 'transform');
    const first = (await pipe.transform({ item: { n: 1, deep: { a: [1] } }, priority: 2 }, pushBody)) as PushItemDto;
    const secondItem: Record<string, unknown> = JSON.parse('{"n": 2, "__proto__": {"kept": true}}');
    const second = (await pipe.transform({ item: secondItem, priority: 2 }, pushBody)) as PushItemDto;
    expect(validations).toHaveBeenCalledTimes(1);
    expect(first).toBeInstanceOf(PushItemDto);
    expect(second).toBeInstanceOf(PushItemDto);
    expect(first).toEqual(Object.assign(new PushItemDto(), { item: { n: 1, deep: { a: [1] } }, priority: 2 }));
    expect(second.item, 'the very object pushed, untouched').toBe(secondItem);
    expect(Object.keys(second.item)).toEqual(['n', '__proto__']);
    expect(second.priority).toBe(2);
    // Another priority, a body that fails, an item that is no object: validated each time.
    expect(await pipe.transform({ item: { n: 3 }, priority: 1 }, pushBody)).toMatchObject({ item: { n: 3 }, priority: 1 });
    for (let i = 0; i < 2; i++) await expect(pipe.transform({ item: { n: 4 }, priority: -1 }, pushBody)).rejects.toBeInstanceOf(ValidationFailedError);
    for (let i = 0; i < 2; i++) await expect(pipe.transform({ item: [1], priority: 2 }, pushBody)).rejects.toBeInstanceOf(ValidationFailedError);
    expect(validations).toHaveBeenCalledTimes(6);
  });

  it('a batch of a length and entry shapes seen before is not validated again; its entries are DTOs of their own with their own items', async () => {
    const pipe = new RequestValidationPipe();
    const validations = vi.spyOn(ValidationPipe.prototype, 'transform');
    const batch = (n: number): Record<string, unknown> => ({ items: [{ item: { n } }, { item: { m: n }, priority: 1 }, { item: { o: n } }] });
    const results: PushBatchDto[] = [];
    for (const n of [1, 2, 3]) results.push((await pipe.transform(batch(n), batchBody)) as PushBatchDto);
    expect(validations, 'the first batch only').toHaveBeenCalledTimes(1);
    for (const [i, result] of results.entries()) {
      const n = i + 1;
      expect(result).toBeInstanceOf(PushBatchDto);
      expect(result.items.map((e) => e.item)).toEqual([{ n }, { m: n }, { o: n }]);
      expect(result.items.map((e) => e.priority)).toEqual([0, 1, 0]);
      for (const entry of result.items) expect(entry).toBeInstanceOf(PushItemDto);
    }
    expect(results[2].items[0], 'entries of one shape are separate objects').not.toBe(results[2].items[2]);
    results[1].items[0].priority = 7;
    expect(((await pipe.transform(batch(4), batchBody)) as PushBatchDto).items[0].priority, 'a change to an earlier answer does not leak').toBe(0);
    // A new shape in a batch of a known length: a batch of that entry alone is validated.
    const mixed = (await pipe.transform(
      { items: [{ item: { a: 1 } }, { item: { b: 1 }, priority: 2 }, { item: { c: 1 }, priority: 1 }] },
      batchBody,
    )) as PushBatchDto;
    expect(mixed.items.map((e) => [e.item, e.priority])).toEqual([
      [{ a: 1 }, 0],
      [{ b: 1 }, 2],
      [{ c: 1 }, 1],
    ]);
    expect(validations).toHaveBeenCalledTimes(2);
    expect(validations.mock.calls[1][0], 'the new shape alone').toMatchObject({ items: [{ priority: 2 }] });
    expect((validations.mock.calls[1][0] as { items: unknown[] }).items).toHaveLength(1);
    // Another length: validated whole, once.
    for (let i = 0; i < 2; i++) await pipe.transform({ items: [{ item: { n: i } }] }, batchBody);
    expect(validations).toHaveBeenCalledTimes(3);
  });

  it('a refused entry of a batch is refused every time, with the error naming it in the batch', async () => {
    const pipe = new RequestValidationPipe();
    const body = (priority: number): Record<string, unknown> => ({ items: [{ item: { n: 1 } }, { item: { n: 2 }, priority }] });
    await pipe.transform(body(1), batchBody);
    for (let i = 0; i < 2; i++) {
      await expect(pipe.transform(body(-1), batchBody)).rejects.toThrow(/items\.1\.priority must not be less than 0/);
      await expect(pipe.transform({ items: [{ item: { n: 1 } }, { item: { n: 2 }, nope: true }] }, batchBody)).rejects.toThrow(
        /property items\.1\.nope should not exist/,
      );
      await expect(pipe.transform({ items: [{ item: { n: 1 } }, { item: [2] }] }, batchBody)).rejects.toBeInstanceOf(ValidationFailedError);
    }
    const tooMany = { items: Array.from({ length: 1001 }, (_, n) => ({ item: { n } })) };
    for (let i = 0; i < 2; i++) await expect(pipe.transform(tooMany, batchBody)).rejects.toThrow(/items must contain no more than 1000 elements/);
  });

  it('a batch whose entries have many new shapes (a dedup_id each) is validated whole, and none is remembered', async () => {
    const pipe = new RequestValidationPipe();
    const validations = vi.spyOn(ValidationPipe.prototype, 'transform');
    const batch = (round: number): Record<string, unknown> => ({ items: Array.from({ length: 20 }, (_, n) => ({ item: { n }, dedup_id: `d-${round}-${n}` })) });
    for (const round of [1, 2, 3]) {
      const result = (await pipe.transform(batch(round), batchBody)) as PushBatchDto;
      expect(result.items.map((e) => e.dedup_id)).toEqual(Array.from({ length: 20 }, (_, n) => `d-${round}-${n}`));
    }
    expect(validations).toHaveBeenCalledTimes(3);
    expect(validations.mock.calls.map((c) => (c[0] as { items: unknown[] }).items.length)).toEqual([20, 20, 20]);
  });

  it('an acknowledgement of a shape seen before, with any lock_id, is not validated again: it carries its own lock_id and its own next', async () => {
    const pipe = new RequestValidationPipe();
    const validations = vi.spyOn(ValidationPipe.prototype, 'transform');
    const first = (await pipe.transform({ lock_id: 'a', next: { depth: 2 } }, ackBody)) as AcknowledgeRequestDto;
    const second = (await pipe.transform({ lock_id: 'b', next: { depth: 2 } }, ackBody)) as AcknowledgeRequestDto;
    expect(validations).toHaveBeenCalledTimes(1);
    expect(second).toBeInstanceOf(AcknowledgeRequestDto);
    expect(second.next).toBeInstanceOf(NextPopDto);
    expect(second).toEqual(Object.assign(new AcknowledgeRequestDto(), { lock_id: 'b', next: Object.assign(new NextPopDto(), { depth: 2 }) }));
    expect(first.lock_id).toBe('a');
    second.next!.depth = 9;
    const third = (await pipe.transform({ lock_id: 'c', next: { depth: 2 } }, ackBody)) as AcknowledgeRequestDto;
    expect(third, 'a change to an earlier answer does not leak').toMatchObject({ lock_id: 'c', next: { depth: 2 } });
    expect(third.next).not.toBe(second.next);
    // A lock_id that is no string, another next, a next refused: validated each time.
    for (let i = 0; i < 2; i++) expect(await pipe.transform({ lock_id: 5, next: { depth: 2 } }, ackBody)).toMatchObject({ lock_id: 5 });
    expect(await pipe.transform({ lock_id: 'd', next: { depth: 3 } }, ackBody)).toMatchObject({ lock_id: 'd', next: { depth: 3 } });
    for (let i = 0; i < 2; i++) await expect(pipe.transform({ lock_id: 'e', next: { depth: 0 } }, ackBody)).rejects.toThrow(/next\.depth/);
    for (let i = 0; i < 2; i++) await expect(pipe.transform({ lock_id: 'e', next: { nope: 1 } }, ackBody)).rejects.toBeInstanceOf(ValidationFailedError);
    expect(validations).toHaveBeenCalledTimes(7);
    expect(await pipe.transform({ lock_id: 'f' }, ackBody)).toEqual(Object.assign(new AcknowledgeRequestDto(), { lock_id: 'f' }));
    expect(await pipe.transform({ lock_id: 'g' }, ackBody)).toEqual(Object.assign(new AcknowledgeRequestDto(), { lock_id: 'g' }));
    expect(validations).toHaveBeenCalledTimes(8);
  });

  it('a batch acknowledgement of as many distinct lock ids as one seen before is not validated again: it carries its own lock_ids and its own next', async () => {
    const pipe = new RequestValidationPipe();
    const validations = vi.spyOn(ValidationPipe.prototype, 'transform');
    const ids = (tag: string, n = 3): string[] => Array.from({ length: n }, (_, i) => `${tag}${i}`);
    const first = (await pipe.transform({ lock_ids: ids('a'), next: { depth: 2 } }, ackBatchBody)) as AcknowledgeBatchRequestDto;
    const sent = ids('b');
    const second = (await pipe.transform({ lock_ids: sent, next: { depth: 2 } }, ackBatchBody)) as AcknowledgeBatchRequestDto;
    expect(validations).toHaveBeenCalledTimes(1);
    expect(second).toEqual(Object.assign(new AcknowledgeBatchRequestDto(), { lock_ids: ids('b'), next: Object.assign(new NextPopDto(), { depth: 2 }) }));
    expect(second.lock_ids, 'a list of its own').not.toBe(sent);
    expect(first.lock_ids).toEqual(ids('a'));
    second.next!.depth = 9;
    second.lock_ids.push('x');
    const third = (await pipe.transform({ lock_ids: ids('c'), next: { depth: 2 } }, ackBatchBody)) as AcknowledgeBatchRequestDto;
    expect(third, 'a change to an earlier answer does not leak').toEqual(
      Object.assign(new AcknowledgeBatchRequestDto(), { lock_ids: ids('c'), next: Object.assign(new NextPopDto(), { depth: 2 }) }),
    );
    expect(validations).toHaveBeenCalledTimes(1);
    // Another length, another next: validated (once each).
    for (let i = 0; i < 2; i++)
      expect(await pipe.transform({ lock_ids: ids(`d${i}`, 4), next: { depth: 2 } }, ackBatchBody)).toMatchObject({ lock_ids: ids(`d${i}`, 4) });
    for (let i = 0; i < 2; i++)
      expect(await pipe.transform({ lock_ids: ids(`e${i}`), next: { depth: 5 } }, ackBatchBody)).toMatchObject({ next: { depth: 5 } });
    expect(validations).toHaveBeenCalledTimes(3);
    // Refused lists are refused every time, with their own errors: a repeated id, an id that is no string, none, too many.
    for (let i = 0; i < 2; i++) {
      await expect(pipe.transform({ lock_ids: ['f', 'g', 'f'], next: { depth: 2 } }, ackBatchBody)).rejects.toThrow(/lock_ids/);
      await expect(pipe.transform({ lock_ids: ['f', 5, 'g'], next: { depth: 2 } }, ackBatchBody)).rejects.toThrow(/lock_ids/);
      await expect(pipe.transform({ lock_ids: [], next: { depth: 2 } }, ackBatchBody)).rejects.toThrow(/lock_ids/);
      await expect(pipe.transform({ lock_ids: ids('h', 1001) }, ackBatchBody)).rejects.toThrow(/lock_ids/);
    }
    // The first list of a length above the most is refused as it is validated, and so is every later one: no refusal is remembered.
    await expect(pipe.transform({ lock_ids: ids('i', 1001) }, ackBatchBody)).rejects.toThrow(/lock_ids/);
    expect(validations).toHaveBeenCalledTimes(12);
    // A release's other fields are compared as before.
    await pipe.transform({ lock_ids: ids('j'), delay_seconds: 5 }, releaseBatchBody);
    expect(await pipe.transform({ lock_ids: ids('k'), delay_seconds: 5 }, releaseBatchBody)).toMatchObject({ lock_ids: ids('k'), delay_seconds: 5 });
    await expect(pipe.transform({ lock_ids: ids('l'), delay_seconds: 901 }, releaseBatchBody)).rejects.toThrow(/delay_seconds/);
    expect(validations).toHaveBeenCalledTimes(14);
  });

  it('a list whose entries have a rule of what they say is validated every time', async () => {
    const pipe = new RequestValidationPipe();
    const validations = vi.spyOn(ValidationPipe.prototype, 'transform');
    expect(await pipe.transform({ names: ['ab', 'cd'] }, shortNamesBody)).toMatchObject({ names: ['ab', 'cd'] });
    await expect(pipe.transform({ names: ['ab', 'long'] }, shortNamesBody)).rejects.toThrow(/names/);
    expect(validations).toHaveBeenCalledTimes(2);
  });
});
