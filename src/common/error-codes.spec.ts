import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { genericErrorCode } from './all-exceptions.filter.js';
import { ERROR_CODE_NAMES, ERROR_CODES, errorCodeInfo, isErrorCode, type ErrorCode } from './error-codes.js';
import { PushpopError } from './errors.js';

/**
 * `ERROR_CODES` is the one list of the codes the service answers: the OpenAPI document's
 * `ErrorCode` enum and the README's table come from it or are checked against it. These tests
 * find every place in src/ that makes an error answer and check that its code is listed with
 * its status, so that a new error cannot go undocumented.
 */
const SRC = dirname(dirname(fileURLToPath(import.meta.url)));
const README = join(SRC, '..', 'README.md');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts') ? [path] : [];
  });
}

const sources = sourceFiles(SRC).map((file) => ({ file, text: readFileSync(file, 'utf8') }));

/** Every class in src/ that extends PushpopError, directly or not, with the file that declares it. */
function errorClasses(): { name: string; file: string; abstract: boolean }[] {
  const declared = sources.flatMap(({ file, text }) =>
    [...text.matchAll(/^export\s+(abstract\s+)?class\s+(\w+)\s+extends\s+(\w+)/gm)].map((m) => ({
      name: m[2],
      parent: m[3],
      file,
      abstract: m[1] !== undefined,
    })),
  );
  const isError = (name: string, seen = new Set<string>()): boolean => {
    if (name === 'PushpopError') return true;
    if (seen.has(name)) return false;
    const parent = declared.find((c) => c.name === name)?.parent;
    return parent !== undefined && isError(parent, seen.add(name));
  };
  return declared.filter((c) => c.name !== 'PushpopError' && isError(c.name)).map(({ name, file, abstract }) => ({ name, file, abstract }));
}

/** Constructor arguments of the error classes that need some; the others are built with none. */
const ARGS: Record<string, unknown[]> = {
  ValidationFailedError: ['priority must not be less than 0'],
  ItemTooLargeError: [300_000, 262_144],
  ItemTooDeepError: [64],
  QueueNotFoundError: ['orders'],
  StateKeyNotFoundError: ['queue_0_seg_7'],
  QueueBusyError: ['orders'],
  SegmentUnavailableError: ['orders', 0, 7],
  QueueLockedError: [1_767_225_630_250],
  UnsupportedMediaTypeError: ['content encoding compress is not supported', { 'Accept-Encoding': 'gzip, deflate, br' }],
  MethodNotAllowedError: ['GET', ['POST']],
  UnauthorizedError: ['Unknown API key'],
  ForbiddenError: ['reader', ['produce']],
  RateLimitedError: [3, 0.5, 1],
};

