import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { propertyRuns, seededRandom, testSeed } from '../support/queue-helpers.js';
import { databaseKind, removeDataDir, startService, TestService, uniqueQueueId } from '../support/service.js';

/**
 * Hostile requests, 10,000 in all (see PROPERTY_RUNS_SCALE), across every route, on a service with API keys and on one
 * without, sent as raw bytes on their own connections (so that malformed request lines,
 * headers and bodies reach the server as written). Checked:
 * - every request gets an answer, and none is 5xx;
 * - requests built to be refused (no key, an unknown key, a key without the scope; or, with a
 *   key that may, an invalid queue id, query, body, content type or lock id) are refused with
 *   their 4xx, and change nothing: the watched queues are byte for byte as before (metadata,
 *   items, lock), and no queue they named was created;
 * - anything else (random methods, paths, headers and bodies with any key) is answered below 500.
 */

const seed = testSeed();
const where = `(seed ${seed}, ${databaseKind})`;

const KEYS = {
  admin: 'admin-key-0123456789abcdef',
  reader: 'reader-key-0123456789abcde',
  producer: 'producer-key-0123456789ab',
  consumer: 'consumer-key-0123456789ab',
};
const API_KEYS = `admin:${KEYS.admin}:admin,reader:${KEYS.reader}:read,producer:${KEYS.producer}:produce,consumer:${KEYS.consumer}:consume`;

type Scope = 'produce' | 'consume' | 'read' | 'admin' | 'any';
interface RouteSpec {
  name: string;
  method: string;
  path: (q: string) => string;
  scope: Scope;
  /** The route takes a JSON body. */
  body: boolean;
}
const ROUTES: RouteSpec[] = [
  { name: 'push', method: 'POST', path: (q) => `/queue/${q}/push`, scope: 'produce', body: true },
  { name: 'pushBatch', method: 'POST', path: (q) => `/queue/${q}/push/batch`, scope: 'produce', body: true },
  { name: 'pop', method: 'POST', path: (q) => `/queue/${q}/pop`, scope: 'consume', body: false },
  { name: 'acknowledge', method: 'POST', path: (q) => `/queue/${q}/acknowledge`, scope: 'consume', body: true },
  { name: 'extendLock', method: 'POST', path: (q) => `/queue/${q}/extend-lock`, scope: 'consume', body: true },
  { name: 'release', method: 'POST', path: (q) => `/queue/${q}/release`, scope: 'consume', body: true },
  { name: 'acknowledgeBatch', method: 'POST', path: (q) => `/queue/${q}/acknowledge/batch`, scope: 'consume', body: true },
  { name: 'releaseBatch', method: 'POST', path: (q) => `/queue/${q}/release/batch`, scope: 'consume', body: true },
  { name: 'getQueue', method: 'GET', path: (q) => `/queue/${q}`, scope: 'read', body: false },
  { name: 'getState', method: 'GET', path: (q) => `/queue/${q}/state/metadata`, scope: 'read', body: false },
  { name: 'getSettings', method: 'GET', path: (q) => `/queue/${q}/settings`, scope: 'read', body: false },
  { name: 'putSettings', method: 'PUT', path: (q) => `/queue/${q}/settings`, scope: 'admin', body: true },
  { name: 'listQueues', method: 'GET', path: () => '/queues', scope: 'read', body: false },
  { name: 'deleteQueue', method: 'DELETE', path: (q) => `/queue/${q}`, scope: 'admin', body: false },
  { name: 'redrive', method: 'POST', path: (q) => `/queue/${q}/redrive`, scope: 'admin', body: true },
  { name: 'metrics', method: 'GET', path: () => '/metrics', scope: 'read', body: false },
  { name: 'whoami', method: 'GET', path: () => '/whoami', scope: 'any', body: false },
];

interface RawRequest {
  method: string;
  target: string;
  headers: [string, string][];
  body?: Buffer;
  /** Written as is, instead of a request built from the fields above. */
  raw?: Buffer;
}
interface Answer {
  status: number;
  body: string;
}

