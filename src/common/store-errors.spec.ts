import { describe, expect, it } from 'vitest';
import { isConnectionFailure, isTransientConflict } from './store-errors.js';

const withCode = (message: string, props: Record<string, unknown>): Error => Object.assign(new Error(message), props);

describe('isConnectionFailure', () => {
  it.each([
    ['a refused connection', withCode('connect ECONNREFUSED 127.0.0.1:5432', { code: 'ECONNREFUSED', syscall: 'connect', errno: -111 })],
    ['a unix socket that is gone', withCode('connect ENOENT /data/run/.s.PGSQL.5432', { code: 'ENOENT', syscall: 'connect', errno: -2 })],
    ['a broken pipe (EPIPE looks like an SQLSTATE)', withCode('write EPIPE', { code: 'EPIPE', syscall: 'write', errno: -32 })],
    ['a reset', withCode('read ECONNRESET', { code: 'ECONNRESET', syscall: 'read' })],
    ['an administrator shutdown', withCode('terminating connection due to administrator command', { code: '57P01' })],
    ['a server starting up', withCode('the database system is starting up', { code: '57P03' })],
    ['too many connections', withCode('sorry, too many clients already', { code: '53300' })],
    ['a connection exception', withCode('connection failure', { code: '08006' })],
    ['the driver losing the connection', new Error('Connection terminated unexpectedly')],
    ['the pool timing out', new Error('timeout exceeded when trying to connect')],
    ['a client that broke', new Error('Client has encountered a connection error and is not queryable')],
  ])('%s: unavailable', (_label, error) => {
    expect(isConnectionFailure(error)).toBe(true);
  });

  it.each([
    ['a unique violation', withCode('duplicate key value violates unique constraint', { code: '23505' })],
    ['a syntax error', withCode('syntax error at or near "x"', { code: '42601' })],
    ['a missing function', withCode('function pushpop_write_turn does not exist', { code: '42883' })],
    ['a plain bug', new TypeError('Cannot read properties of undefined')],
    ['not an error', 'EPIPE'],
  ])('%s: a fault, not an outage', (_label, error) => {
    expect(isConnectionFailure(error)).toBe(false);
  });
});

describe('isTransientConflict', () => {
  it('a deadlock or a serialization failure: run the transaction again', () => {
    expect(isTransientConflict(withCode('deadlock detected', { code: '40P01' }))).toBe(true);
    expect(isTransientConflict(withCode('could not serialize access due to concurrent update', { code: '40001' }))).toBe(true);
  });

  it('anything else is not', () => {
    expect(isTransientConflict(withCode('duplicate key value violates unique constraint', { code: '23505' }))).toBe(false);
    expect(isTransientConflict(withCode('terminating connection due to administrator command', { code: '57P01' }))).toBe(false);
    expect(isTransientConflict(new Error('deadlock detected'))).toBe(false);
    expect(isTransientConflict(null)).toBe(false);
  });
});
