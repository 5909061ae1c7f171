import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The rules that keep the flow one way (controller → service → turn runner → pure core →
 * repository), checked on the import statements of every source file.
 */
const SRC = dirname(fileURLToPath(import.meta.url));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts') ? [path] : [];
  });
}

/** Every import of a file: the specifier and, for relative ones, the file it names. */
function importsOf(file: string): { specifier: string; target?: string }[] {
  const text = readFileSync(file, 'utf8');
  const specifiers = [...text.matchAll(/^\s*(?:import|export)\s[^;]*?from\s+'([^']+)'/gms), ...text.matchAll(/import\(\s*'([^']+)'\s*\)/g)].map((m) => m[1]);
  return specifiers.map((specifier) => ({
    specifier,
    target: specifier.startsWith('.') ? resolve(dirname(file), specifier).replace(/\.js$/, '.ts') : undefined,
  }));
}

/** The names a file imports from one specifier (the text between `import` and `from`). */
function importedNames(file: string, specifier: string): string {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/^\s*(?:import|export)\s([^;]*?)from\s+'([^']+)'/gms)]
    .filter((m) => m[2] === specifier)
    .map((m) => m[1])
    .join(' ');
}

/** The folder under src/ a file belongs to (`app` for files directly in src/). */
const folderOf = (file: string): string => {
  const parts = relative(SRC, file).split(sep);
  return parts.length > 1 ? parts[0] : 'app';
};
const rel = (file: string): string => relative(SRC, file);

const files = sourceFiles(SRC);

describe('architecture', () => {
  it('no import cycles between src/* folders', () => {
    const edges = new Map<string, Set<string>>();
    for (const file of files) {
      for (const { target } of importsOf(file)) {
        if (!target?.startsWith(SRC)) continue;
        const [from, to] = [folderOf(file), folderOf(target)];
        if (from === to) continue;
        if (!edges.has(from)) edges.set(from, new Set());
        edges.get(from)!.add(to);
      }
    }
    const cycles: string[] = [];
    const visit = (node: string, path: string[]): void => {
      for (const next of edges.get(node) ?? []) {
        if (path.includes(next)) cycles.push([...path.slice(path.indexOf(next)), next].join(' → '));
        else visit(next, [...path, next]);
      }
    };
    for (const node of edges.keys()) visit(node, [node]);
    expect([...new Set(cycles)]).toEqual([]);
  });

  it('the queue core imports nothing but its own files: no NestJS, no TypeORM, no other module or folder of ours', () => {
    const core = join(SRC, 'queue', 'core');
    const offending = files
      .filter((f) => f.startsWith(core))
      .flatMap((f) =>
        importsOf(f)
          .filter((i) => !i.target?.startsWith(core))
          .map((i) => `${rel(f)} imports ${i.specifier}`),
      );
    expect(offending).toEqual([]);
  });

  it('the queue runtime imports nothing of the HTTP layer: no controller, service, pipe, mapper or DTO of src/queue', () => {
    const queue = join(SRC, 'queue');
    const runtime = join(queue, 'runtime');
    const http = (target: string): boolean => dirname(target) === queue || target.startsWith(join(queue, 'dto') + sep);
    const offending = files
      .filter((f) => f.startsWith(runtime + sep))
      .flatMap((f) =>
        importsOf(f)
          .filter((i) => i.target && http(i.target))
          .map((i) => `${rel(f)} imports ${i.specifier}`),
      );
    expect(offending).toEqual([]);
  });

  it('storage imports nothing of the queue (runtime, core or HTTP layer): repositories answer whoever calls them', () => {
    const storage = join(SRC, 'storage');
    const queue = join(SRC, 'queue');
    const offending = files
      .filter((f) => f.startsWith(storage + sep))
      .flatMap((f) =>
        importsOf(f)
          .filter((i) => i.target?.startsWith(queue + sep))
          .map((i) => `${rel(f)} imports ${i.specifier}`),
      );
    expect(files.some((f) => f.startsWith(storage + sep))).toBe(true);
    expect(offending).toEqual([]);
  });

  it("the queue core and runtime answer with outcomes: they import no HTTP error (ours or NestJS's)", () => {
    const engine = [join(SRC, 'queue', 'core'), join(SRC, 'queue', 'runtime')];
    const errors = join(SRC, 'common', 'errors.ts');
    const offending = files
      .filter((f) => engine.some((dir) => f.startsWith(dir + sep)))
      .flatMap((f) =>
        importsOf(f)
          .filter((i) => i.target === errors || (i.specifier.startsWith('@nestjs/') && /\b\w*Exception\b/.test(importedNames(f, i.specifier))))
          .map((i) => `${rel(f)} imports ${i.specifier}`),
      );
    expect(offending).toEqual([]);
  });

  it('metrics only observe: other modules use only its port and metric names, and it imports none of the modules it observes', () => {
    const metrics = join(SRC, 'metrics');
    const port = [join(metrics, 'metric-collectors.ts'), join(metrics, 'metric-names.ts')];
    const observed = ['queue', 'storage', 'offload', 'schedules', 'lock', 'delay', 'dedup'];
    const offending = files.flatMap((f) =>
      importsOf(f)
        .filter(
          (i) =>
            i.target &&
            ((folderOf(f) !== 'metrics' && folderOf(f) !== 'app' && folderOf(i.target) === 'metrics' && !port.includes(i.target)) ||
              (folderOf(f) === 'metrics' && (observed.includes(folderOf(i.target)) || (i.target.endsWith('.controller.ts') && !i.target.startsWith(metrics))))),
        )
        .map((i) => `${rel(f)} imports ${i.specifier}`),
    );
    expect(offending).toEqual([]);
  });

  it('only the database layer, repositories, entities and migrations touch TypeORM; domain code sees no EntityManager', () => {
    const allowed = (f: string): boolean => folderOf(f) === 'database' || /\.(repository|entity)\.ts$/.test(f);
    const offending = files
      .filter((f) => !allowed(f) && (importsOf(f).some((i) => i.specifier === 'typeorm') || /\bEntityManager\b/.test(readFileSync(f, 'utf8'))))
      .map(rel);
    expect(offending).toEqual([]);
  });

  it('the OpenTelemetry SDK is loaded only when tracing is on: only otel-tracing.ts imports @opentelemetry, and only by a dynamic import', () => {
    const sdkImports = files.flatMap((file) =>
      importsOf(file)
        .filter(({ specifier }) => specifier.startsWith('@opentelemetry/'))
        .map(({ specifier }) => `${rel(file)}: ${specifier}`),
    );
    expect(sdkImports.every((line) => line.startsWith(join('telemetry', 'otel-tracing.ts')))).toBe(true);
    expect(sdkImports.length).toBeGreaterThan(0);
    const importers = files.filter((file) => importsOf(file).some(({ target }) => target === join(SRC, 'telemetry', 'otel-tracing.ts')));
    expect(importers.map(rel)).toEqual([join('telemetry', 'tracing.ts')]);
    const text = readFileSync(join(SRC, 'telemetry', 'tracing.ts'), 'utf8');
    expect(text).toMatch(/await import\('\.\/otel-tracing\.js'\)/);
    expect(text).not.toMatch(/^import\s[^;]*otel-tracing/m);
  });
});
