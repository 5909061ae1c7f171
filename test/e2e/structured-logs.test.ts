import { stripVTControlCharacters } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildService, sharedChildDatabase, startChildService, type ChildService, type ServiceBuild } from '../support/child-service.js';
import { sleep, until } from '../support/queue-helpers.js';
import { databaseKind, makeDataDir, removeDataDir, uniqueQueueId } from '../support/service.js';

/**
 * Logs a machine can read (docs/operations.md "Logs"): with LOG_FORMAT=json the service, run as
 * `node dist/main.js`, writes one JSON object per line on standard output, Nest's own lines
 * included; each request's id comes from `X-Request-Id` when it is acceptable (else a new one)
 * and goes back in the answer's header, also on refusals and errors; no key ever appears.
 * Without LOG_FORMAT the lines stay Nest's human-readable ones, and a successful request writes
 * nothing at the default level.
 */
const KEYS = {
  producer: 'producer-key-0123456789',
  consumer: 'consumer-key-0123456789',
  limited: 'limited-key-0123456789ab',
};
const UNKNOWN_KEY = 'unknown-key-9876543210zz';
const API_KEYS = `producer:${KEYS.producer}:produce,consumer:${KEYS.consumer}:consume,limited:${KEYS.limited}:read`;
/** Every request a key name may make before its bucket is empty (the `limited` key empties its own). */
const BURST = 20;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

interface LogLine {
  time: string;
  level: string;
  message: string;
  context?: string;
  request_id?: string;
  queue_id?: string;
  key_name?: string;
  [field: string]: unknown;
}

/** Every line of `text`, parsed; a line that is not one JSON object fails the test with the line. */
function parseLines(text: string): LogLine[] {
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        throw new Error(`not a JSON line: ${line}`);
      }
      expect(parsed, line).toBeTypeOf('object');
      return parsed as LogLine;
    });
}

