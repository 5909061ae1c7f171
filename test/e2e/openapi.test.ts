import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import SwaggerParser from '@apidevtools/swagger-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, startChildService, type ChildService, type ServiceBuild } from '../support/child-service.js';
import { databaseKind, makeDataDir, removeDataDir } from '../support/service.js';

/**
 * The document the BUILT service serves (`node dist/main.js`, compiled by `nest build` with
 * the Swagger CLI plugin, which the SWC-compiled in-test app is not) is the committed
 * openapi.json, and it says what the house style and CONTRACT.md promise: operationIds are the
 * controller method names, and every queue endpoint documents its 400/429/503 error bodies.
 */

interface SchemaObject {
  $ref?: string;
  allOf?: SchemaObject[];
  type?: string;
  properties?: Record<string, SchemaObject>;
  required?: string[];
  enum?: string[];
}
interface ResponseObject {
  description: string;
  headers?: Record<string, { schema?: SchemaObject }>;
  content?: Record<string, { schema?: SchemaObject }>;
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
const QUEUE_OPERATIONS = ['push', 'pushBatch', 'pop', 'acknowledge', 'extendLock', 'release', 'getQueue', 'getState', 'listQueues', 'deleteQueue'];
const OPERATIONS = [...QUEUE_OPERATIONS, 'live', 'ready', 'metrics', 'whoami'];
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

  it('every queue endpoint documents 400, 429 and 503 with the error body, its error codes, and Retry-After on 429/503', () => {
    const queueOps = operations(served).filter(({ op }) => QUEUE_OPERATIONS.includes(op.operationId ?? ''));
    expect(queueOps.map(({ op }) => op.operationId).sort()).toEqual([...QUEUE_OPERATIONS].sort());
    for (const { path, method, op } of queueOps) {
      const where = `${method.toUpperCase()} ${path} (${op.operationId})`;
      expect(Object.keys(op.responses), where).toEqual(expect.arrayContaining(['200', '400', '429', '503']));
      for (const [status, response] of Object.entries(op.responses)) {
        if (Number(status) < 400) continue;
        const schema = response.content?.['application/json']?.schema;
        expect(schema?.allOf, `${where} ${status}: error schema`).toHaveLength(2);
        const [base, codes] = schema!.allOf!;
        const body = resolveRef(served, base.$ref!);
        expect(body.required, `${where} ${status}: ${base.$ref} has the error body fields`).toEqual(
          expect.arrayContaining(['statusCode', 'error_code', 'message']),
        );
        expect(body.properties?.statusCode?.type).toBe('integer');
        const enumCodes = codes.properties?.error_code?.enum ?? [];
        expect(enumCodes.length, `${where} ${status}: error codes listed`).toBeGreaterThan(0);
        for (const code of enumCodes) expect(code).toMatch(/^[A-Z][A-Z0-9_]*$/);
        expect(response.description, `${where} ${status}: description lists the codes`).toBe(enumCodes.join(', '));
        if (status === '429' || status === '503') expect(response.headers?.['Retry-After']?.schema?.type, `${where} ${status}: Retry-After`).toBe('integer');
      }
      const badRequest = path.includes('{queue_id}') ? ['INVALID_QUEUE_ID', 'VALIDATION_FAILED'] : ['VALIDATION_FAILED'];
      expect(op.responses['400'].content!['application/json'].schema!.allOf![1].properties!.error_code.enum).toEqual(expect.arrayContaining(badRequest));
      expect(op.responses['429'].content!['application/json'].schema!.allOf![1].properties!.error_code.enum).toEqual(['QUEUE_BUSY']);
      expect(op.responses['503'].content!['application/json'].schema!.allOf![1].properties!.error_code.enum).toEqual(['STORE_UNAVAILABLE']);
    }
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
