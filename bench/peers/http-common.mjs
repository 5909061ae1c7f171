// The HTTP side of the benchmark's peer servers (bench/peers/*.mjs):
// a node:http server with the push and pop routes of pushpop's contract, the same request
// validation and error bodies, option parsing and a clean shutdown. Each peer supplies only its
// storage: `push(queueId, itemJson, item, priority)` and `pop(queueId, depth)`.

import { Buffer } from 'node:buffer';
import console from 'node:console';
import { createServer } from 'node:http';
import process from 'node:process';
import { clearTimeout, setTimeout } from 'node:timers';
import { URL } from 'node:url';

export const QUEUE_ID_PATTERN = /^[A-Za-z0-9._:@-]{1,200}$/;
export const MAX_BODY_BYTES = 1_048_576;
export const MAX_ITEM_BYTES = 262_144;
export const MAX_ITEM_DEPTH = 64;
export const MAX_PRIORITY = 255;
export const MAX_DEPTH = 100;

/** An error answered as the contract's `{statusCode, error_code, message}`. */
export class HttpError extends Error {
  constructor(status, errorCode, message, headers = {}) {
    super(message);
    this.status = status;
    this.errorCode = errorCode;
    this.headers = headers;
  }
}

const validationFailed = (message) => new HttpError(400, 'VALIDATION_FAILED', message);

/** Whether `value` nests objects/arrays deeper than `limit` levels (the value itself is level 1); iterative. */
export function nestsDeeperThan(value, limit) {
  const stack = [[value, 1]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop();
    if (current === null || typeof current !== 'object') continue;
    if (depth > limit) return true;
    for (const child of Array.isArray(current) ? current : Object.values(current)) {
      if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
    }
  }
  return false;
}

/** Queue id from the path segment: percent-decoded, then checked against the contract's alphabet. */
export function parseQueueId(segment) {
  let id;
  try {
    id = decodeURIComponent(segment);
  } catch {
    id = null;
  }
  if (id === null || !QUEUE_ID_PATTERN.test(id)) throw new HttpError(400, 'INVALID_QUEUE_ID', 'queue id must be 1-200 characters of A-Z a-z 0-9 . _ : @ -');
  return id;
}

/** A request body as JSON: like pushpop's JSON body parser in strict mode, only an object or an array (empty = `{}`). */
export function parseJsonBody(text) {
  if (text.trim() === '') return {};
  const first = text.trimStart()[0];
  if (first !== '{' && first !== '[') throw new HttpError(400, 'MALFORMED_JSON', 'request body is not valid JSON');
  try {
    return JSON.parse(text);
  } catch {
    throw new HttpError(400, 'MALFORMED_JSON', 'request body is not valid JSON');
  }
}

/**
 * A push body: a JSON object with `item` (a JSON object, at most MAX_ITEM_DEPTH levels and
 * MAX_ITEM_BYTES of UTF-8 JSON) and optional `priority` (integer 0..MAX_PRIORITY, null = 0),
 * nothing else. Returns the item, its JSON text and the priority.
 */
export function validatePushBody(body) {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw validationFailed('request body must be a JSON object');
  const unknown = Object.keys(body).filter((key) => key !== 'item' && key !== 'priority');
  if (unknown.length > 0) throw validationFailed(unknown.map((key) => `property ${key} should not exist`).join('; '));
  const { item } = body;
  if (item === undefined || item === null) throw validationFailed('item should not be null or undefined');
  if (typeof item !== 'object' || Array.isArray(item)) throw validationFailed('item must be a JSON object');
  const priority = body.priority ?? 0;
  if (!Number.isInteger(priority)) throw validationFailed('priority must be an integer number');
  if (priority < 0) throw validationFailed('priority must not be less than 0');
  if (priority > MAX_PRIORITY) throw validationFailed(`priority must not be greater than ${MAX_PRIORITY}`);
  if (nestsDeeperThan(item, MAX_ITEM_DEPTH)) throw new HttpError(400, 'ITEM_TOO_DEEP', `item nests deeper than ${MAX_ITEM_DEPTH} levels`);
  const itemJson = JSON.stringify(item);
  const size = Buffer.byteLength(itemJson, 'utf8');
  if (size > MAX_ITEM_BYTES) throw new HttpError(413, 'ITEM_TOO_LARGE', `item is ${size} bytes of JSON, more than the limit of ${MAX_ITEM_BYTES}`);
  return { item, itemJson, priority: priority === 0 ? 0 : priority };
}

