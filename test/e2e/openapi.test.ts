import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import SwaggerParser from '@apidevtools/swagger-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODE_NAMES, ERROR_CODES, type ErrorCode } from '../../src/common/error-codes.js';
import { repoRoot, startChildService, type ChildService, type ServiceBuild } from '../support/child-service.js';
import { databaseKind, makeDataDir, removeDataDir } from '../support/service.js';

/**
 * The document the BUILT service serves (`node dist/main.js`, compiled by `nest build` with
 * the Swagger CLI plugin, which the SWC-compiled in-test app is not) is the committed
 * openapi.json, and it says what the house style and CONTRACT.md promise: operationIds are the
 * controller method names, one shared `ErrorCode` enum lists every code of `ERROR_CODES`, and
 * every operation documents, per status, the error codes it answers with an example of each.
 */

interface SchemaObject {
  $ref?: string;
  allOf?: SchemaObject[];
  oneOf?: SchemaObject[];
  type?: string;
  description?: string;
  properties?: Record<string, SchemaObject>;
  required?: string[];
  enum?: string[];
}
interface ErrorBody {
  statusCode: number;
  error_code: string;
  message: string;
  [field: string]: unknown;
}
interface MediaTypeObject {
  schema?: SchemaObject;
  example?: unknown;
  examples?: Record<string, { summary?: string; value: ErrorBody }>;
}
interface ResponseObject {
  description: string;
  headers?: Record<string, { schema?: SchemaObject }>;
  content?: Record<string, MediaTypeObject>;
}
interface OperationObject {
  operationId?: string;
  responses: Record<string, ResponseObject>;
}
interface OpenApiDocument {
  openapi: string;
  paths: Record<string, Record<string, OperationObject>>;
  components: { schemas: Record<string, SchemaObject> };
}

/** The operationIds of the service: its controller method names. */
const QUEUE_OPERATIONS = [
  'push',
  'pushBatch',
  'pop',
  'popFair',
  'acknowledge',
  'acknowledgeBatch',
  'extendLock',
  'release',
  'releaseBatch',
  'getQueue',
  'getSettings',
  'putSettings',
  'getState',
  'listQueues',
  'deleteQueue',
  'redrive',
];
const SCHEDULE_OPERATIONS = ['listSchedules', 'getSchedule', 'putSchedule', 'deleteSchedule'];
const OPERATIONS = [...QUEUE_OPERATIONS, ...SCHEDULE_OPERATIONS, 'live', 'ready', 'metrics', 'whoami'];
const HTTP_METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);

const committedText = readFileSync(join(repoRoot, 'openapi.json'), 'utf8');
const committed = JSON.parse(committedText) as OpenApiDocument;

/** `node dist/main.js`, as `npm run build` (nest build with the Swagger plugin) leaves it; built here if missing. */
async function builtService(): Promise<ServiceBuild> {
  const mainJs = join(repoRoot, 'dist/main.js');
  const started = Date.now();
  if (!existsSync(mainJs)) {
    await new Promise<void>((resolvePromise, reject) => {
      execFile('npm', ['run', 'build'], { cwd: repoRoot, timeout: 180_000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
        if (error) reject(new Error(`npm run build failed (${error.message}):\n${stdout}\n${stderr}`));
        else resolvePromise();
      });
    });
  }
  return { mainJs, ms: Date.now() - started, remove: () => undefined };
}

function operations(doc: OpenApiDocument): { path: string; method: string; op: OperationObject }[] {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => HTTP_METHODS.has(method))
      .map(([method, op]) => ({ path, method, op })),
  );
}

/** Resolves a `#/components/schemas/X` reference of `doc`. */
function resolveRef(doc: OpenApiDocument, ref: string): SchemaObject {
  const name = /^#\/components\/schemas\/([^/]+)$/.exec(ref)?.[1];
  const schema = name === undefined ? undefined : doc.components.schemas[name];
  if (!schema) throw new Error(`unresolved $ref ${ref}`);
  return schema;
}

