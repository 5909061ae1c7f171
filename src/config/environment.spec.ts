import { describe, expect, it } from 'vitest';
import { Environment, EnvironmentError, LOG_FORMATS, LOG_LEVELS, parseEnvironment } from './environment.js';

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

const DEFAULTS = {
  PORT: 8000,
  HOST: '127.0.0.1',
  DATABASE_URL: undefined,
  DATA_DIR: './.data',
  SEGMENT_SIZE: 100,
  BUFFER_SEGMENTS: 1,
  MAX_PRIORITY: 255,
  MAX_ITEM_BYTES: 262_144,
  MAX_BODY_BYTES: 1_048_576,
  ACTOR_IDLE_TIMEOUT_MS: 60_000,
  MAX_PENDING_PER_QUEUE: 1000,
  MAX_WAITING_POLLS: 10_000,
  LOCK_SWEEP_INTERVAL_MS: 1000,
  DELAY_SWEEP_INTERVAL_MS: 1000,
  DEDUP_SWEEP_INTERVAL_MS: 10_000,
  DEDUP_WINDOW_SECONDS: 300,
  DB_POOL_SIZE: 10,
  RATE_LIMIT_PER_SECOND: 0,
  LOG_LEVEL: 'log',
  LOG_FORMAT: 'text',
  WORKERS: 1,
};