describe(`structured logs (${databaseKind})`, () => {
  let build: ServiceBuild | undefined;
  const dataDirs: string[] = [];

  beforeAll(async () => {
    build = await buildService();
  }, 240_000);

  afterAll(() => {
    build?.remove();
    for (const dir of dataDirs) removeDataDir(dir);
  });

  const start = async (env: Record<string, string>): Promise<ChildService> => {
    const dataDir = makeDataDir();
    dataDirs.push(dataDir);
    return startChildService({ build: build!, dataDir, env });
  };

  describe('LOG_FORMAT=json, LOG_LEVEL=debug', () => {
    let service: ChildService;
    const q = uniqueQueueId('logs');
    /** The answers' X-Request-Id by what the test sent. */
    const ids: Record<string, string | undefined> = {};

    beforeAll(async () => {
      service = await start({ LOG_FORMAT: 'json', LOG_LEVEL: 'debug', API_KEYS, RATE_LIMIT_PER_SECOND: '0.01', RATE_LIMIT_BURST: String(BURST) });
      const { http } = service;
      const chosen = await http
        .post(`/queue/${q}/push`)
        .set('Authorization', `Bearer ${KEYS.producer}`)
        .set('X-Request-Id', 'order-4711:push.1')
        .send({ item: { n: 1 } });
      expect(chosen.status).toBe(200);
      ids.chosen = chosen.headers['x-request-id'];

      const generated = await http.post(`/queue/${q}/pop`).set('X-API-Key', KEYS.consumer);
      expect(generated.status).toBe(200);
      ids.generated = generated.headers['x-request-id'];

      const tooLong = await http
        .post(`/queue/${q}/push`)
        .set('Authorization', `Bearer ${KEYS.producer}`)
        .set('X-Request-Id', 'x'.repeat(129))
        .send({ item: { n: 2 } });
      expect(tooLong.status).toBe(200);
      ids.tooLong = tooLong.headers['x-request-id'];
      const badChars = await http
        .post(`/queue/${q}/push`)
        .set('Authorization', `Bearer ${KEYS.producer}`)
        .set('X-Request-Id', 'a b"c{}')
        .send({ item: { n: 3 } });
      expect(badChars.status).toBe(200);
      ids.badChars = badChars.headers['x-request-id'];

      const invalid = await http.post(`/queue/${q}/push`).set('Authorization', `Bearer ${KEYS.producer}`).set('X-Request-Id', 'invalid-1').send({ item: [] });
      expect(invalid.status).toBe(400);
      ids.invalid = invalid.headers['x-request-id'];

      const unknown = await http.post(`/queue/${q}/pop`).set('Authorization', `Bearer ${UNKNOWN_KEY}`).set('X-Request-Id', 'unknown-1');
      expect(unknown.status).toBe(401);
      ids.unknown = unknown.headers['x-request-id'];

      const notFound = await http.get('/no/such/route').set('X-Request-Id', 'not-found-1');
      expect(notFound.status).toBe(404);
      ids.notFound = notFound.headers['x-request-id'];

      const badUrl = await http.get('/queue/%E0%A4%A').set('X-Request-Id', 'bad-url-1');
      expect(badUrl.status).toBe(400);
      ids.badUrl = badUrl.headers['x-request-id'];

      // A 5xx is logged at every level: a private build has no console to serve.
      const unavailable = await http.get('/admin/').set('X-Request-Id', 'admin-1');
      expect(unavailable.status).toBe(503);
      expect(unavailable.body.error_code).toBe('ADMIN_NOT_BUILT');
      ids.unavailable = unavailable.headers['x-request-id'];

      let limited = await http.get('/queues').set('X-API-Key', KEYS.limited);
      for (let i = 1; i <= BURST && limited.status !== 429; i++)
        limited = await http.get('/queues').set('X-API-Key', KEYS.limited).set('X-Request-Id', `limited-${i}`);
      expect(limited.status).toBe(429);
      ids.limited = limited.headers['x-request-id'];
      // The last lines are written after the answers: wait until they are there.
      for (let i = 0; i < 50 && !service.stdout().includes(`"request_id":"${ids.limited}"`); i++) await sleep(100);
    }, 120_000);

    afterAll(async () => {
      await service?.kill('SIGKILL');
    });

    it('writes one JSON object per line on stdout, with time, level and message', () => {
      const lines = parseLines(service.stdout());
      expect(lines.length).toBeGreaterThan(10);
      for (const line of lines) {
        expect(new Date(line.time).toISOString(), JSON.stringify(line)).toBe(line.time);
        expect(['fatal', 'error', 'warn', 'info', 'debug', 'trace'], JSON.stringify(line)).toContain(line.level);
        expect(line.message, JSON.stringify(line)).toBeTypeOf('string');
      }
    });

    it("carries Nest's own lines: startup, the routes, Listening and Ready", () => {
      const lines = parseLines(service.stdout());
      const messages = lines.map((l) => `${l.context ?? ''}: ${l.message}`);
      expect(messages).toContainEqual(expect.stringMatching(/^NestFactory: Starting Nest application/));
      expect(messages).toContainEqual(expect.stringMatching(/^pushpop: Listening on http:\/\/127\.0\.0\.1:\d+/));
      expect(messages).toContainEqual('pushpop: Ready');
      // The key names are logged at startup, never the keys.
      expect(messages).toContainEqual(expect.stringMatching(/^Auth: API keys: producer \(produce\), consumer \(consume\), limited \(read\)$/));
    });

    it('takes an acceptable X-Request-Id, else makes a UUID, and answers it on every answer (400, 401, 404, 429 too)', () => {
      expect(ids.chosen).toBe('order-4711:push.1');
      expect(ids.generated).toMatch(UUID);
      expect(ids.tooLong).toMatch(UUID);
      expect(ids.badChars).toMatch(UUID);
      expect(ids.invalid).toBe('invalid-1');
      expect(ids.unknown).toBe('unknown-1');
      expect(ids.notFound).toBe('not-found-1');
      expect(ids.badUrl).toBe('bad-url-1');
      expect(ids.limited).toBe(`limited-${BURST}`);
      expect(ids.unavailable).toBe('admin-1');
      expect(new Set(Object.values(ids)).size, 'every request got its own id').toBe(Object.keys(ids).length);
    });

    it('logs each answered request at debug with its request id, queue id and key name', () => {
      const lines = parseLines(service.stdout());
      const byId = (id: string | undefined): LogLine | undefined => lines.find((l) => l.request_id === id);
      expect(byId(ids.chosen)).toMatchObject({ level: 'debug', context: 'HTTP', queue_id: q, key_name: 'producer', method: 'POST' });
      expect(byId(ids.chosen)!.message).toMatch(new RegExp(`^POST /queue/${q}/push 200 \\d+\\.\\d ms$`));
      expect(byId(ids.generated)).toMatchObject({ queue_id: q, key_name: 'consumer' });
      expect(byId(ids.generated)!.message).toMatch(/ 200 /);
      expect(byId(ids.invalid)).toMatchObject({ queue_id: q, key_name: 'producer' });
      expect(byId(ids.invalid)!.message).toMatch(/ 400 /);
      // An unknown key names no key at all.
      expect(byId(ids.unknown)).toMatchObject({ queue_id: q });
      expect(byId(ids.unknown)!.message).toMatch(/ 401 /);
      expect(byId(ids.unknown)).not.toHaveProperty('key_name');
      expect(byId(ids.limited)).toMatchObject({ key_name: 'limited' });
      expect(byId(ids.limited)!.message).toMatch(/ 429 /);
      expect(byId(ids.notFound)!.message).toMatch(/ 404 /);
    });

    it('logs a 5xx answer as a warning with its request fields', () => {
      const lines = parseLines(service.stdout()).filter((l) => l.request_id === 'admin-1');
      expect(lines).toContainEqual(
        expect.objectContaining({ level: 'warn', context: 'HTTP', method: 'GET', url: '/admin/', message: expect.stringMatching(/^503 ADMIN_NOT_BUILT: /) }),
      );
    });

    it('WORKERS=2: the primary and both workers write JSON lines too, through a graceful stop', async () => {
      const workers = await start({ ...sharedChildDatabase(service.dataDir), WORKERS: '2', LOG_FORMAT: 'json', LOG_LEVEL: 'log' });
      try {
        expect(await until(() => workers.stdout().includes('2 workers ready'), 60_000, 50)).toBe(true);
        expect((await workers.http.post(`/queue/${q}/push`).send({ item: { w: 1 } })).status).toBe(200);
      } finally {
        expect(await workers.kill('SIGTERM')).toEqual({ code: 0, signal: null });
      }
      const lines = parseLines(workers.stdout());
      const primary = lines.filter((l) => l.pid === workers.child.pid).map((l) => `${l.context}: ${l.message}`);
      expect(primary).toEqual(
        expect.arrayContaining(['pushpop: Starting 2 workers', 'pushpop: 2 workers ready', 'pushpop: SIGTERM: stopping 2 worker(s)', 'pushpop: Stopped']),
      );
      expect(new Set(lines.map((l) => l.pid)).size, 'the primary and two workers').toBe(3);
    });

    it('never writes a key, known or unknown, anywhere in its output', () => {
      const output = service.output();
      for (const key of [...Object.values(KEYS), UNKNOWN_KEY]) expect(output).not.toContain(key);
      expect(output).not.toMatch(/Bearer/i);
    });
  });

  describe('defaults', () => {
    let service: ChildService;

    beforeAll(async () => {
      service = await start({ LOG_LEVEL: 'log' });
    }, 120_000);

    afterAll(async () => {
      await service?.kill('SIGKILL');
    });

    it("stay Nest's human-readable lines, and successful pushes and pops write nothing", async () => {
      const startup = service.stdout();
      const plain = stripVTControlCharacters(startup);
      expect(plain).toMatch(/^\[Nest\] \d+ +- .+ +LOG \[NestFactory\] Starting Nest application/m);
      expect(plain).toMatch(/LOG \[pushpop\] Ready/);
      expect(() => parseLines(startup)).toThrow(/not a JSON line/);
      const q = uniqueQueueId('quiet');
      for (let i = 0; i < 20; i++) expect((await service.http.post(`/queue/${q}/push`).send({ item: { n: i } })).status).toBe(200);
      for (let i = 0; i < 20; i++) expect((await service.http.post(`/queue/${q}/pop`)).status).toBe(200);
      const answer = await service.http.post(`/queue/${q}/pop`).set('X-Request-Id', 'default-1');
      expect(answer.headers['x-request-id']).toBe('default-1');
      // An error answer is a human-readable line naming its request.
      expect((await service.http.get('/admin/').set('X-Request-Id', 'default-503')).status).toBe(503);
      await expect.poll(() => stripVTControlCharacters(service.stdout())).toMatch(/WARN \[HTTP\] 503 ADMIN_NOT_BUILT: .* \[request default-503\]$/m);
      // Lines are written in order: the pushes and pops before it wrote nothing, it is the one line since the start.
      expect(service.stdout().startsWith(startup)).toBe(true);
      expect(stripVTControlCharacters(service.stdout().slice(startup.length))).toMatch(
        /^[^\n]*WARN \[HTTP\] 503 ADMIN_NOT_BUILT: [^\n]* \[request default-503\]\n$/,
      );
    });
  });
});