/**
 * The branches of an error answer's schema: each is `allOf: [$ref to an error body, {error_code enum}]`;
 * several (in `oneOf`) where codes with different bodies share a status.
 */
function errorBranches(schema: SchemaObject, where: string): { body: string; codes: string[] }[] {
  const branches = schema.oneOf ?? [schema];
  return branches.map((branch) => {
    expect(branch.allOf, `${where}: allOf of a body and its codes`).toHaveLength(2);
    const [base, codes] = branch.allOf!;
    expect(base.$ref, where).toMatch(/^#\/components\/schemas\//);
    expect(codes.properties?.error_code?.type, where).toBe('string');
    return { body: base.$ref!, codes: codes.properties?.error_code?.enum ?? [] };
  });
}

/** Every error_code an error answer's schema allows. */
function restrictedCodes(schema: SchemaObject, where: string): string[] {
  return errorBranches(schema, where).flatMap((branch) => branch.codes);
}

/** The error body schema (resolved) that an error answer's schema gives `code`. */
function bodyOf(doc: OpenApiDocument, schema: SchemaObject, code: string): SchemaObject {
  const branch = errorBranches(schema, code).find((b) => b.codes.includes(code));
  if (!branch) throw new Error(`no branch of the schema allows ${code}`);
  return resolveRef(doc, branch.body);
}

describe(`OpenAPI document of the built service (${databaseKind})`, () => {
  let svc: ChildService;
  let dataDir: string;
  let served: OpenApiDocument;
  let servedText: string;

  beforeAll(async () => {
    const build = await builtService();
    dataDir = makeDataDir();
    svc = await startChildService({ build, dataDir, env: { LOG_LEVEL: 'warn' } });
    const res = await fetch(`${svc.url}/openapi.json`);
    expect(res.status, svc.output()).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    servedText = await res.text();
    served = JSON.parse(servedText) as OpenApiDocument;
  });
  afterAll(async () => {
    await svc?.kill('SIGTERM');
    if (dataDir) removeDataDir(dataDir);
  });

  it('GET /openapi.json is the committed openapi.json (after changing the API: `npm run openapi`; a stale dist/: `npm run build`)', () => {
    expect(served).toEqual(committed);
    // Same keys in the same order: the committed file is the served document, pretty-printed.
    expect(`${JSON.stringify(served, null, 2)}\n`).toBe(committedText);
  });

  it('is a valid OpenAPI 3 document whose $refs all resolve', async () => {
    expect(served.openapi).toMatch(/^3\./);
    await expect(SwaggerParser.validate(structuredClone(served) as unknown as Parameters<typeof SwaggerParser.validate>[0])).resolves.toBeDefined();
  });

  it('every operationId is a controller method name, each used once', () => {
    const ids = operations(served).map(({ op }) => op.operationId);
    expect([...ids].sort()).toEqual([...OPERATIONS].sort());
  });

  it('one shared ErrorCode schema lists every code of ERROR_CODES with its meaning, and the error bodies refer to it', () => {
    const errorCode = served.components.schemas.ErrorCode;
    expect(errorCode.type).toBe('string');
    expect(errorCode.enum).toEqual(ERROR_CODE_NAMES);
    for (const code of ERROR_CODE_NAMES)
      expect(errorCode.description, code).toContain(`\`${code}\` (${ERROR_CODES[code].statuses.join(', ')}): ${ERROR_CODES[code].meaning}`);
    expect(errorCode.enum).toEqual(expect.arrayContaining(['UNAUTHORIZED', 'FORBIDDEN', 'RATE_LIMITED']));
    for (const name of ['ErrorResponseDto', 'LockErrorResponseDto', 'QueueLockedResponseDto', 'ServiceUnavailableResponseDto']) {
      const body = served.components.schemas[name];
      expect(body.required, name).toEqual(expect.arrayContaining(['statusCode', 'error_code', 'message']));
      expect(body.properties?.statusCode?.type, name).toBe('integer');
      expect(body.properties?.error_code?.allOf, name).toEqual([{ $ref: '#/components/schemas/ErrorCode' }]);
    }
  });

  it('every error answer of every operation restricts error_code to listed codes and has a right example of each', () => {
    const seen = new Set<string>();
    for (const { path, method, op } of operations(served)) {
      for (const [status, response] of Object.entries(op.responses)) {
        if (Number(status) < 400) continue;
        const where = `${method.toUpperCase()} ${path} (${op.operationId}) ${status}`;
        expect(Object.keys(response.content ?? {}), `${where}: error bodies are JSON`).toEqual(['application/json']);
        const media = response.content!['application/json'];
        const codes = restrictedCodes(media.schema!, where);
        expect(codes.length, `${where}: codes listed`).toBeGreaterThan(0);
        for (const code of codes) {
          seen.add(code);
          expect(ERROR_CODES[code as ErrorCode]?.statuses, `${where}: ${code} is an ErrorCode answered with ${status}`).toContain(Number(status));
          expect(response.description, `${where}: the description gives ${code}'s meaning`).toContain(`\`${code}\`: ${ERROR_CODES[code as ErrorCode].meaning}`);
        }
        expect(media.example, `${where}: named examples, not one`).toBeUndefined();
        const examples = Object.entries(media.examples ?? {});
        expect(examples.map(([name]) => name).sort(), `${where}: one example per code`).toEqual([...codes].sort());
        for (const [name, { value }] of examples) {
          expect(value.statusCode, `${where} example ${name}: statusCode`).toBe(Number(status));
          expect(value.error_code, `${where} example ${name}: error_code`).toBe(name);
          expect(value.message, `${where} example ${name}: message`).toBe(ERROR_CODES[name as ErrorCode].message);
          for (const field of bodyOf(served, media.schema!, name).required ?? []) expect(value, `${where} example ${name}: has ${field}`).toHaveProperty(field);
        }
        for (const code of codes) {
          const headers = (ERROR_CODES[code as ErrorCode] as { headers?: readonly string[] }).headers ?? [];
          for (const header of headers) expect(response.headers?.[header], `${where}: ${code} comes with ${header}`).toBeDefined();
        }
      }
    }
    expect([...seen], 'the codes of API keys and rate limits are documented').toEqual(expect.arrayContaining(['UNAUTHORIZED', 'FORBIDDEN', 'RATE_LIMITED']));
  });

  it('no example anywhere in the document has statusCode 0', () => {
    expect(servedText).not.toMatch(/"statusCode":\s*0\b/);
    for (const { op } of operations(served)) {
      for (const [status, response] of Object.entries(op.responses)) {
        for (const media of Object.values(response.content ?? {})) {
          for (const example of [media.example, ...Object.values(media.examples ?? {}).map((e) => e.value)]) {
            if (example && typeof example === 'object' && 'statusCode' in example)
              expect(example.statusCode, `${op.operationId} ${status}`).toBe(Number(status));
          }
        }
      }
    }
  });

  it('every queue operation documents 400, 401, 403, 429 and 503 with their codes and headers', () => {
    const queueOps = operations(served).filter(({ op }) => QUEUE_OPERATIONS.includes(op.operationId ?? ''));
    expect(queueOps.map(({ op }) => op.operationId).sort()).toEqual([...QUEUE_OPERATIONS].sort());
    const codesOf = (op: OperationObject, status: string): string[] =>
      restrictedCodes(op.responses[status].content!['application/json'].schema!, `${op.operationId} ${status}`);
    for (const { path, method, op } of queueOps) {
      const where = `${method.toUpperCase()} ${path} (${op.operationId})`;
      expect(Object.keys(op.responses), where).toEqual(expect.arrayContaining(['200', '400', '401', '403', '429', '503']));
      const badRequest = path.includes('{queue_id}') ? ['INVALID_QUEUE_ID', 'VALIDATION_FAILED'] : ['VALIDATION_FAILED'];
      expect(codesOf(op, '400'), where).toEqual(expect.arrayContaining(badRequest));
      expect(codesOf(op, '401'), where).toEqual(['UNAUTHORIZED']);
      expect(codesOf(op, '403'), where).toEqual(['FORBIDDEN']);
      // Only a turn of one queue's actor waits in line (QUEUE_BUSY); listing queues does not.
      expect(codesOf(op, '429').sort(), where).toEqual(path.includes('{queue_id}') ? ['QUEUE_BUSY', 'RATE_LIMITED'] : ['RATE_LIMITED']);
      expect(codesOf(op, '503'), where).toEqual(['STORE_UNAVAILABLE']);
      expect(op.responses['401'].headers?.['WWW-Authenticate']?.schema?.type, `${where} 401: WWW-Authenticate`).toBe('string');
      for (const header of ['Retry-After', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']) {
        expect(op.responses['429'].headers?.[header]?.schema?.type, `${where} 429: ${header}`).toBe('integer');
      }
      expect(op.responses['503'].headers?.['Retry-After']?.schema?.type, `${where} 503: Retry-After`).toBe('integer');
    }
    const metrics = operations(served).find(({ op }) => op.operationId === 'metrics')!.op;
    expect(Object.keys(metrics.responses).sort()).toEqual(['200', '401', '403', '429']);
  });

  it('lock errors carry success: false in their examples, and the 423 of pop its lock_expires_at', () => {
    for (const operationId of ['acknowledge', 'extendLock', 'release']) {
      const { op } = operations(served).find((o) => o.op.operationId === operationId)!;
      for (const [status, code] of [
        ['400', 'LOCK_ID_REQUIRED'],
        ['400', 'INVALID_LOCK_ID'],
        ['404', 'LOCK_NOT_FOUND'],
        ['410', 'LOCK_EXPIRED'],
      ]) {
        const media = op.responses[status].content!['application/json'];
        expect(media.examples?.[code]?.value, `${operationId} ${status} ${code}`).toMatchObject({
          statusCode: Number(status),
          error_code: code,
          success: false,
        });
        expect(bodyOf(served, media.schema!, code).required, `${operationId} ${status} ${code}`).toContain('success');
      }
    }
    const pop = operations(served).find((o) => o.op.operationId === 'pop')!.op;
    const locked = pop.responses['423'].content!['application/json'];
    expect(locked.examples?.QUEUE_LOCKED?.value).toMatchObject({ statusCode: 423, error_code: 'QUEUE_LOCKED', lock_expires_at: expect.any(Number) });
    expect(bodyOf(served, locked.schema!, 'QUEUE_LOCKED').required).toContain('lock_expires_at');
  });

  it('the settings operations document their errors: GET 404 QUEUE_NOT_FOUND; PUT 400 VALIDATION_FAILED, 409 QUEUE_NOT_EMPTY and QUEUE_LOCKED; pop 429 QUEUE_BUSY', () => {
    const op = (id: string): OperationObject => operations(served).find((o) => o.op.operationId === id)!.op;
    const codesOf = (o: OperationObject, status: string): string[] =>
      restrictedCodes(o.responses[status].content!['application/json'].schema!, `${o.operationId} ${status}`).sort();
    const get = operations(served).find((o) => o.op.operationId === 'getSettings')!;
    const put = operations(served).find((o) => o.op.operationId === 'putSettings')!;
    expect([get.method, get.path, put.method, put.path]).toEqual(['get', '/queue/{queue_id}/settings', 'put', '/queue/{queue_id}/settings']);
    expect(codesOf(get.op, '404')).toEqual(['QUEUE_NOT_FOUND']);
    expect(get.op.responses['409']).toBeUndefined();
    expect(codesOf(put.op, '400')).toEqual(expect.arrayContaining(['INVALID_QUEUE_ID', 'VALIDATION_FAILED', 'MALFORMED_JSON']));
    expect(codesOf(put.op, '409')).toEqual(['QUEUE_LOCKED', 'QUEUE_NOT_EMPTY']);
    expect(put.op.responses['404']).toBeUndefined();
    expect(codesOf(op('pop'), '429')).toEqual(['QUEUE_BUSY', 'RATE_LIMITED']);
    expect(codesOf(op('pop'), '423')).toEqual(['QUEUE_LOCKED']);
    expect(op('pop').responses['429'].description).toContain('MAX_LOCKS_PER_QUEUE');
    // The request body: every field optional, with its range.
    const body = resolveRef(
      served,
      ((put.op as { requestBody?: unknown }).requestBody as { content: Record<string, { schema: { $ref: string } }> }).content['application/json'].schema.$ref,
    );
    expect(body.required ?? []).toEqual([]);
    expect(Object.keys(body.properties ?? {}).sort()).toEqual([
      'buffer_segments',
      'dead_letter_queue',
      'lock_mode',
      'max_deliveries',
      'max_in_flight',
      'max_pops_per_second',
      'paused',
      'retry_backoff',
      'retry_delay_max_seconds',
      'retry_delay_seconds',
      'segment_size',
    ]);
    expect(body.properties!.segment_size).toMatchObject({ type: 'integer', minimum: 1, maximum: 10000 });
    expect(body.properties!.buffer_segments).toMatchObject({ type: 'integer', minimum: 1, maximum: 1000 });
    expect(body.properties!.lock_mode).toMatchObject({ enum: ['exclusive', 'shared'] });
    expect(body.properties!.max_deliveries).toMatchObject({ type: 'integer', minimum: 1, maximum: 1000, nullable: true });
    expect(body.properties!.dead_letter_queue).toMatchObject({ type: 'string', nullable: true });
    expect(body.properties!.paused).toMatchObject({ type: 'boolean' });
    expect(body.properties!.retry_delay_seconds).toMatchObject({ type: 'integer', minimum: 0, maximum: 900 });
    expect(body.properties!.retry_backoff).toMatchObject({ enum: ['fixed', 'exponential'] });
    expect(body.properties!.retry_delay_max_seconds).toMatchObject({ type: 'integer', minimum: 1, maximum: 900 });
    expect(body.properties!.max_in_flight).toMatchObject({ type: 'integer', minimum: 1, maximum: 100000, nullable: true });
    expect(body.properties!.max_pops_per_second).toMatchObject({ type: 'number', minimum: 0.1, maximum: 100000, nullable: true });
  });

  it('every operation takes X-Request-Id and every answer declares it; the open routes say so with security: []', async () => {
    const doc = served as OpenApiDocument & { components: { parameters?: Record<string, unknown>; headers?: Record<string, unknown> } };
    expect(doc.components.parameters?.RequestId).toMatchObject({ name: 'X-Request-Id', in: 'header', required: false });
    expect(doc.components.headers?.RequestId).toMatchObject({ schema: { type: 'string' } });
    for (const { path, method, op } of operations(served)) {
      const where = `${method.toUpperCase()} ${path}`;
      expect((op as { parameters?: unknown[] }).parameters, where).toContainEqual({ $ref: '#/components/parameters/RequestId' });
      for (const [status, response] of Object.entries(op.responses))
        expect(response.headers?.['X-Request-Id'], `${where} ${status}`).toEqual({ $ref: '#/components/headers/RequestId' });
      const security = (op as { security?: unknown[] }).security;
      expect(security, `${where}: security declared`).toBeDefined();
      if (security!.length === 0) expect(['live', 'ready'], `${where}: open`).toContain(op.operationId);
    }
    const res = await fetch(`${svc.url}/health`, { headers: { 'X-Request-Id': 'trace-42' } });
    expect(res.headers.get('x-request-id')).toBe('trace-42');
  });

  it('GET /docs serves Swagger UI', async () => {
    const res = await fetch(`${svc.url}/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await res.text();
    expect(html).toMatch(/swagger-ui/i);
    expect(html).toContain('<html');
  });
});