describe('parseEnvironment', () => {
  it('gives the documented defaults for an empty environment', () => {
    const env = parseEnvironment({});
    expect(env).toBeInstanceOf(Environment);
    expect(env).toMatchObject(DEFAULTS);
    expect(env.DATABASE_URL).toBeUndefined();
  });

  it('treats empty strings as unset', () => {
    const empty = Object.fromEntries(Object.keys(DEFAULTS).map((k) => [k, '']));
    expect(parseEnvironment(empty)).toMatchObject(DEFAULTS);
  });

  it('ignores variables it does not know', () => {
    const env = parseEnvironment({ PATH: '/usr/bin', HOME: '/root', SEGMENT_SIZ: 'oops' });
    expect(env).toMatchObject(DEFAULTS);
    expect(env).not.toHaveProperty('PATH');
  });

  it('parses numbers into numbers', () => {
    const env = parseEnvironment({
      PORT: '9000',
      SEGMENT_SIZE: '5',
      BUFFER_SEGMENTS: '3',
      MAX_PRIORITY: '9',
      MAX_ITEM_BYTES: '1000',
      MAX_BODY_BYTES: '2048',
      ACTOR_IDLE_TIMEOUT_MS: '100',
      MAX_PENDING_PER_QUEUE: '7',
      MAX_WAITING_POLLS: '0',
      LOCK_SWEEP_INTERVAL_MS: '50',
      DEDUP_WINDOW_SECONDS: '2',
      DB_POOL_SIZE: '200',
    });
    expect(env).toMatchObject({
      PORT: 9000,
      SEGMENT_SIZE: 5,
      BUFFER_SEGMENTS: 3,
      MAX_PRIORITY: 9,
      MAX_ITEM_BYTES: 1000,
      MAX_BODY_BYTES: 2048,
      ACTOR_IDLE_TIMEOUT_MS: 100,
      MAX_PENDING_PER_QUEUE: 7,
      MAX_WAITING_POLLS: 0,
      LOCK_SWEEP_INTERVAL_MS: 50,
      DEDUP_WINDOW_SECONDS: 2,
      DB_POOL_SIZE: 200,
    });
    expect(typeof env.PORT).toBe('number');
    expect(typeof env.SEGMENT_SIZE).toBe('number');
  });

  it('tolerates surrounding spaces in numbers', () => {
    expect(parseEnvironment({ SEGMENT_SIZE: ' 42 ' }).SEGMENT_SIZE).toBe(42);
  });

  it('takes strings as they are', () => {
    const env = parseEnvironment({ HOST: '0.0.0.0', DATA_DIR: '/var/lib/pushpop', DATABASE_URL: 'postgres://u@db:5432/pushpop', LOG_LEVEL: 'debug' });
    expect(env).toMatchObject({ HOST: '0.0.0.0', DATA_DIR: '/var/lib/pushpop', DATABASE_URL: 'postgres://u@db:5432/pushpop', LOG_LEVEL: 'debug' });
  });

  it.each(LOG_LEVELS)('accepts LOG_LEVEL=%s', (level) => {
    expect(parseEnvironment({ LOG_LEVEL: level }).LOG_LEVEL).toBe(level);
  });

  it.each(LOG_FORMATS)('accepts LOG_FORMAT=%s', (format) => {
    expect(parseEnvironment({ LOG_FORMAT: format }).LOG_FORMAT).toBe(format);
  });

  it('refuses another LOG_FORMAT, naming the variable', () => {
    expect(() => parseEnvironment({ LOG_FORMAT: 'xml' })).toThrow(/LOG_FORMAT="xml"/);
  });

  it('takes WORKERS above 1 only with DATABASE_URL', () => {
    expect(parseEnvironment({ WORKERS: '4', DATABASE_URL: 'postgres://u@db:5432/pushpop' }).WORKERS).toBe(4);
    const message = (env: Record<string, string>): string => (thrown(() => parseEnvironment(env)) as Error).message;
    expect(message({ WORKERS: '2' })).toContain('WORKERS=2: several workers need DATABASE_URL');
    expect(message({ WORKERS: '0', DATABASE_URL: 'postgres://u@db/p' })).toContain('WORKERS');
    expect(message({ WORKERS: '1.5', DATABASE_URL: 'postgres://u@db/p' })).toContain('WORKERS');
  });

  it('does not read process.env', () => {
    const before = process.env.SEGMENT_SIZE;
    process.env.SEGMENT_SIZE = '7';
    try {
      expect(parseEnvironment({}).SEGMENT_SIZE).toBe(100);
    } finally {
      if (before === undefined) delete process.env.SEGMENT_SIZE;
      else process.env.SEGMENT_SIZE = before;
    }
  });

  it('names every bad variable in one error', () => {
    const error = thrown(() => parseEnvironment({ PORT: 'abc', SEGMENT_SIZE: '0', LOG_LEVEL: 'loud', MAX_PRIORITY: '10', HOST: 'example' }));
    expect(error).toBeInstanceOf(EnvironmentError);
    const { problems, message } = error as EnvironmentError;
    expect(problems).toHaveLength(3);
    expect(problems.map((p) => p.split('=')[0]).sort()).toEqual(['LOG_LEVEL', 'PORT', 'SEGMENT_SIZE']);
    expect(problems.find((p) => p.startsWith('PORT='))).toContain('"abc"');
    expect(problems.find((p) => p.startsWith('LOG_LEVEL='))).toContain('"loud"');
    for (const name of ['PORT', 'SEGMENT_SIZE', 'LOG_LEVEL']) expect(message).toContain(name);
    expect(message).not.toContain('MAX_PRIORITY');
    expect(message).not.toContain('HOST');
  });

  it('OpenTelemetry: an http(s) endpoint and a list of known exporters, or unset', () => {
    expect(parseEnvironment({})).toMatchObject({ OTEL_EXPORTER_OTLP_ENDPOINT: undefined, OTEL_TRACES_EXPORTER: undefined });
    const on = parseEnvironment({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'otlp, console', OTEL_SERVICE_NAME: 'pp' });
    expect(on).toMatchObject({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'otlp, console', OTEL_SERVICE_NAME: 'pp' });
    const error = thrown(() => parseEnvironment({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318', OTEL_TRACES_EXPORTER: 'jaeger' })) as EnvironmentError;
    expect(error.problems.map((p) => p.split('=')[0]).sort()).toEqual(['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_TRACES_EXPORTER']);
  });

  it('DATABASE_SCHEMA: a lower-case identifier, or unset', () => {
    expect(parseEnvironment({}).DATABASE_SCHEMA).toBeUndefined();
    expect(parseEnvironment({ DATABASE_SCHEMA: 'pushpop_2' }).DATABASE_SCHEMA).toBe('pushpop_2');
    for (const bad of ['Pushpop', '2nd', 'a-b', 'x; DROP TABLE queues', 'a'.repeat(64)]) {
      const error = thrown(() => parseEnvironment({ DATABASE_SCHEMA: bad }));
      expect((error as EnvironmentError).problems, bad).toHaveLength(1);
      expect((error as EnvironmentError).problems[0]).toMatch(/^DATABASE_SCHEMA=/);
    }
  });

  it('CORS_ORIGINS: origins separated by commas, or unset', () => {
    expect(parseEnvironment({}).CORS_ORIGINS).toBeUndefined();
    for (const good of ['https://console.example.com', 'http://localhost:5173, https://a.example:8443'])
      expect(parseEnvironment({ CORS_ORIGINS: good }).CORS_ORIGINS).toBe(good);
    for (const bad of ['*', 'console.example.com', 'https://a.example/', 'https://a.example,', 'ftp://a.example', 'https://a.example https://b.example']) {
      const error = thrown(() => parseEnvironment({ CORS_ORIGINS: bad }));
      expect((error as EnvironmentError).problems, bad).toHaveLength(1);
      expect((error as EnvironmentError).problems[0]).toMatch(/^CORS_ORIGINS=/);
    }
  });

  it('refuses BUFFER_SEGMENTS=0 (minimum 1) and accepts 1', () => {
    const error = thrown(() => parseEnvironment({ BUFFER_SEGMENTS: '0' }));
    expect(error).toBeInstanceOf(EnvironmentError);
    expect((error as EnvironmentError).problems).toHaveLength(1);
    expect((error as EnvironmentError).problems[0]).toMatch(/^BUFFER_SEGMENTS=/);
    expect(parseEnvironment({ BUFFER_SEGMENTS: '1' }).BUFFER_SEGMENTS).toBe(1);
  });

  it.each([
    ['PORT', '1.5'],
    ['PORT', '65536'],
    ['PORT', '-1'],
    ['PORT', '80abc'],
    ['PORT', '0x50'],
    ['SEGMENT_SIZE', '1e3'],
    ['SEGMENT_SIZE', '100001'],
    ['BUFFER_SEGMENTS', '-1'],
    ['MAX_PRIORITY', '-1'],
    ['MAX_ITEM_BYTES', '1'],
    ['MAX_BODY_BYTES', '1023'],
    ['ACTOR_IDLE_TIMEOUT_MS', '99'],
    ['MAX_PENDING_PER_QUEUE', '0'],
    ['MAX_WAITING_POLLS', '-1'],
    ['MAX_WAITING_POLLS', '1000001'],
    ['MAX_WAITING_POLLS', '10k'],
    ['LOCK_SWEEP_INTERVAL_MS', '49'],
    ['DEDUP_WINDOW_SECONDS', '0'],
    ['DEDUP_WINDOW_SECONDS', '86401'],
    ['DEDUP_WINDOW_SECONDS', '1.5'],
    ['DB_POOL_SIZE', '0'],
    ['DB_POOL_SIZE', '201'],
    ['RATE_LIMIT_PER_SECOND', '-1'],
    ['RATE_LIMIT_PER_SECOND', '1000001'],
    ['RATE_LIMIT_PER_SECOND', '0.0001'],
    ['RATE_LIMIT_PER_SECOND', '1e3'],
    ['RATE_LIMIT_PER_SECOND', '.5'],
    ['RATE_LIMIT_PER_SECOND', 'ten'],
    ['RATE_LIMIT_BURST', '0'],
    ['RATE_LIMIT_BURST', '1.5'],
    ['RATE_LIMIT_BURST', '10000001'],
    ['LOG_LEVEL', 'LOG'],
  ])('refuses %s=%s', (name, value) => {
    const error = thrown(() => parseEnvironment({ [name]: value }));
    expect(error).toBeInstanceOf(EnvironmentError);
    expect((error as EnvironmentError).problems).toEqual([expect.stringMatching(new RegExp(`^${name}=`))]);
  });

  it('RATE_LIMIT_*: off by default; the burst is twice the rate unless given', () => {
    expect(parseEnvironment({})).toMatchObject({ RATE_LIMIT_PER_SECOND: 0, RATE_LIMIT_BURST: 0 });
    expect(parseEnvironment({ RATE_LIMIT_PER_SECOND: '5' })).toMatchObject({ RATE_LIMIT_PER_SECOND: 5, RATE_LIMIT_BURST: 10 });
    expect(parseEnvironment({ RATE_LIMIT_PER_SECOND: '5', RATE_LIMIT_BURST: '3' })).toMatchObject({ RATE_LIMIT_PER_SECOND: 5, RATE_LIMIT_BURST: 3 });
    // A fraction of a request per second: the default burst is rounded up to whole requests.
    expect(parseEnvironment({ RATE_LIMIT_PER_SECOND: '0.5' })).toMatchObject({ RATE_LIMIT_PER_SECOND: 0.5, RATE_LIMIT_BURST: 1 });
    expect(parseEnvironment({ RATE_LIMIT_PER_SECOND: '1.25' })).toMatchObject({ RATE_LIMIT_PER_SECOND: 1.25, RATE_LIMIT_BURST: 3 });
    expect(parseEnvironment({ RATE_LIMIT_PER_SECOND: '0.001', RATE_LIMIT_BURST: '1' })).toMatchObject({ RATE_LIMIT_PER_SECOND: 0.001, RATE_LIMIT_BURST: 1 });
    expect(parseEnvironment({ RATE_LIMIT_PER_SECOND: '1000000', RATE_LIMIT_BURST: '10000000' })).toMatchObject({
      RATE_LIMIT_PER_SECOND: 1_000_000,
      RATE_LIMIT_BURST: 10_000_000,
    });
  });

  it('accepts the bounds', () => {
    expect(parseEnvironment({ PORT: '0', MAX_PRIORITY: '0', MAX_ITEM_BYTES: '2', MAX_BODY_BYTES: '1024', SEGMENT_SIZE: '1' })).toMatchObject({
      PORT: 0,
      MAX_PRIORITY: 0,
      MAX_ITEM_BYTES: 2,
      MAX_BODY_BYTES: 1024,
      SEGMENT_SIZE: 1,
    });
    expect(parseEnvironment({ PORT: '65535', SEGMENT_SIZE: '100000' })).toMatchObject({ PORT: 65535, SEGMENT_SIZE: 100_000 });
    expect(parseEnvironment({ DEDUP_WINDOW_SECONDS: '1' }).DEDUP_WINDOW_SECONDS).toBe(1);
    expect(parseEnvironment({ DEDUP_WINDOW_SECONDS: '86400' }).DEDUP_WINDOW_SECONDS).toBe(86_400);
  });

  it('gives each sweep its own interval; the delay sweep follows LOCK_SWEEP_INTERVAL_MS (its old setting) unless set', () => {
    expect(parseEnvironment({ LOCK_SWEEP_INTERVAL_MS: '200' })).toMatchObject({
      LOCK_SWEEP_INTERVAL_MS: 200,
      DELAY_SWEEP_INTERVAL_MS: 200,
      DEDUP_SWEEP_INTERVAL_MS: 10_000,
    });
    expect(parseEnvironment({ LOCK_SWEEP_INTERVAL_MS: '200', DELAY_SWEEP_INTERVAL_MS: '5000', DEDUP_SWEEP_INTERVAL_MS: '60000' })).toMatchObject({
      LOCK_SWEEP_INTERVAL_MS: 200,
      DELAY_SWEEP_INTERVAL_MS: 5000,
      DEDUP_SWEEP_INTERVAL_MS: 60_000,
    });
    expect(() => parseEnvironment({ DELAY_SWEEP_INTERVAL_MS: '49' })).toThrow(/DELAY_SWEEP_INTERVAL_MS/);
    expect(() => parseEnvironment({ DEDUP_SWEEP_INTERVAL_MS: 'often' })).toThrow(/DEDUP_SWEEP_INTERVAL_MS/);
  });
});