/** `depth` of a pop: integer 1..MAX_DEPTH, default 1. The peers take no other query parameter. */
export function parseDepth(searchParams) {
  for (const key of searchParams.keys()) {
    if (key !== 'depth') throw validationFailed(`query parameter ${key} is not supported by this benchmark peer (only depth)`);
  }
  const values = searchParams.getAll('depth');
  if (values.length === 0) return 1;
  const depth = values.length === 1 ? Number(values[0]) : NaN;
  if (!Number.isInteger(depth)) throw validationFailed('depth must be an integer number');
  if (depth < 1) throw validationFailed('depth must not be less than 1');
  if (depth > MAX_DEPTH) throw validationFailed(`depth must not be greater than ${MAX_DEPTH}`);
  return depth;
}

/** Error codes of the pg driver and PostgreSQL that mean "the database is not reachable right now". */
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  '57P01',
  '57P02',
  '57P03',
  '53300',
  '08000',
  '08003',
  '08006',
  '08001',
  '08004',
]);

let loggedErrors = 0;

/** Any error → the HttpError to answer. Database details never reach the client; they go to stderr. */
export function toHttpError(error) {
  if (error instanceof HttpError) return error;
  const code = typeof error?.code === 'string' ? error.code : '';
  // jsonb cannot hold \u0000 (the peers store items as jsonb; pushpop stores JSON text)
  if (code === '22P05') return validationFailed('item contains a character that jsonb cannot store (\\u0000)');
  loggedErrors += 1;
  if (loggedErrors <= 20 || loggedErrors % 1000 === 0) console.error(`[${loggedErrors}] ${code || error?.name || 'error'}: ${error?.message ?? error}`);
  if (
    UNAVAILABLE_CODES.has(code) ||
    /Connection terminated|timeout exceeded when trying to connect|Cannot use a pool after calling end|Connection is closed|Reached the max retries per request/i.test(
      String(error?.message),
    )
  ) {
    return new HttpError(503, 'STORE_UNAVAILABLE', 'The database is unavailable; retry shortly', { 'Retry-After': '2' });
  }
  return new HttpError(500, 'INTERNAL_ERROR', 'Internal server error');
}

function send(res, status, text, headers = {}) {
  if (res.headersSent) return;
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

function sendError(res, error, extraHeaders = {}) {
  const e = toHttpError(error);
  send(res, e.status, JSON.stringify({ statusCode: e.status, error_code: e.errorCode, message: e.message }), { ...e.headers, ...extraHeaders });
}

/** The request body as text, at most MAX_BODY_BYTES (413 past it; the connection is then closed). */
function readBody(req) {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > MAX_BODY_BYTES) {
      reject(new HttpError(413, 'PAYLOAD_TOO_LARGE', 'request body is larger than the limit'));
      return;
    }
    const chunks = [];
    let size = 0;
    let done = false;
    req.on('data', (chunk) => {
      if (done) return;
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        done = true;
        reject(new HttpError(413, 'PAYLOAD_TOO_LARGE', 'request body is larger than the limit'));
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (done) return;
      done = true;
      resolve(Buffer.concat(chunks).toString('utf8'));
    });
    req.on('error', (error) => {
      if (done) return;
      done = true;
      reject(error instanceof Error ? error : new Error(String(error)));
    });
  });
}

function isJsonContentType(header) {
  if (!header) return false;
  const type = header.split(';')[0].trim().toLowerCase();
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}

const ROUTE = /^\/queue\/([^/]+)\/(push|pop)$/;

