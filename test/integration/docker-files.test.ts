/**
 * docker/Dockerfile, docker/compose.yaml, docker/prometheus.yml and .dockerignore, checked
 * without a container engine: the image builds and starts with the same commands as CI and
 * `npm start`, runs as a non-root user, its HEALTHCHECK command works, the compose services
 * and the Prometheus scrape target agree, and `promtool check config` accepts prometheus.yml.
 */
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, type Server } from 'node:http';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadApiKeys } from '../../src/config/api-keys.js';
import { repoRoot } from '../support/child-service.js';
import { missingBinaries, onCI, PROMTOOL_BIN, requireBinary, runProcess } from '../support/prometheus.js';

const dockerDir = join(repoRoot, 'docker');
const read = (path: string): string => readFileSync(join(repoRoot, path), 'utf8');
const packageJson = JSON.parse(read('package.json')) as { scripts: Record<string, string> };

type YamlParse = (text: string) => unknown;

/**
 * A YAML parser: the `yaml` package when it is installed (meant to become a devDependency),
 * else js-yaml, which is installed as a dependency of @nestjs/swagger.
 */
async function yamlParser(): Promise<YamlParse> {
  const candidates: [string, (mod: Record<string, unknown>) => unknown][] = [
    ['yaml', (mod) => mod.parse],
    ['js-yaml', (mod) => mod.load],
  ];
  for (const [specifier, pick] of candidates) {
    try {
      const mod = (await import(/* @vite-ignore */ specifier)) as Record<string, unknown>;
      const fn = pick(mod) ?? pick((mod.default ?? {}) as Record<string, unknown>);
      if (typeof fn === 'function') return fn as YamlParse;
    } catch {
      // not installed; try the next one
    }
  }
  throw new Error('no YAML parser installed: add the `yaml` package as a devDependency');
}

// ---------------------------------------------------------------- Dockerfile

interface Instruction {
  keyword: string;
  args: string;
}

