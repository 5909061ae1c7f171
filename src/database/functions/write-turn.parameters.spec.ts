import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { StoredTurnWrite } from '../stored-queue.js';
import { functionSignature } from './database-function.js';
import { DATABASE_FUNCTIONS } from './database-functions.js';
import { generatedFiles } from './generated-files.js';
import { WRITE_TURN_FULL, WRITE_TURN_SHORT, WRITE_TURN_THIRD } from './write-turn.function.js';
import { SHORT_FORM_LENGTH, unsetBinding, WRITE_TURN_PARAMETERS } from './write-turn.parameters.js';
import { writeTurnValues } from './write-turn.values.js';
import { storedWrite } from '../../../test/support/stored-writes.js';

/** A push of one item onto an existing exclusive queue: what most turns write. */
const push: StoredTurnWrite = storedWrite({
  expectedVersion: 7,
  newVersion: 8,
  settings: { segmentSize: 100, bufferSegments: 2, lockMode: 'shared', maxDeliveries: 3, deadLetterQueue: 'dlq' },
  itemCount: 1,
  priorities: {
    '0': { count: 1, head_segment: 0, tail_segment: 0, head_offloaded_segment: null, tail_offloaded_segment: null, next_position: 1, head_position: 0 },
  },
  inserts: [{ priority: 0, segment: 0, position: 0, json: '{"n":1}' }],
  delayed: null,
  dedupInserts: [{ dedupId: 'd1', expiresAt: 5000 }],
});

const index = (name: string): number => WRITE_TURN_PARAMETERS.findIndex((p) => p.name === name);
const valueOf = (values: unknown[], name: string): unknown => values[index(name)];
const lock = {
  lockId: 'l1',
  state: 'active' as const,
  items: [{ priority: 0, json: '{}', origin: { segment: 0, position: 0 }, deliveries: 1 }],
  createdAt: 1,
  expiresAt: 2,
};

/** The values the table says a write binds, read in a loop: what the generated `writeTurnValues` must return. */
const fromTable = (queueId: string, write: StoredTurnWrite): unknown[] => {
  const short = WRITE_TURN_PARAMETERS.slice(0, SHORT_FORM_LENGTH).map((p) => p.value(write, queueId));
  const beyond = WRITE_TURN_PARAMETERS.slice(SHORT_FORM_LENGTH);
  const given = beyond.map((p) => p.value(write, queueId));
  return given.every((v) => v === undefined) ? short : [...short, ...given.map((v, i) => (v === undefined ? unsetBinding(beyond[i]) : v))];
};