async function handle(req, res, storage) {
  const url = new URL(req.url ?? '/', 'http://peer');
  const path = url.pathname;
  if (path === '/health' || path === '/health/ready') {
    if (req.method !== 'GET') throw new HttpError(405, 'METHOD_NOT_ALLOWED', `${req.method} is not allowed on ${path}`, { Allow: 'GET' });
    if (path === '/health/ready') await storage.ready();
    send(res, 200, JSON.stringify({ status: 'healthy' }));
    return;
  }
  const match = ROUTE.exec(path);
  if (!match) throw new HttpError(404, 'NOT_FOUND', `Cannot ${req.method} ${path}`);
  if (req.method !== 'POST') throw new HttpError(405, 'METHOD_NOT_ALLOWED', `${req.method} is not allowed on ${path}`, { Allow: 'POST' });
  if (match[2] === 'push') {
    const text = await readBody(req);
    if (text.length > 0 && !isJsonContentType(req.headers['content-type']))
      throw new HttpError(415, 'UNSUPPORTED_MEDIA_TYPE', 'request body must be application/json');
    // the order of pushpop's checks: body size and JSON syntax, then the queue id, then the fields
    const body = parseJsonBody(text);
    const queueId = parseQueueId(match[1]);
    const { item, itemJson, priority } = validatePushBody(body);
    await storage.push(queueId, itemJson, item, priority);
    send(res, 200, JSON.stringify({ success: true, message: `Item pushed to queue ${queueId} at priority ${priority}` }));
    return;
  }
  const queueId = parseQueueId(match[1]);
  const depth = parseDepth(url.searchParams);
  const items = await storage.pop(queueId, depth);
  // `items` is an array of JSON texts (already serialised) or of values
  const parts = items.map((item) => (typeof item === 'string' ? item : JSON.stringify(item)));
  send(res, 200, `{"items":[${parts.join(',')}],"count":${parts.length}}`);
}

/** `--name=value` from argv, else the environment variable, else the fallback. */
export function option(name, envName, fallback) {
  const prefix = `--${name}=`;
  const arg = process.argv.slice(2).find((a) => a.startsWith(prefix));
  if (arg !== undefined) return arg.slice(prefix.length);
  const env = process.env[envName];
  return env === undefined || env === '' ? fallback : env;
}

/**
 * Port, host and database URL of a peer from `--port`, `--host`, `--database-url` or PORT, HOST,
 * DATABASE_URL. `schemes` are the URL schemes the peer's store takes (PostgreSQL by default).
 */
export function peerOptions(peerName, schemes = ['postgres', 'postgresql']) {
  const databaseUrl = option('database-url', 'DATABASE_URL', null);
  const port = Number(option('port', 'PORT', '8100'));
  const host = option('host', 'HOST', '127.0.0.1');
  if (!databaseUrl || !schemes.some((scheme) => databaseUrl.startsWith(`${scheme}://`))) {
    console.error(`${peerName}: give the database as --database-url=${schemes[0]}://... or DATABASE_URL`);
    process.exit(2);
  }
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`${peerName}: --port / PORT must be an integer 0-65535`);
    process.exit(2);
  }
  return { databaseUrl, port, host };
}

/**
 * Serves `storage` ({ push, pop, ready, close }) on host:port, prints one line when listening,
 * and on SIGTERM/SIGINT stops accepting, lets requests in flight finish (at most 5 s), closes the
 * storage and exits 0.
 */
export async function servePeer({ name, host, port, storage, describe }) {
  const server = createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
    handle(req, res, storage).catch((error) => {
      const close = error instanceof HttpError && error.status === 413 ? { connection: 'close' } : {};
      sendError(res, error, close);
      if (close.connection) res.on('finish', () => req.socket.destroy());
    });
  });
  server.headersTimeout = 30_000;
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(undefined));
  });
  const address = server.address();
  process.stdout.write(`${name} listening on http://${host}:${address.port} (${describe})\n`);

  let stopping = false;
  const stop = async (signal) => {
    if (stopping) return;
    stopping = true;
    const force = setTimeout(() => {
      console.error(`${name}: shutdown took longer than 15 s; exiting`);
      process.exit(1);
    }, 15_000);
    force.unref();
    // stop accepting, let requests in flight finish (at most 5 s), then close the storage
    const closed = new Promise((resolve) => server.close(() => resolve(undefined)));
    server.closeIdleConnections();
    let drainTimer;
    await Promise.race([closed, new Promise((resolve) => (drainTimer = setTimeout(resolve, 5_000)))]);
    clearTimeout(drainTimer);
    server.closeAllConnections();
    try {
      await storage.close();
    } catch (error) {
      console.error(`${name}: closing the storage failed: ${error?.message ?? error}`);
    }
    clearTimeout(force);
    process.stdout.write(`${name} stopped (${signal})\n`);
    process.exit(0);
  };
  for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => void stop(signal));
  return server;
}
