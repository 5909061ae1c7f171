/**
 * `npm start` builds only what changed since the last successful build (scripts/build-if-stale.mjs).
 * The first block drives the script over a small tree whose "builds" are node one-liners, so it
 * takes seconds, not the minute of real builds; the second checks the real parts' inputs on a copy of the repository's
 * files (digests only, nothing is built).
 */
import { appendFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildParts, PARTS, partInputs, type Part } from '../../scripts/build-if-stale.mjs';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

function write(root: string, path: string, text: string): void {
  mkdirSync(dirname(join(root, path)), { recursive: true });
  writeFileSync(join(root, path), text);
}

/** A build that writes `<output>/out.txt` and logs its name to builds.log, or fails when `<name>/FAIL` exists. */
function fakeBuild(name: string, output: string): string[] {
  const script = [
    "const fs = require('node:fs');",
    `if (fs.existsSync(${JSON.stringify(`${name}/FAIL`)})) process.exit(3);`,
    `fs.mkdirSync(${JSON.stringify(output)}, { recursive: true });`,
    `fs.writeFileSync(${JSON.stringify(`${output}/out.txt`)}, 'built');`,
    `fs.appendFileSync('builds.log', ${JSON.stringify(`${name}\n`)});`,
  ].join(' ');
  return [process.execPath, '-e', script];
}

describe('build-if-stale over a small tree', () => {
  let root: string;
  // `lib` is used by `app`, as libs/keyed-mutex is by the service.
  const parts: Part[] = [
    { title: 'lib', inputs: ['lib', 'lock.json'], output: 'lib/dist', check: 'out.txt', command: fakeBuild('lib', 'lib/dist') },
    { title: 'app', inputs: ['app', 'lib', 'lock.json'], output: 'app/dist', check: 'out.txt', command: fakeBuild('app', 'app/dist') },
  ];

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'pushpop-build-if-stale-'));
    write(root, 'lock.json', '{}');
    write(root, 'lib/src/index.ts', 'export const a = 1;');
    write(root, 'lib/src/index.spec.ts', 'test');
    write(root, 'app/src/main.ts', 'console.log(1);');
    write(root, 'app/index.html', '<html></html>');
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  /** Runs the script's logic; returns the parts that were built and what it printed. */
  function build(options: { all?: boolean; nodeMajor?: number } = {}): { status: number; built: string[]; lines: string[] } {
    rmSync(join(root, 'builds.log'), { force: true });
    const lines: string[] = [];
    const status = buildParts({ root, parts, nodeMajor: 20, log: (line) => lines.push(line), ...options });
    const log = join(root, 'builds.log');
    return { status, built: existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : [], lines };
  }

  it('builds everything the first time, then nothing while nothing changes', () => {
    expect(build()).toMatchObject({ status: 0, built: ['lib', 'app'] });
    const again = build();
    expect(again).toMatchObject({ status: 0, built: [] });
    expect(again.lines).toEqual(['build: lib up to date', 'build: app up to date']);
  });

  it('rebuilds the part whose source changed, and the parts that use it', () => {
    build();
    appendFileSync(join(root, 'app/src/main.ts'), '\nconsole.log(2);');
    const app = build();
    expect(app.built).toEqual(['app']);
    expect(app.lines).toContain('build: app: building (app/src/main.ts changed)');
    expect(app.lines.at(-1)).toMatch(/^build: app built in \d+\.\d s$/);

    write(root, 'lib/src/index.ts', 'export const a = 2;');
    expect(build().built).toEqual(['lib', 'app']);
    write(root, 'app/src/new.ts', 'export {};');
    expect(build().lines).toContain('build: app: building (app/src/new.ts added)');
    rmSync(join(root, 'app/src/new.ts'));
    expect(build().built).toEqual(['app']);
    write(root, 'lock.json', '{"lockfileVersion":3}');
    expect(build().built).toEqual(['lib', 'app']);
  });

  it('goes by content: a touched but unchanged file, or a changed unit test, builds nothing', () => {
    build();
    const later = new Date(Date.now() + 60_000);
    utimesSync(join(root, 'app/src/main.ts'), later, later);
    write(root, 'lib/src/index.spec.ts', 'another test');
    expect(build().built).toEqual([]);
  });

  it('rebuilds after a failed build, a deleted output or a new Node major version', () => {
    build();
    write(root, 'app/src/main.ts', 'broken');
    write(root, 'app/FAIL', '');
    const failed = build();
    expect(failed.status).toBe(3);
    expect(failed.lines.at(-1)).toMatch(/^build: app FAILED \(.* exited with 3\)$/);
    // The source is put back as it was at the last good build: the failed build may have left anything behind.
    write(root, 'app/src/main.ts', 'console.log(1);');
    rmSync(join(root, 'app/FAIL'));
    expect(build()).toMatchObject({ status: 0, built: ['app'] });

    rmSync(join(root, 'lib/dist'), { recursive: true });
    expect(build().lines[0]).toBe('build: lib: building (not built yet)');
    rmSync(join(root, 'app/dist/out.txt'));
    expect(build().lines).toContain('build: app: building (app/dist/out.txt is missing)');

    expect(build({ nodeMajor: 24 }).lines[0]).toBe('build: lib: building (Node 24, last built with Node 20)');
  });

  it('with all, builds every part even when up to date', () => {
    build();
    expect(build({ all: true }).built).toEqual(['lib', 'app']);
    expect(build().built).toEqual([]);
  });
});