describe('the parameters of pushpop_write_turn', () => {
  it('are named once, and each form takes the parameters of the shorter ones first', () => {
    const names = WRITE_TURN_PARAMETERS.map((p) => p.name);
    expect(new Set(names).size).toBe(names.length);
    expect(WRITE_TURN_FULL.parameters.map((p) => p.name)).toEqual(names);
    expect(WRITE_TURN_SHORT.parameters.map((p) => p.name)).toEqual(names.slice(0, SHORT_FORM_LENGTH));
    expect(WRITE_TURN_THIRD.parameters.map((p) => p.name)).toEqual(names.slice(0, WRITE_TURN_THIRD.parameters.length));
    expect(SHORT_FORM_LENGTH).toBeLessThan(WRITE_TURN_THIRD.parameters.length);
    expect(new Set(DATABASE_FUNCTIONS.map(functionSignature)).size).toBe(DATABASE_FUNCTIONS.length);
  });

  it('every parameter a shorter form lacks has a value standing for "nothing to write"', () => {
    const lacking = WRITE_TURN_PARAMETERS.slice(SHORT_FORM_LENGTH);
    expect(lacking.filter((p) => p.unset === undefined).map((p) => p.name)).toEqual([]);
  });

  it("this release declares the short form, the one with every parameter and the third release's; no older one", () => {
    const writeTurn = DATABASE_FUNCTIONS.filter((fn) => fn.name === 'pushpop_write_turn');
    expect(writeTurn.map((fn) => fn.parameters.length)).toEqual([WRITE_TURN_PARAMETERS.length, WRITE_TURN_THIRD.parameters.length, SHORT_FORM_LENGTH]);
    expect([WRITE_TURN_PARAMETERS.length, WRITE_TURN_THIRD.parameters.length, SHORT_FORM_LENGTH]).toEqual([92, 85, 38]);
  });

  it('the full form of the third release keeps its signature, passing "no headers"', () => {
    const names = WRITE_TURN_PARAMETERS.map((p) => p.name);
    expect(WRITE_TURN_THIRD.parameters.map((p) => p.name)).toEqual(names.slice(0, names.indexOf('p_ins_headers')));
    const passed = WRITE_TURN_THIRD.body.replace(/--[^\n]*/g, '').replace(/\s+/g, ' ');
    expect(passed).toContain(
      `SELECT pushpop_write_turn( ${WRITE_TURN_THIRD.parameters.map((p) => p.name).join(', ')}, '{}', NULL, '{}', '{}', '{}', '{}', '{}' )`,
    );
    expect(WRITE_TURN_THIRD.body).toContain("'{}' -- p_rd_headers\n");
    expect(WRITE_TURN_THIRD.language).toBe('sql');
  });

  it("the short body uses none of the full form's own parameters", () => {
    const fullOnly = WRITE_TURN_PARAMETERS.slice(SHORT_FORM_LENGTH).map((p) => p.name);
    for (const name of fullOnly) expect(WRITE_TURN_SHORT.body, name).not.toMatch(new RegExp(`\\b${name}\\b`));
  });

  it("binds each of the short form's lists the write leaves empty as null, not as an empty array", () => {
    const values = writeTurnValues('q1', push);
    const empty = ['p_del_priority', 'p_del_segment', 'p_del_from', 'p_del_through', 'p_save_keys', 'p_save_lengths', 'p_save_items', 'p_delete_keys'];
    for (const name of [...empty, 'p_dl_due', 'p_dl_seq', 'p_dl_priority', 'p_dl_item']) expect(valueOf(values, name), name).toBeNull();
    const pop = storedWrite({ ...push, inserts: [], dedupInserts: [], deletes: [{ priority: 0, segment: 0, from: 0, through: 0 }] });
    const popped = writeTurnValues('q1', pop);
    for (const name of ['p_ins_priority', 'p_ins_segment', 'p_ins_position', 'p_ins_item', 'p_dedup_ids', 'p_dedup_expires'])
      expect(valueOf(popped, name), name).toBeNull();
    expect(valueOf(popped, 'p_del_through')).toEqual([0]);
  });

  it('a push, a dedup id, a delayed item, a lock deleted and a queue deleted take the short form, values in signature order', () => {
    const values = writeTurnValues('q1', push);
    expect(values).toHaveLength(SHORT_FORM_LENGTH);
    expect(valueOf(values, 'p_queue_id')).toBe('q1');
    expect(valueOf(values, 'p_expected')).toBe(7);
    expect(valueOf(values, 'p_ins_item')).toEqual(['{"n":1}']);
    expect(valueOf(values, 'p_dedup_ids')).toEqual(['d1']);
    expect(valueOf(values, 'p_dedup_expires')).toEqual([5000]);
    expect(valueOf(values, 'p_delayed_count')).toBeNull();
    const delayed = { ...push, delayed: { count: 1, nextDueAt: 9, nextSeq: 1 }, delayedInserts: [{ dueAt: 9, seq: 0, priority: 0, json: '{}' }] };
    expect(writeTurnValues('q1', delayed)).toHaveLength(SHORT_FORM_LENGTH);
    expect(writeTurnValues('q1', { ...push, lock: { op: 'delete' } })).toHaveLength(SHORT_FORM_LENGTH);
    expect(writeTurnValues('q1', { ...push, deleteQueue: true })).toHaveLength(SHORT_FORM_LENGTH);
    // A new exclusive queue with no limit: nothing the short form lacks.
    expect(writeTurnValues('q1', { ...push, expectedVersion: null, settings: { segmentSize: 100, bufferSegments: 2, lockMode: 'exclusive' } })).toHaveLength(
      SHORT_FORM_LENGTH,
    );
  });

  it.each<[string, Partial<StoredTurnWrite>]>([
    ['settings changed', { settingsChanged: true }],
    ['a new shared queue', { expectedVersion: null }],
    ['a new queue with a limit', { expectedVersion: null, settings: { segmentSize: 100, bufferSegments: 2, maxDeliveries: 3 } }],
    ['an exclusive lock written', { lock: { op: 'upsert', lock } }],
    ['an item delivered before inserted', { inserts: [{ priority: 0, segment: 0, position: 0, json: '{}', deliveries: 2 }] }],
    ['shared-lock columns', { shared: { live: 1, items: 1, nextExpiry: null } }],
    ['a shared lock written', { sharedLockUpserts: [lock] }],
    ['a shared lock deleted', { sharedLockDeletes: ['l1'] }],
    ['an item given back', { returnedInserts: [{ priority: 0, segment: 0, position: 0, json: '{}', deliveries: 1 }] }],
    ['a given-back item popped', { returnedDeletes: [{ priority: 0, segment: 0, position: 0 }] }],
    [
      'dead letters',
      { deadLetters: { queueId: 'dlq', items: [{ priority: 0, json: '{}' }] }, deadLetterDefaults: { segmentSize: 10, bufferSegments: 1, version: 3, now: 4 } },
    ],
    ['an item dead-lettered before inserted', { inserts: [{ priority: 0, segment: 0, position: 0, json: '{}', from: 'orders' }] }],
    ['an item dead-lettered before given back', { returnedInserts: [{ priority: 0, segment: 0, position: 0, json: '{}', deliveries: 1, from: 'orders' }] }],
    ['a segment with a dead-lettered item offloaded', { storeSaves: [{ key: 'k', items: ['{}', '{}'], from: [null, 'orders'] }] }],
    [
      'redriven items',
      { redriven: [{ queueId: 'orders', priority: 0, json: '{}' }], deadLetterDefaults: { segmentSize: 10, bufferSegments: 1, version: 3, now: 4 } },
    ],
    ['an item with headers inserted', { inserts: [{ priority: 0, segment: 0, position: 0, json: '{}', headers: '{"a":"1"}' }] }],
    ['a delayed item with headers', { delayedInserts: [{ dueAt: 9, seq: 0, priority: 0, json: '{}', headers: '{"a":"1"}' }] }],
  ])('%s: the full form', (_, change) => {
    const values = writeTurnValues('q1', { ...push, ...change });
    expect(values).toHaveLength(WRITE_TURN_PARAMETERS.length);
    expect(values.filter((v) => v === undefined)).toEqual([]);
    expect(values).toEqual(fromTable('q1', { ...push, ...change }));
  });

  it('where items were dead-lettered from is bound parallel to their rows, null for the others', () => {
    const values = writeTurnValues('q1', {
      ...push,
      inserts: [
        { priority: 0, segment: 0, position: 0, json: '{"a":1}' },
        { priority: 0, segment: 0, position: 1, json: '{"b":1}', from: 'orders' },
      ],
      storeSaves: [
        { key: 'k1', items: ['1', '2'] },
        { key: 'k2', items: ['3'], from: ['mail'] },
      ],
    });
    expect(valueOf(values, 'p_ins_from')).toEqual([null, 'orders']);
    expect(valueOf(values, 'p_save_from')).toEqual([null, null, 'mail']);
    const locked = writeTurnValues('q1', { ...push, lock: { op: 'upsert', lock: { ...lock, items: [{ ...lock.items[0], from: 'orders' }] } } });
    expect(valueOf(locked, 'p_lock_from')).toEqual(['orders']);
    const shared = writeTurnValues('q1', { ...push, sharedLockUpserts: [{ ...lock, items: [{ ...lock.items[0], from: 'orders' }] }] });
    expect(JSON.parse(valueOf(shared, 'p_sl_upserts') as string)[0].from_queues).toEqual(['orders']);
  });

  it('marks the shared locks the turn created as fresh (inserted without a conflict check), and only those', () => {
    const created = { ...lock, lockId: 'new-one', items: [lock.items[0], { ...lock.items[0], origin: { segment: 0, position: 1 } }] };
    const values = writeTurnValues('q1', { ...push, sharedLockUpserts: [lock, created], sharedLocksCreated: new Set(['new-one']) });
    const written = JSON.parse(valueOf(values, 'p_sl_upserts') as string) as { id: string; fresh?: boolean }[];
    expect(written.map((l) => [l.id, l.fresh])).toEqual([
      [lock.lockId, undefined],
      ['new-one', true],
    ]);
  });

  it('the locks the turn created with one item each go as parallel arrays (single), the others as a row each', () => {
    const perItem = (lockId: string, position: number, more: object = {}) => ({
      ...lock,
      lockId,
      createdAt: 10,
      expiresAt: 20 + position,
      items: [{ priority: 1, json: `{"n":${position}}`, origin: { segment: 4, position }, deliveries: 2, ...more }],
    });
    const write = {
      ...push,
      sharedLockUpserts: [perItem('a', 0), lock, perItem('b', 1, { from: 'orders' }), perItem('c', 2, { headers: '{"h":"1"}' })],
      sharedLocksCreated: new Set(['a', 'b', 'c']),
    };
    const written = JSON.parse(valueOf(writeTurnValues('q1', write), 'p_sl_upserts') as string) as { locks: { id: string }[]; single: object };
    expect(written.locks.map((l) => l.id)).toEqual([lock.lockId]);
    expect(written.single).toEqual({
      ids: ['a', 'b', 'c'],
      priorities: [1, 1, 1],
      segments: [4, 4, 4],
      positions: [0, 1, 2],
      items: ['{"n":0}', '{"n":1}', '{"n":2}'],
      deliveries: [2, 2, 2],
      from_queues: [null, 'orders', null],
      headers: [null, null, '{"h":"1"}'],
      created: [10, 10, 10],
      expires: [20, 21, 22],
    });
    // Without from-queues or headers, neither is given; an expired lock the turn created goes as a row.
    const plain = JSON.parse(
      valueOf(
        writeTurnValues('q1', {
          ...push,
          sharedLockUpserts: [perItem('a', 0), { ...perItem('x', 1), state: 'expired' as const }],
          sharedLocksCreated: new Set(['a', 'x']),
        }),
        'p_sl_upserts',
      ) as string,
    ) as { locks: { id: string; fresh?: boolean }[]; single: Record<string, unknown> };
    expect(Object.keys(plain.single)).toEqual(['ids', 'priorities', 'segments', 'positions', 'items', 'deliveries', 'created', 'expires']);
    expect(plain.locks.map((l) => [l.id, l.fresh])).toEqual([['x', true]]);
  });

  it('headers are bound parallel to their rows, null for the others; none at all keeps the short form', () => {
    const values = writeTurnValues('q1', {
      ...push,
      inserts: [
        { priority: 0, segment: 0, position: 0, json: '{"a":1}' },
        { priority: 0, segment: 0, position: 1, json: '{"b":1}', headers: '{"h":"1"}' },
      ],
      storeSaves: [
        { key: 'k1', items: ['1', '2'] },
        { key: 'k2', items: ['3'], headers: ['{"h":"2"}'] },
      ],
      delayedInserts: [
        { dueAt: 9, seq: 0, priority: 0, json: '{}' },
        { dueAt: 9, seq: 1, priority: 0, json: '{}', headers: '{"h":"3"}' },
      ],
      returnedInserts: [{ priority: 0, segment: 0, position: 0, json: '{}', deliveries: 1, headers: '{"h":"4"}' }],
      deadLetters: {
        queueId: 'dlq',
        items: [
          { priority: 0, json: '{}', headers: '{"h":"5"}' },
          { priority: 0, json: '{}' },
        ],
      },
      redriven: [{ queueId: 'orders', priority: 0, json: '{}', headers: '{"h":"6"}' }],
      deadLetterDefaults: { segmentSize: 10, bufferSegments: 1, version: 3, now: 4 },
    });
    expect(valueOf(values, 'p_ins_headers')).toEqual([null, '{"h":"1"}']);
    expect(valueOf(values, 'p_save_headers')).toEqual([null, null, '{"h":"2"}']);
    expect(valueOf(values, 'p_dl_headers')).toEqual([null, '{"h":"3"}']);
    expect(valueOf(values, 'p_ret_headers')).toEqual(['{"h":"4"}']);
    expect(valueOf(values, 'p_dlq_headers')).toEqual(['{"h":"5"}', null]);
    expect(valueOf(values, 'p_rd_headers')).toEqual(['{"h":"6"}']);
    const locked = writeTurnValues('q1', { ...push, lock: { op: 'upsert', lock: { ...lock, items: [{ ...lock.items[0], headers: '{"h":"7"}' }] } } });
    expect(valueOf(locked, 'p_lock_headers')).toEqual(['{"h":"7"}']);
    const shared = writeTurnValues('q1', { ...push, sharedLockUpserts: [{ ...lock, items: [{ ...lock.items[0], headers: '{"h":"8"}' }] }] });
    expect(JSON.parse(valueOf(shared, 'p_sl_upserts') as string)[0].headers).toEqual(['{"h":"8"}']);
    const withoutHeaders = writeTurnValues('q1', { ...push, lock: { op: 'upsert', lock } });
    expect([valueOf(withoutHeaders, 'p_lock_headers'), valueOf(withoutHeaders, 'p_ins_headers')]).toEqual([null, null]);
    expect(writeTurnValues('q1', push)).toHaveLength(SHORT_FORM_LENGTH);
  });

  it('in the full form, what the write does not give is bound as "nothing to write" (an empty list as null)', () => {
    const values = writeTurnValues('q1', { ...push, sharedLockDeletes: ['l1'] });
    expect(valueOf(values, 'p_sl_deletes')).toEqual(['l1']);
    expect(valueOf(values, 'p_settings')).toBe(false);
    expect(valueOf(values, 'p_lock_mode')).toBe('exclusive');
    expect(valueOf(values, 'p_sl_upserts')).toBe('[]');
    expect(valueOf(values, 'p_ret_priority')).toBeNull();
    expect(valueOf(values, 'p_dlq_id')).toBeNull();
    expect([valueOf(values, 'p_ins_from'), valueOf(values, 'p_lock_from'), valueOf(values, 'p_rd_queue')]).toEqual([null, null, null]);
    const created = writeTurnValues('q1', { ...push, expectedVersion: null });
    expect([valueOf(created, 'p_lock_mode'), valueOf(created, 'p_max_deliveries'), valueOf(created, 'p_dead_letter_queue')]).toEqual(['shared', 3, 'dlq']);
    // The next write of the short form is not affected by this one.
    expect(writeTurnValues('q1', push)).toHaveLength(SHORT_FORM_LENGTH);
  });

  it("the short form's values are those the table gives, in its order", () => {
    expect(writeTurnValues('q1', push)).toEqual(fromTable('q1', push));
    expect(writeTurnValues('q1', { ...push, deleteQueue: true })).toEqual(fromTable('q1', { ...push, deleteQueue: true }));
  });
});

describe('the generated database files', () => {
  it.each(generatedFiles().map((f) => [f.path, f.text]))('%s is current with the declarations (npm run database:generate)', (path, text) => {
    expect(readFileSync(resolve(import.meta.dirname, '../../..', path), 'utf8')).toBe(text);
  });
});