/** Sends one request on its own connection and reads the answer until the server closes it. */
function send(port: number, req: RawRequest): Promise<Answer | { error: string }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const finish = (error?: string): void => {
      socket.destroy();
      const text = Buffer.concat(chunks).toString('latin1');
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(text);
      if (status) resolve({ status: Number(status[1]), body: text.slice(text.indexOf('\r\n\r\n') + 4) });
      else resolve({ error: error ?? `no status line in ${JSON.stringify(text.slice(0, 200))}` });
    };
    socket.setTimeout(15_000, () => finish('no answer within 15 s'));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('end', () => finish());
    socket.on('error', (error) => finish(error.message));
    socket.on('connect', () => {
      if (req.raw) {
        socket.end(req.raw);
        return;
      }
      const body = req.body ?? Buffer.alloc(0);
      const head = [`${req.method} ${req.target} HTTP/1.1`, 'Host: 127.0.0.1', 'Connection: close', ...req.headers.map(([k, v]) => `${k}: ${v}`)];
      if (!req.headers.some(([k]) => /^(content-length|transfer-encoding)$/i.test(k))) head.push(`Content-Length: ${body.length}`);
      // Half-close after writing: the answer still comes back on the open read side.
      socket.write(Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n`, 'latin1'), body]));
    });
  });
}

/** Runs `jobs` with at most `width` in flight. */
async function pool<T>(jobs: (() => Promise<T>)[], width: number): Promise<T[]> {
  const out: T[] = new Array(jobs.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < jobs.length) {
        const i = next++;
        out[i] = await jobs[i]();
      }
    }),
  );
  return out;
}

/** What a generated request must get. */
type Expect = { kind: 'refused'; statuses: number[] } | { kind: 'any'; mayDrop?: boolean };
interface Case {
  label: string;
  req: RawRequest;
  expect: Expect;
}

/** Queue ids no valid request may name: invalid ones, and ones the URL mangles. */
const BAD_IDS = [
  '.',
  '..',
  '%2e%2e',
  'a%2Fb',
  'x'.repeat(201),
  'caf%C3%A9',
  'a%20b',
  '%00',
  'a%0d%0ab',
  "1'%3B%20DROP%20TABLE%20queues%3B--",
  '%F0%9F%92%A5',
  'a*b',
  '%ff',
];
const HOSTILE_STRINGS = [
  '',
  ' ',
  '\u0000',
  '%',
  '..',
  '../../etc/passwd',
  '<script>alert(1)</script>',
  "' OR '1'='1",
  '{"$gt":""}',
  '__proto__',
  'constructor',
  'x'.repeat(5000),
  '\ud800',
  '🙂'.repeat(100),
  'NaN',
  '-0',
  '1e309',
];

function generator(rnd: ReturnType<typeof seededRandom>, withKeys: boolean, sentinels: string[]) {
  const pick = <T>(list: readonly T[]): T => list[rnd.int(0, list.length - 1)];
  const chance = (p: number): boolean => rnd.next() < p;
  const jsonValues = fc.sample(fc.jsonValue({ maxDepth: 4 }), { seed: rnd.seed, numRuns: 500 });
  const anyJson = (): unknown => pick(jsonValues);
  let fresh = 0;
  /** A queue id that must still not exist at the end (refused requests only). */
  const refusedId = (): string => `rej-${rnd.seed}-${fresh++}`;
  const target = (): string => (chance(0.6) ? pick(sentinels) : refusedId());

  const validKeyFor = (scope: Scope): string => {
    if (!withKeys) return '';
    if (scope === 'any' || scope === 'admin' || chance(0.3)) return KEYS.admin;
    return { produce: KEYS.producer, consume: KEYS.consumer, read: KEYS.reader }[scope];
  };
  const authHeaders = (key: string): [string, string][] => {
    if (key === '') return [];
    return chance(0.5) ? [['Authorization', `Bearer ${key}`]] : [['X-API-Key', key]];
  };
  const jsonHeaders: [string, string][] = [['Content-Type', 'application/json']];
  const jsonBody = (value: unknown): Buffer => Buffer.from(JSON.stringify(value) ?? 'null', 'utf8');

  /** With a key that may: a request its route must refuse with 4xx. */
  const invalidInput = (): Case => {
    const spec = pick(ROUTES.filter((r) => r.method !== 'GET'));
    const key = validKeyFor(spec.scope);
    const auth = authHeaders(key);
    const q = target();
    const label = (what: string): string => `${spec.name} ${what}`;
    const refused = (statuses: number[]): Expect => ({ kind: 'refused', statuses });
    const s4xx = [400, 404, 410, 413, 415, 423];
    const invalidId = (): Case => ({
      label: label('with an invalid queue id'),
      req: {
        method: spec.method,
        target: spec.path(pick(BAD_IDS)),
        headers: [...auth, ...jsonHeaders],
        body: jsonBody({ item: { a: 1 }, items: [{ item: { a: 1 } }], lock_id: 'abcdefghijk' }),
      },
      expect: refused([400, 404]),
    });
    if (chance(0.2)) return invalidId();
    switch (spec.name) {
      case 'push':
      case 'pushBatch': {
        const badItem = pick<unknown>([null, 1, 'x', [], [1], true, ...HOSTILE_STRINGS.slice(0, 5)]);
        const entry = pick<Record<string, unknown>>([
          { item: badItem },
          {},
          { item: { a: 1 }, priority: pick<unknown>([-1, 1.5, '1', 256, Infinity, null, [], {}, 'NaN']) },
          { item: { a: 1 }, extra: anyJson() },
          { item: JSON.parse('{"__proto__": {"polluted": 1}}') as unknown, priority: -5 },
        ]);
        const body =
          spec.name === 'push'
            ? entry
            : pick<unknown>([
                { items: [] },
                { items: Array.from({ length: 1001 }, () => ({ item: { a: 1 } })) },
                { items: [{ item: { ok: 1 } }, { item: { ok: 2 } }, entry] },
                { items: entry },
                { items: [entry], more: 1 },
              ]);
        const variant = rnd.int(0, 5);
        if (variant === 0)
          return {
            label: label('malformed JSON'),
            req: { method: 'POST', target: spec.path(q), headers: [...auth, ...jsonHeaders], body: Buffer.from('{"item": {"a": 1}'.slice(0, rnd.int(0, 16))) },
            expect: refused([400]),
          };
        if (variant === 1)
          return {
            label: label('not JSON'),
            req: {
              method: 'POST',
              target: spec.path(q),
              headers: [
                ...auth,
                ['Content-Type', pick(['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml'])],
              ],
              body: Buffer.from('item=1'),
            },
            expect: refused([415]),
          };
        if (variant === 2)
          return {
            label: label('a JSON null'),
            req: { method: 'POST', target: spec.path(q), headers: [...auth, ...jsonHeaders], body: Buffer.from('null') },
            expect: refused([400]),
          };
        if (variant === 3) {
          // 5 MiB of JSON in a few kB of gzip: refused as it is decompressed.
          const bomb = gzipSync(Buffer.from(`{"item":{"s":"${' '.repeat(5 * 1024 * 1024)}"}}`));
          return {
            label: label('a gzip bomb'),
            req: { method: 'POST', target: spec.path(q), headers: [...auth, ...jsonHeaders, ['Content-Encoding', 'gzip']], body: bomb },
            expect: refused([413]),
          };
        }
        return {
          label: label(`invalid body ${JSON.stringify(body).slice(0, 120)}`),
          req: { method: 'POST', target: spec.path(q), headers: [...auth, ...jsonHeaders], body: jsonBody(body) },
          expect: refused([400, 413]),
        };
      }
      case 'pop': {
        const query = pick([
          `depth=${pick(['0', '-1', '1001', 'abc', '1.5', '', '1e3', '0x10'])}`,
          `ttl_seconds=${pick(['0', '301', '-5', 'x'])}&require_ack=true`,
          `wait_seconds=${pick(['-1', '31', 'forever', '1.5'])}`,
          `require_ack=${pick(['yes', '2', 'TRUE!', ''])}`,
        ]);
        // Valid pops of the locked sentinel are refused as well: 423.
        if (chance(0.3))
          return {
            label: label('of the locked queue'),
            req: { method: 'POST', target: `${spec.path(sentinels[1])}?depth=${rnd.int(1, 5)}${chance(0.5) ? '&require_ack=true' : ''}`, headers: auth },
            expect: refused([423]),
          };
        return { label: label(`?${query}`), req: { method: 'POST', target: `${spec.path(q)}?${query}`, headers: auth }, expect: refused([400]) };
      }
      case 'acknowledge':
      case 'extendLock':
      case 'release': {
        const body = pick<unknown>([
          {},
          { lock_id: '' },
          { lock_id: pick(['AAAAAAAAAAA', 'wrong-lock-id', 'x'.repeat(300), 12345678901, null, [], {}]) },
          { lock_id: 'AAAAAAAAAAA', ttl_seconds: pick([0, 301, -1, 'x', 1.5]) },
          { lock_id: 'AAAAAAAAAAA', unknown: anyJson() },
        ]);
        if (chance(0.2))
          return {
            label: label('not JSON'),
            req: { method: 'POST', target: spec.path(q), headers: [...auth, ['Content-Type', 'text/plain']], body: Buffer.from('lock_id=AAAAAAAAAAA') },
            expect: refused([415]),
          };
        return {
          label: label(`with ${JSON.stringify(body).slice(0, 120)}`),
          req: { method: 'POST', target: spec.path(q), headers: [...auth, ...jsonHeaders], body: jsonBody(body) },
          expect: refused(s4xx),
        };
      }
      case 'putSettings': {
        // Both watched queues hold items, and the second a lock: a valid change of their layout or
        // (of the locked one) their lock mode is refused with 409, and changes nothing.
        if (chance(0.25)) {
          const locked = chance(0.5);
          const body = locked
            ? { lock_mode: 'shared', ...(chance(0.5) ? { segment_size: 7 } : {}) }
            : { segment_size: rnd.int(1, 10000), buffer_segments: rnd.int(2, 1000) };
          return {
            label: label(`of a watched queue with ${JSON.stringify(body)}`),
            req: { method: 'PUT', target: spec.path(sentinels[locked ? 1 : 0]), headers: [...auth, ...jsonHeaders], body: jsonBody(body) },
            expect: refused([409]),
          };
        }
        const body = pick<unknown>([
          { segment_size: pick<unknown>([0, 10001, -1, 1.5, '5', null, [], {}, 'NaN']) },
          { buffer_segments: pick<unknown>([0, 1001, 2.5, '1', null, true]) },
          { lock_mode: pick<unknown>(['other', 'SHARED', '', null, 1, ['shared']]) },
          { max_deliveries: pick<unknown>([0, 1001, 2.5, '3', -1]), dead_letter_queue: 'dead' },
          { max_deliveries: 3 },
          { max_deliveries: 3, dead_letter_queue: null },
          { dead_letter_queue: pick<unknown>(['', 'a b', '..', 'x'.repeat(201), 42, ...HOSTILE_STRINGS.slice(0, 3)]) },
          { lock_mode: 'shared', unknown: anyJson() },
          pick<unknown>([[], [1], 'x', 1]),
        ]);
        if (chance(0.15))
          return {
            label: label('not JSON'),
            req: { method: 'PUT', target: spec.path(q), headers: [...auth, ['Content-Type', 'text/plain']], body: Buffer.from('lock_mode=shared') },
            expect: refused([415]),
          };
        return {
          label: label(`with ${JSON.stringify(body).slice(0, 120)}`),
          req: { method: 'PUT', target: spec.path(q), headers: [...auth, ...jsonHeaders], body: jsonBody(body) },
          expect: refused([400]),
        };
      }
      default:
        return invalidId();
    }
  };

  /** With keys configured: a request without a key that may, refused 401/403 whatever else it holds. */
  const unauthorised = (): Case => {
    const spec = pick(ROUTES);
    const wrongScope: Record<Scope, string[]> = {
      produce: [KEYS.reader, KEYS.consumer],
      consume: [KEYS.reader, KEYS.producer],
      read: [KEYS.producer, KEYS.consumer],
      admin: [KEYS.reader, KEYS.producer, KEYS.consumer],
      any: [],
    };
    const options: [string, [string, string][], number][] = [
      ['no key', [], 401],
      ['an unknown key', [['Authorization', `Bearer ${'k'.repeat(rnd.int(16, 64))}`]], 401],
      ['a very long key', [['X-API-Key', 'k'.repeat(rnd.int(1000, 6000))]], 401],
      ['another scheme', [['Authorization', `Basic ${Buffer.from(`admin:${KEYS.admin}`).toString('base64')}`]], 401],
      ['a prefix of a known key', [['Authorization', `Bearer ${KEYS.admin.slice(0, 20)}`]], 401],
      ['Bearer alone', [['Authorization', 'Bearer']], 401],
      ['an unknown X-API-Key next to nothing else', [['X-API-Key', `${KEYS.admin}x`]], 401],
    ];
    for (const key of wrongScope[spec.scope]) options.push([`a key without the scope ${spec.scope}`, authHeaders(key), 403]);
    const [what, headers, status] = pick(options);
    // An id the router cannot take is 400/404 before any hook runs.
    const badId = chance(0.15);
    let path = spec.path(badId ? pick(BAD_IDS) : target());
    if (spec.name === 'pop') path += `?depth=${pick(['1', '0', 'x', '1000'])}&require_ack=${pick(['true', 'false'])}`;
    const body = spec.body ? pick([jsonBody(anyJson()), jsonBody({ item: { a: 1 } }), Buffer.from('{bad'), Buffer.alloc(0)]) : undefined;
    const contentType: [string, string][] = body ? [['Content-Type', pick(['application/json', 'text/plain', 'application/octet-stream'])]] : [];
    return {
      label: `${spec.name} with ${what}`,
      req: { method: spec.method, target: path, headers: [...headers, ...contentType], body },
      expect: { kind: 'refused', statuses: badId ? [status, 400, 404] : [status] },
    };
  };

  /** Anything at all, never at a watched queue: must be answered below 500. */
  const anything = (): Case => {
    const spec = pick(ROUTES);
    const id = chance(0.5)
      ? `any-${rnd.seed}-${rnd.int(0, 50)}`
      : pick([...BAD_IDS, ...HOSTILE_STRINGS.map((h) => encodeURIComponent(h.replace(/[\ud800-\udfff]/g, '\ufffd')))]);
    const method = pick(['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD', 'TRACE', 'PROPFIND', 'get', 'POST ', 'X'.repeat(50)]);
    let path = pick([
      spec.path(id),
      spec.path(id) + '/',
      spec.path(id) + '/extra',
      `//${spec.path(id)}`,
      `${spec.path(id)}?${pick(HOSTILE_STRINGS).slice(0, 100)}`,
      '/queue',
      '/queue/',
      '*',
      '/%',
      '/admin/../queues',
      '/docs/../../etc/passwd',
      `/queue/${id}/state/${pick(['metadata', 'queue_0_seg_0', '..', '%00', 'offloaded_queue_0_seg_1_x'])}`,
    ]);
    if (spec.name === 'pop' && chance(0.7))
      path += `${path.includes('?') ? '&' : '?'}depth=${rnd.int(-2, 1002)}&wait_seconds=${pick(['0', '0', '1', 'x'])}&require_ack=${pick(['true', 'false', 'maybe'])}`;
    const headers: [string, string][] = [];
    const keyPick = rnd.int(0, 5);
    if (withKeys && keyPick < 4) headers.push(...authHeaders(Object.values(KEYS)[keyPick]));
    if (chance(0.7))
      headers.push([
        'Content-Type',
        pick([
          'application/json',
          'application/json; charset=latin1',
          'application/vnd.api+json',
          'text/plain',
          '',
          'application/json; charset=utf-16',
          'x/'.repeat(100),
        ]),
      ]);
    if (chance(0.1)) headers.push(['Content-Encoding', pick(['gzip', 'br', 'deflate', 'identity', 'compress', 'gzip, gzip'])]);
    if (chance(0.05)) headers.push(['Transfer-Encoding', 'chunked']);
    if (chance(0.05)) headers.push([pick(['X-Forwarded-For', 'Origin', 'Accept', 'Accept-Encoding', 'Range', 'Expect']), pick(HOSTILE_STRINGS).slice(0, 200)]);
    const bodyKind = rnd.int(0, 6);
    const body =
      bodyKind === 0
        ? undefined
        : bodyKind <= 3
          ? jsonBody(
              pick([anyJson(), { item: anyJson(), priority: anyJson() }, { items: [{ item: anyJson() }] }, { lock_id: anyJson(), ttl_seconds: anyJson() }]),
            )
          : bodyKind === 4
            ? Buffer.from(pick(HOSTILE_STRINGS), 'utf8')
            : bodyKind === 5
              ? Buffer.from([0xff, 0xfe, 0x7b, 0x22, 0xc3, 0x28, 0x22, 0x7d])
              : Buffer.from(`{"item":${'['.repeat(rnd.int(50, 5000))}`);
    if (headers.some(([k, v]) => k === 'Transfer-Encoding' && v === 'chunked')) {
      const raw = Buffer.concat([
        Buffer.from(
          `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n${headers.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`,
          'latin1',
        ),
        Buffer.from(pick(['5\r\n{"ite\r\n0\r\n\r\n', 'zz\r\nxx\r\n', '0\r\n\r\n', '3\r\n{}\r\n']), 'latin1'),
      ]);
      // A broken chunk arrives after the request was dispatched: Node's HTTP server then closes
      // the connection without an answer, which is all a client that breaks framing can get.
      return { label: `${method} ${path} chunked`, req: { method, target: path, headers, raw }, expect: { kind: 'any', mayDrop: true } };
    }
    if (chance(0.03)) {
      // A request line or header block the HTTP parser must refuse.
      const lines = [
        `${method} ${path}\r\n\r\n`,
        `GET /queues HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n`,
        `GET /queues HTTP/9.9\r\n\r\n`,
        `GET /queues HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n`,
        `GET /queues HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab`,
      ];
      const line = pick(lines);
      const raw = Buffer.from(line, 'latin1');
      // A request line without a version is HTTP/0.9 to Node's parser, which then ends the
      // connection with the request: an answer that takes a database round trip finds it closed
      // (an HTTP/0.9 client could not read a status line anyway). Any answer must still be below 500.
      return {
        label: `malformed ${JSON.stringify(raw.toString('latin1').slice(0, 60))}`,
        req: { method, target: path, headers, raw },
        expect: { kind: 'any', mayDrop: line === lines[0] },
      };
    }
    return { label: `${method} ${path.slice(0, 100)}`, req: { method, target: path, headers, body }, expect: { kind: 'any' } };
  };

  return { invalidInput, unauthorised, anything };
}