describe('the parts of pushpop', () => {
  let root: string;

  beforeAll(() => {
    // The repository's sources and configuration, without node_modules or any build output.
    root = mkdtempSync(join(tmpdir(), 'pushpop-parts-'));
    for (const path of ['src', 'libs', 'apps', 'test', 'package.json', 'package-lock.json', 'tsconfig.json', 'nest-cli.json', 'README.md']) {
      cpSync(join(repoRoot, path), join(root, path), { recursive: true, filter: (source) => !/[\\/](node_modules|dist)$/.test(source) });
    }
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  const digests = (): Record<string, string> => Object.fromEntries(PARTS.map((part) => [part.title, partInputs(root, part, 20).digest]));

  function rebuiltBy(path: string): string[] {
    const before = digests();
    appendFileSync(join(root, path), '\n// edited\n');
    const after = digests();
    return PARTS.map((part) => part.title).filter((title) => before[title] !== after[title]);
  }

  it('each change rebuilds the parts built from it, and only those', () => {
    expect(rebuiltBy('apps/admin/src/main.tsx')).toEqual(['admin console (apps/admin)']);
    expect(rebuiltBy('apps/admin/vite.config.ts')).toEqual(['admin console (apps/admin)']);
    expect(rebuiltBy('src/main.ts')).toEqual(['service (src)']);
    expect(rebuiltBy('nest-cli.json')).toEqual(['service (src)']);
    expect(rebuiltBy('libs/keyed-mutex/src/keyed-mutex.ts')).toEqual(['libs/keyed-mutex', 'service (src)']);
    expect(rebuiltBy('libs/api-client/src/index.ts')).toEqual(['libs/api-client', 'libs/client', 'admin console (apps/admin)']);
    expect(rebuiltBy('libs/client/src/index.ts')).toEqual(['libs/client']);
    expect(rebuiltBy('package-lock.json')).toEqual(PARTS.map((part) => part.title));
    expect(rebuiltBy('src/architecture.spec.ts')).toEqual([]);
    expect(rebuiltBy('README.md')).toEqual([]);
    expect(rebuiltBy('test/e2e/openapi.test.ts')).toEqual([]);
  });

  it('a different Node major version rebuilds every part', () => {
    for (const part of PARTS) expect(partInputs(root, part, 24).digest, part.title).not.toBe(partInputs(root, part, 20).digest);
  });
});

describe('package.json', () => {
  it('npm start builds what changed; npm run build builds everything', () => {
    const scripts = (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    expect(scripts.prestart).toBe('node scripts/build-if-stale.mjs');
    expect(scripts.build).toBe('node scripts/build-if-stale.mjs --all');
  });
});