describe('ERROR_CODES', () => {
  it('lists UPPER_SNAKE codes, each with its statuses, a meaning and an example message', () => {
    expect(ERROR_CODE_NAMES.length).toBeGreaterThan(0);
    for (const code of ERROR_CODE_NAMES) {
      const info = errorCodeInfo(code);
      expect(code).toMatch(/^[A-Z][A-Z0-9_]*$/);
      expect(info.statuses.length, code).toBeGreaterThan(0);
      for (const status of info.statuses) expect(status, code).toSatisfy((s: number) => Number.isInteger(s) && s >= 400 && s <= 599);
      expect(info.meaning, code).not.toBe('');
      expect(info.message, code).not.toBe('');
    }
  });

  it('lists the codes of API keys and rate limits', () => {
    expect(ERROR_CODES.UNAUTHORIZED.statuses).toEqual([401]);
    expect(ERROR_CODES.FORBIDDEN.statuses).toEqual([403]);
    expect(ERROR_CODES.RATE_LIMITED.statuses).toEqual([429]);
  });

  it('lists the code, status, extra fields and headers of every PushpopError subclass in src/', async () => {
    const classes = errorClasses();
    // The scan sees the errors it must (a broken scan would pass vacuously).
    expect(classes.map((c) => c.name)).toEqual(
      expect.arrayContaining(['ValidationFailedError', 'LockNotFoundError', 'MethodNotAllowedError', 'AdminNotBuiltError']),
    );
    const concrete = classes.filter((c) => !c.abstract);
    expect(
      Object.keys(ARGS).filter((name) => !concrete.some((c) => c.name === name)),
      'ARGS names a class that is gone',
    ).toEqual([]);
    for (const { name, file } of concrete) {
      const where = `${name} (${relative(SRC, file)})`;
      const module = (await import(pathToFileURL(file).href)) as Record<string, new (...args: unknown[]) => unknown>;
      expect(module[name], `${where} is exported`).toBeTypeOf('function');
      const error = new module[name](...(ARGS[name] ?? []));
      expect(error, where).toBeInstanceOf(PushpopError);
      const { status, errorCode, extra, headers } = error as PushpopError;
      expect(isErrorCode(errorCode), `${where}: ${errorCode} is in ERROR_CODES`).toBe(true);
      const info = errorCodeInfo(errorCode);
      expect(info.statuses, `${where}: ${errorCode} is listed with ${status}`).toContain(status);
      expect(Object.keys(extra).sort(), `${where}: the extra fields of ${errorCode}`).toEqual(Object.keys(info.extra ?? {}).sort());
      for (const header of Object.keys(headers)) expect(info.headers ?? [], `${where}: ${errorCode} documents its ${header} header`).toContain(header);
    }
  });

  it('lists every code src/ answers with a literal status and code (new PushpopError, super)', () => {
    const made = sources.flatMap(({ file, text }) =>
      [...text.matchAll(/(?:new PushpopError|super)\(\s*(\d{3}),\s*'([^']*)'/g)].map((m) => ({ where: relative(SRC, file), status: Number(m[1]), code: m[2] })),
    );
    expect(made.map((m) => m.code)).toEqual(expect.arrayContaining(['SERVICE_UNAVAILABLE', 'INTERNAL_ERROR', 'ADMIN_NOT_BUILT', 'QUEUE_LOCKED']));
    for (const { where, status, code } of made) {
      expect(isErrorCode(code), `${where}: ${code} is in ERROR_CODES`).toBe(true);
      expect(errorCodeInfo(code as ErrorCode).statuses, `${where}: ${code} is listed with ${status}`).toContain(status);
    }
  });

  it('the filter answers a status the service does not name with a listed code', () => {
    for (let status = 400; status <= 599; status++) {
      const code = genericErrorCode(status);
      expect(isErrorCode(code), `${status} → ${code}`).toBe(true);
      if (status >= 500) expect(code).toBe('INTERNAL_ERROR');
      else if (code !== 'BAD_REQUEST') expect(errorCodeInfo(code).statuses, `${status} → ${code}`).toContain(status);
    }
    expect(genericErrorCode(404)).toBe('NOT_FOUND');
    expect(genericErrorCode(416)).toBe('BAD_REQUEST');
  });

  it("the README's error table lists every code with its statuses, and nothing else", () => {
    const text = readFileSync(README, 'utf8');
    const section = text.slice(text.indexOf('### Errors'), text.indexOf('\n## ', text.indexOf('### Errors')));
    const rows = [...section.matchAll(/^\| ([\d/]+) \| (.+?) \|/gm)].flatMap((m) =>
      [...m[2].matchAll(/`([A-Z_]+)`/g)].map((c) => ({ statuses: m[1], code: c[1] })),
    );
    expect(rows.map((r) => r.code).sort()).toEqual([...ERROR_CODE_NAMES].sort());
    for (const { statuses, code } of rows) {
      for (const status of errorCodeInfo(code as ErrorCode).statuses) expect(statuses.split('/'), `README: ${code} under ${status}`).toContain(String(status));
    }
  });
});