/** The Dockerfile's instructions (continuations joined, comments and parser directives dropped), split into stages. */
function dockerfileStages(text: string): Instruction[][] {
  const logical: string[] = [];
  let current = '';
  for (const raw of text.split('\n')) {
    const line = raw.trimEnd();
    if (/^\s*#/.test(line)) continue;
    if (line.endsWith('\\')) {
      current += line.slice(0, -1) + ' ';
      continue;
    }
    current += line;
    if (current.trim() !== '') logical.push(current.trim());
    current = '';
  }
  if (current.trim() !== '') logical.push(current.trim());
  const stages: Instruction[][] = [];
  for (const line of logical) {
    const match = /^(\S+)\s*(.*)$/s.exec(line)!;
    const instruction = { keyword: match[1].toUpperCase(), args: match[2].replace(/\s+/g, ' ').trim() };
    if (instruction.keyword === 'FROM') stages.push([]);
    if (stages.length === 0) throw new Error(`Dockerfile: ${instruction.keyword} before the first FROM`);
    stages.at(-1)!.push(instruction);
  }
  return stages;
}

const all = (stage: Instruction[], keyword: string): string[] => stage.filter((i) => i.keyword === keyword).map((i) => i.args);
const last = (stage: Instruction[], keyword: string): string | undefined => all(stage, keyword).at(-1);

/** `KEY=value KEY2=value2` (the form this Dockerfile uses) as an object. */
function envOf(stage: Instruction[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const args of all(stage, 'ENV')) {
    for (const pair of args.split(' ')) {
      const eq = pair.indexOf('=');
      if (eq > 0) env[pair.slice(0, eq)] = pair.slice(eq + 1).replace(/^"(.*)"$/, '$1');
    }
  }
  return env;
}

/** The JSON array of an exec-form instruction argument (`["node", "dist/main.js"]`). */
function execForm(args: string): string[] {
  const parsed = JSON.parse(args) as unknown;
  if (!Array.isArray(parsed) || !parsed.every((a) => typeof a === 'string')) throw new Error(`not an exec-form array: ${args}`);
  return parsed;
}

/** The exec-form command of `HEALTHCHECK [--option=value ...] CMD [...]`. */
function healthcheckCommand(args: string): string[] {
  const match = /^(?:--\S+\s+)*CMD\s+(\[.*\])$/s.exec(args);
  if (!match) throw new Error(`HEALTHCHECK is not in exec form (HEALTHCHECK [options] CMD ["node", ...]): ${args}`);
  return execForm(match[1]);
}

describe('docker/Dockerfile', () => {
  const stages = dockerfileStages(read('docker/Dockerfile'));
  const [build, runtime] = [stages[0], stages.at(-1)!];
  const runs = (stage: Instruction[]): string[] => all(stage, 'RUN');

  it('is multi-stage on node:24-bookworm-slim (the current Node LTS)', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    for (const stage of stages) expect(stage[0].args).toMatch(/^node:24-bookworm-slim(\s+AS\s+\S+)?$/i);
  });

  it('builds with npm ci, then the build script CI uses, then prunes dev dependencies', () => {
    expect(packageJson.scripts.build, 'package.json has a build script').toBeTruthy();
    const commands = runs(build).map((r) => r.replace(/^--mount=\S+\s+/g, ''));
    const at = (command: string): number => commands.findIndex((c) => c === command || c.split(/\s*&&\s*/).includes(command));
    expect(at('npm ci'), `RUN npm ci in ${JSON.stringify(commands)}`).toBeGreaterThanOrEqual(0);
    expect(at('npm run build'), 'RUN npm run build').toBeGreaterThan(at('npm ci'));
    expect(at('npm prune --omit=dev'), 'RUN npm prune --omit=dev after the build').toBeGreaterThan(at('npm run build'));
  });

  it('runtime stage: copies the build output, does not build, starts with scripts.start', () => {
    expect(runs(runtime).join('\n')).not.toMatch(/npm (ci|install|run)/);
    const buildName = /\sAS\s+(\S+)$/i.exec(build[0].args)?.[1];
    expect(all(runtime, 'COPY').some((c) => c.includes(`--from=${buildName}`) || c.includes('--from=0'))).toBe(true);
    expect(all(runtime, 'WORKDIR').at(-1)).toBe('/app');
    const cmd = execForm(last(runtime, 'CMD') ?? 'null');
    expect(cmd).toEqual(['node', 'dist/main.js']);
    expect(cmd.join(' '), 'CMD is package.json scripts.start').toBe(packageJson.scripts.start);
  });

  it('runs as a user that is not root', () => {
    const user = last(runtime, 'USER');
    expect(user, 'runtime stage sets USER').toBeDefined();
    expect(user!.split(':')[0]).not.toMatch(/^(root|0)$/);
  });

  it('serves on 0.0.0.0:8000 in production mode with its data under a /data volume', () => {
    expect(envOf(runtime)).toMatchObject({ NODE_ENV: 'production', HOST: '0.0.0.0', PORT: '8000', DATA_DIR: '/data' });
    expect(all(runtime, 'EXPOSE')).toContain('8000');
    expect(all(runtime, 'VOLUME').join(' ')).toMatch(/\/data\b/);
    expect(runs(runtime).join('\n')).toMatch(/chown\s+(-\S+\s+)*node(:node)?\s+\/data/);
  });

  describe('HEALTHCHECK', () => {
    let status = 200;
    let server: Server;
    let port = 0;
    beforeAll(async () => {
      server = createServer((req, res) => {
        res.statusCode = req.url === '/health/ready' ? status : 404;
        res.end();
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      port = (server.address() as { port: number }).port;
    });
    afterAll(async () => {
      await new Promise<void>((r) => server.close(() => r()));
    });

    const check = async (portEnv: number): Promise<number | null> => {
      const [bin, ...args] = healthcheckCommand(last(runtime, 'HEALTHCHECK') ?? '');
      expect(bin).toBe('node');
      const result = await runProcess(process.execPath, args, { env: { ...process.env, PORT: String(portEnv) }, timeoutMs: 15_000 });
      return result.code;
    };

    it('queries /health/ready with node fetch: healthy on 200, unhealthy on 503 or no answer', async () => {
      expect(last(runtime, 'HEALTHCHECK')).toMatch(/\/health\/ready/);
      status = 200;
      expect(await check(port)).toBe(0);
      status = 503;
      expect(await check(port)).toBe(1);
      const closed = await new Promise<number>((r) => {
        const probe = createServer();
        probe.listen(0, '127.0.0.1', () => {
          const p = (probe.address() as { port: number }).port;
          probe.close(() => r(p));
        });
      });
      expect(await check(closed)).toBe(1);
    });
  });
});

describe('.dockerignore', () => {
  it('keeps host installs, builds, data and git out of the build context', () => {
    const entries = read('.dockerignore')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    for (const name of ['node_modules', 'dist', '.data', '.git', 'coverage', 'test-results']) {
      expect(
        entries.some((e) => e === name || e === `**/${name}`),
        `${name} in .dockerignore`,
      ).toBe(true);
    }
    // The build needs these in the context.
    for (const needed of ['package.json', 'package-lock.json', 'src', 'libs', 'apps', 'tsconfig.json', 'nest-cli.json']) {
      expect(entries, `${needed} must not be ignored`).not.toContain(needed);
    }
  });
});

// ---------------------------------------------------------------- compose and prometheus

interface ComposeService {
  image?: string;
  build?: { context?: string; dockerfile?: string } | string;
  environment?: Record<string, string> | string[];
  depends_on?: Record<string, { condition?: string }> | string[];
  ports?: (string | { target?: number; published?: number | string })[];
  healthcheck?: { test?: string | string[] };
  volumes?: (string | { source?: string; target?: string })[];
}

describe('docker/compose.yaml and docker/prometheus.yml', () => {
  let compose: { services: Record<string, ComposeService> };
  let prometheus: { scrape_configs: { job_name: string; metrics_path?: string; scrape_interval?: string; static_configs?: { targets: string[] }[] }[] };

  beforeAll(async () => {
    const parse = await yamlParser();
    compose = parse(read('docker/compose.yaml')) as typeof compose;
    prometheus = parse(read('docker/prometheus.yml')) as typeof prometheus;
  });

  const environment = (service: ComposeService): Record<string, string> =>
    Array.isArray(service.environment)
      ? Object.fromEntries(service.environment.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]))
      : (service.environment ?? {});
  const containerPorts = (service: ComposeService): number[] =>
    (service.ports ?? []).map((p) => (typeof p === 'string' ? Number(p.split(':').at(-1)!.split('/')[0]) : Number(p.target)));
  const volumeSpecs = (service: ComposeService): string[] =>
    (service.volumes ?? []).map((v) => (typeof v === 'string' ? v : `${v.source ?? ''}:${v.target ?? ''}`));

  it('has the services pushpop, postgres and prometheus', () => {
    expect(Object.keys(compose.services).sort()).toEqual(expect.arrayContaining(['postgres', 'prometheus', 'pushpop']));
  });

  it('pushpop: built from the repository with docker/Dockerfile, on the postgres service once it is healthy, port 8000', () => {
    const pushpop = compose.services.pushpop;
    expect(typeof pushpop.build).toBe('object');
    const build = pushpop.build as { context?: string; dockerfile?: string };
    expect(resolve(dockerDir, build.context ?? '.')).toBe(repoRoot);
    expect(existsSync(join(resolve(dockerDir, build.context ?? '.'), build.dockerfile ?? 'Dockerfile'))).toBe(true);
    expect(build.dockerfile).toBe('docker/Dockerfile');

    const databaseUrl = new URL(environment(pushpop).DATABASE_URL ?? 'missing:');
    expect(databaseUrl.protocol).toMatch(/^postgres(ql)?:$/);
    expect(databaseUrl.hostname, 'DATABASE_URL points at the postgres service').toBe('postgres');
    expect(pushpop.depends_on).toMatchObject({ postgres: { condition: 'service_healthy' } });
    expect(containerPorts(pushpop)).toContain(8000);
  });

  it('postgres: postgres:15 with a pg_isready healthcheck and a volume', () => {
    const postgres = compose.services.postgres;
    expect(postgres.image).toBe('postgres:15');
    const test = postgres.healthcheck?.test;
    expect([test].flat().join(' ')).toMatch(/pg_isready/);
    expect(volumeSpecs(postgres).some((v) => v.endsWith(':/var/lib/postgresql/data'))).toBe(true);
  });

  it('prometheus: prom/prometheus with docker/prometheus.yml mounted, port 9090', () => {
    const service = compose.services.prometheus;
    expect(service.image).toMatch(/^prom\/prometheus(:|$)/);
    const mount = volumeSpecs(service).find((v) => v.split(':')[1] === '/etc/prometheus/prometheus.yml');
    expect(mount, 'prometheus.yml mounted at /etc/prometheus/prometheus.yml').toBeDefined();
    expect(resolve(dockerDir, mount!.split(':')[0])).toBe(join(dockerDir, 'prometheus.yml'));
    expect(containerPorts(service)).toContain(9090);
  });

  it('prometheus.yml scrapes the pushpop service on its container port every 5s', () => {
    const job = prometheus.scrape_configs.find((c) => (c.static_configs ?? []).some((s) => s.targets.some((t) => t.startsWith('pushpop:'))));
    expect(job, 'a scrape config targets pushpop:<port>').toBeDefined();
    const targets = job!.static_configs!.flatMap((s) => s.targets);
    expect(targets).toEqual(['pushpop:8000']);
    const [host, port] = targets[0].split(':');
    expect(Object.keys(compose.services)).toContain(host);
    expect(containerPorts(compose.services[host])).toContain(Number(port));
    const runtime = dockerfileStages(read('docker/Dockerfile')).at(-1)!;
    expect(all(runtime, 'EXPOSE')).toContain(port);
    expect(envOf(runtime).PORT).toBe(port);
    expect(job!.metrics_path ?? '/metrics').toBe('/metrics');
    expect(job!.scrape_interval).toBe('5s');
  });

  it('pushpop reads its API keys from a compose secret, and Prometheus scrapes with a read key from another', () => {
    type WithSecrets = ComposeService & { secrets?: (string | { source: string })[] };
    const secretsOf = (name: string): string[] => ((compose.services[name] as WithSecrets).secrets ?? []).map((x) => (typeof x === 'string' ? x : x.source));
    const declared = (compose as unknown as { secrets?: Record<string, { file?: string }> }).secrets ?? {};
    expect(secretsOf('pushpop')).toContain('pushpop_api_keys');
    expect(environment(compose.services.pushpop).API_KEYS_FILE).toBe('/run/secrets/pushpop_api_keys');
    expect(secretsOf('prometheus')).toContain('pushpop_metrics_key');
    const job = prometheus.scrape_configs.find((c) => c.job_name === 'pushpop') as { authorization?: { type?: string; credentials_file?: string } };
    expect(job.authorization).toEqual({ type: 'Bearer', credentials_file: '/run/secrets/pushpop_metrics_key' });
    // The files docker/make-secrets.sh writes, kept out of git and of the image.
    expect(declared).toEqual({ pushpop_api_keys: { file: './secrets/api-keys' }, pushpop_metrics_key: { file: './secrets/metrics-key' } });
    expect(read('.gitignore').split('\n')).toContain('docker/secrets/');
    expect(read('.dockerignore').split('\n')).toContain('docker/secrets');
  });

  it('docker/make-secrets.sh writes keys the service accepts, with the scopes compose needs, and keeps existing ones', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pushpop-secrets-'));
    try {
      cpSync(join(dockerDir, 'make-secrets.sh'), join(dir, 'make-secrets.sh'));
      const first = await runProcess('bash', [join(dir, 'make-secrets.sh')], { timeoutMs: 30_000 });
      expect(first.code, first.stderr).toBe(0);
      const keys = loadApiKeys({ API_KEYS_FILE: join(dir, 'secrets/api-keys') });
      expect(keys.map((k) => [k.name, k.scopes])).toEqual([
        ['ops', ['admin']],
        ['prometheus', ['read']],
      ]);
      expect(readFileSync(join(dir, 'secrets/metrics-key'), 'utf8')).toBe(keys[1].key);
      expect(first.stdout).toContain(keys[0].key);
      const again = await runProcess('bash', [join(dir, 'make-secrets.sh')], { timeoutMs: 30_000 });
      expect(again.code).toBe(0);
      expect(loadApiKeys({ API_KEYS_FILE: join(dir, 'secrets/api-keys') })).toEqual(keys);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.skipIf(missingBinaries(PROMTOOL_BIN).length > 0 && !onCI)('promtool check config accepts prometheus.yml', async () => {
    requireBinary(PROMTOOL_BIN);
    // promtool checks that the credentials file exists: the secret is mounted only in the
    // container, so a copy of the config points at a stand-in file.
    const dir = mkdtempSync(join(tmpdir(), 'pushpop-promtool-'));
    try {
      writeFileSync(join(dir, 'key'), 'stand-in-key-0123456789');
      const config = read('docker/prometheus.yml');
      expect(config).toContain('/run/secrets/pushpop_metrics_key');
      writeFileSync(join(dir, 'prometheus.yml'), config.replace('/run/secrets/pushpop_metrics_key', join(dir, 'key')));
      const result = await runProcess(PROMTOOL_BIN, ['check', 'config', join(dir, 'prometheus.yml')], { timeoutMs: 30_000 });
      expect(result.code, `${result.stdout}${result.stderr}`).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
