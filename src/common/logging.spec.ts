import { PassThrough } from 'node:stream';
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { JsonLogger, RequestLogLine, serviceLogger } from './logging.js';
import { requestId } from './request-id.js';
import type { IncomingMessage } from 'node:http';

function capture(level: ConstructorParameters<typeof JsonLogger>[0]): { logger: JsonLogger; lines: () => Record<string, unknown>[] } {
  const stream = new PassThrough();
  let text = '';
  stream.on('data', (chunk: Buffer) => (text += chunk.toString()));
  return {
    logger: new JsonLogger(level, stream),
    lines: () =>
      text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

const fields = { request_id: 'r-1', method: 'POST', url: '/queue/q1/push', queue_id: 'q1', key_name: 'billing' };

describe('JsonLogger', () => {
  it("writes Nest's (message, context) as one JSON object: time, level, message, context", async () => {
    const { logger, lines } = capture('log');
    logger.log('Ready', 'pushpop');
    await new Promise((r) => setImmediate(r));
    const [line] = lines();
    expect(line).toMatchObject({ level: 'info', message: 'Ready', context: 'pushpop', pid: process.pid });
    expect(new Date(line.time as string).toISOString()).toBe(line.time);
  });

  it('takes the stack of an error call, and the fields of a request line', async () => {
    const { logger, lines } = capture('log');
    logger.error('boom', 'Error: boom\n    at x', 'HTTP');
    logger.error(new RequestLogLine('500 INTERNAL_ERROR', fields), undefined, 'HTTP');
    logger.warn(new RequestLogLine('503 STORE_UNAVAILABLE', fields), 'HTTP');
    await new Promise((r) => setImmediate(r));
    expect(lines()).toEqual([
      expect.objectContaining({ level: 'error', message: 'boom', stack: 'Error: boom\n    at x', context: 'HTTP' }),
      expect.objectContaining({ level: 'error', message: '500 INTERNAL_ERROR', context: 'HTTP', ...fields }),
      expect.objectContaining({ level: 'warn', message: '503 STORE_UNAVAILABLE', context: 'HTTP', ...fields }),
    ]);
    expect(lines()[1]).not.toHaveProperty('stack');
  });

  it('writes nothing below its level, and maps verbose to trace', async () => {
    const { logger, lines } = capture('warn');
    logger.log('quiet');
    logger.debug('quieter');
    logger.warn('loud');
    expect(logger.isEnabled('log')).toBe(false);
    expect(logger.isEnabled('error')).toBe(true);
    const verbose = capture('verbose');
    verbose.logger.verbose('very', 'X');
    await new Promise((r) => setImmediate(r));
    expect(lines().map((l) => l.message)).toEqual(['loud']);
    expect(verbose.lines()).toEqual([expect.objectContaining({ level: 'trace', message: 'very', context: 'X' })]);
  });
});

describe('RequestLogLine', () => {
  it('reads as the message with its request, queue and key name in brackets (human-readable logs)', () => {
    const line = new RequestLogLine('500 INTERNAL_ERROR: boom', fields);
    expect(String(line)).toBe('500 INTERNAL_ERROR: boom [request r-1, queue q1, key billing]');
    expect(inspect(line)).toBe(String(line));
    expect(String(new RequestLogLine('404 NOT_FOUND', { request_id: 'r-2', method: 'GET', url: '/x' }))).toBe('404 NOT_FOUND [request r-2]');
  });
});

describe('requestId', () => {
  const request = (id?: string | string[]): IncomingMessage => ({ headers: id === undefined ? {} : { 'x-request-id': id } }) as unknown as IncomingMessage;
  const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

  it.each(['a', 'order-4711:push.1', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', 'Root=1-5e1b4151-5ac6c58f/x+y~z@h', 'x'.repeat(128)])(
    'keeps %s',
    (id) => expect(requestId(request(id))).toBe(id),
  );

  it.each([[''], ['x'.repeat(129)], ['a b'], ['a"b'], ['a\nb'], ['ü'], [['a', 'b']], [undefined]])('replaces %j with a new UUID', (id) => {
    expect(requestId(request(id))).toMatch(UUID);
  });

  it('makes a different id each time', () => {
    expect(requestId(request())).not.toBe(requestId(request()));
  });
});

describe('serviceLogger', () => {
  it('is JSON lines with LOG_FORMAT=json, else the levels of Nest’s own logger, undefined for an unknown level', () => {
    expect(serviceLogger('log', 'json')).toBeInstanceOf(JsonLogger);
    expect(serviceLogger('warn', 'text')).toEqual(['fatal', 'error', 'warn']);
    expect(serviceLogger('verbose', undefined)).toEqual(['fatal', 'error', 'warn', 'log', 'debug', 'verbose']);
    expect(serviceLogger('loud', 'json')).toBeUndefined();
  });
});