/** The watched queues as stored: metadata, every priority's items in order, the lock. */
async function snapshot(svc: TestService, key: string | undefined, ids: string[]): Promise<unknown> {
  const out: Record<string, unknown> = {};
  for (const q of ids) {
    const get = (path: string) => (key ? svc.http.get(path).set('x-api-key', key) : svc.http.get(path));
    const info = await get(`/queue/${q}`);
    const metadata = await get(`/queue/${q}/state/metadata`);
    const segments: Record<string, unknown> = {};
    for (const p of [0, 1, 2]) segments[p] = (await get(`/queue/${q}/state/queue_${p}_seg_0`)).body;
    out[q] = { info: info.body, metadata: metadata.body, segments };
  }
  return out;
}

// Like the property tests', their number is scaled by PROPERTY_RUNS_SCALE (CI's repeat pass runs a third, with another seed).
const runs: [string, boolean, number][] = [
  ['with API keys', true, propertyRuns(6000)],
  ['without keys', false, propertyRuns(4000)],
];

describe.each(runs)(`hostile requests (%s, ${databaseKind})`, (_label, withKeys, total) => {
  let svc: TestService;
  const adminKey = withKeys ? KEYS.admin : undefined;
  const sentinels = [uniqueQueueId('watched'), uniqueQueueId('watched-locked')];

  beforeAll(async () => {
    svc = await startService({ env: { SEGMENT_SIZE: '4', ...(withKeys ? { API_KEYS } : {}) } });
    const post = (path: string) => (adminKey ? svc.http.post(path).set('x-api-key', adminKey) : svc.http.post(path));
    for (const q of sentinels) {
      const items = Array.from({ length: 11 }, (_, n) => ({ item: { n, q }, priority: n % 3 }));
      expect((await post(`/queue/${q}/push/batch`).send({ items })).status).toBe(200);
    }
    // The second one holds a lock that outlives the run: every pop of it is 423.
    expect((await post(`/queue/${sentinels[1]}/pop?depth=2&require_ack=true&ttl_seconds=300`)).status).toBe(200);
  });
  afterAll(async () => {
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  it(`${total} requests: no 5xx; refused ones refused with their 4xx and changing nothing`, async () => {
    const rnd = seededRandom(seed + (withKeys ? 1 : 2));
    const gen = generator(rnd, withKeys, sentinels);
    const cases: Case[] = Array.from({ length: total }, () => {
      const r = rnd.next();
      if (withKeys && r < 0.35) return gen.unauthorised();
      if (r < 0.65) return gen.invalidInput();
      return gen.anything();
    });
    const before = await snapshot(svc, adminKey, sentinels);
    const port = Number(new URL(svc.url).port);
    const answers = await pool(
      cases.map((c) => () => send(port, c.req)),
      12,
    );

    const problems: string[] = [];
    const statuses = new Map<number, number>();
    answers.forEach((answer, i) => {
      const c = cases[i];
      if ('error' in answer) {
        if (c.expect.kind === 'any' && c.expect.mayDrop && answer.error.startsWith('no status line in ""')) return;
        problems.push(`#${i} ${c.label}: ${answer.error}`);
        return;
      }
      statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
      if (answer.status >= 500) problems.push(`#${i} ${c.label}: ${answer.status} ${answer.body.slice(0, 300)}`);
      else if (c.expect.kind === 'refused' && !c.expect.statuses.includes(answer.status))
        problems.push(`#${i} ${c.label}: expected ${c.expect.statuses.join('/')}, got ${answer.status} ${answer.body.slice(0, 300)}`);
    });
    const summary = `${where}: ${total} requests; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}`;
    console.log(summary);
    expect(problems.slice(0, 20), summary).toEqual([]);

    // Nothing refused changed anything.
    expect(await snapshot(svc, adminKey, sentinels), summary).toEqual(before);
    const list = adminKey ? await svc.http.get('/queues?prefix=rej-').set('x-api-key', adminKey) : await svc.http.get('/queues?prefix=rej-');
    expect(list.status).toBe(200);
    expect(list.body.queues, `queues created by refused requests ${summary}`).toEqual([]);

    // Every kind of answer was exercised.
    const refused = cases.filter((c) => c.expect.kind === 'refused').length;
    expect(refused).toBeGreaterThan(total / 2);
    for (const status of withKeys ? [400, 401, 403, 413, 415, 423] : [400, 404, 413, 415, 423])
      expect(statuses.get(status) ?? 0, `${status} answers ${summary}`).toBeGreaterThan(0);
  }, 240_000);
});
