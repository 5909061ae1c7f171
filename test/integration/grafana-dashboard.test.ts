/**
 * docker/grafana/pushpop.json, the Grafana dashboard that docker/compose.yaml provisions with
 * Prometheus as its data source, checked without a container engine: every metric a panel asks
 * for exists in a live /metrics of the service, `promtool` accepts every expression, the panels
 * cover what an operator looks at, the provisioning files and the compose service agree, and a
 * real Prometheus scraping the service answers every query.
 *
 * `promtool` and `prometheus` come with Debian's `prometheus` package; missing, their tests fail
 * on CI (CI set) and are skipped elsewhere.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { METRICS } from '../../src/metrics/metric-names.js';
import { repoRoot } from '../support/child-service.js';
import {
  instantQuery,
  missingBinaries,
  onCI,
  PROMETHEUS_BIN,
  PROMTOOL_BIN,
  requireBinary,
  runProcess,
  startPrometheus,
  type PrometheusServer,
} from '../support/prometheus.js';
import { sleep } from '../support/queue-helpers.js';
import { databaseKind, removeDataDir, startService, uniqueQueueId, type TestService } from '../support/service.js';

const dockerDir = join(repoRoot, 'docker');
const read = (path: string): string => readFileSync(join(repoRoot, path), 'utf8');

interface Target {
  refId: string;
  expr: string;
  legendFormat?: string;
  datasource?: { type?: string; uid?: string };
}
interface Panel {
  id: number;
  type: string;
  title: string;
  description?: string;
  datasource?: { type?: string; uid?: string };
  gridPos: { h: number; w: number; x: number; y: number };
  targets?: Target[];
}
interface Dashboard {
  uid: string;
  title: string;
  schemaVersion: number;
  panels: Panel[];
  templating: { list: { name: string; type: string; query?: unknown; datasource?: { uid?: string }; allValue?: string }[] };
}

const dashboard = JSON.parse(read('docker/grafana/pushpop.json')) as Dashboard;
const graphs = dashboard.panels.filter((p) => p.type !== 'row');
const targets = graphs.flatMap((panel) => (panel.targets ?? []).map((target) => ({ panel: panel.title, ...target })));

/**
 * An expression as Prometheus receives it from Grafana: the dashboard's variables replaced by
 * values they can take (`$__rate_interval` is at least four scrape intervals).
 */
function asSent(expr: string): string {
  return expr.replaceAll('$__rate_interval', '1m').replaceAll('$instance', '.*').replaceAll('$operation', '(push|pop)');
}

/** The metric names an expression reads: every name of the service starts with pushpop_. */
const metricNames = (expr: string): string[] => [...new Set(expr.match(/\bpushpop_[A-Za-z0-9_:]*/g) ?? [])];

describe('docker/grafana/pushpop.json', () => {
  it('is a dashboard on a Prometheus data source chosen by a variable', () => {
    expect(dashboard).toMatchObject({ uid: 'pushpop', title: 'pushpop' });
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36);
    const variables = Object.fromEntries(dashboard.templating.list.map((v) => [v.name, v]));
    expect(variables.datasource).toMatchObject({ type: 'datasource', query: 'prometheus' });
    for (const name of ['instance', 'operation'])
      expect(variables[name]).toMatchObject({ type: 'query', datasource: { uid: '${datasource}' }, allValue: '.*' });
    expect(graphs.length).toBeGreaterThan(10);
    for (const panel of graphs) {
      expect(panel.datasource, panel.title).toEqual({ type: 'prometheus', uid: '${datasource}' });
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      expect(panel.description, panel.title).toBeTruthy();
      for (const target of panel.targets!) expect(target.datasource, panel.title).toEqual({ type: 'prometheus', uid: '${datasource}' });
    }
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size, 'panel ids are unique').toBe(ids.length);
  });

  it('lays its panels out on the 24-column grid without overlaps', () => {
    const cells = new Set<string>();
    for (const panel of dashboard.panels) {
      const { x, y, w, h } = panel.gridPos;
      expect(x + w, panel.title).toBeLessThanOrEqual(24);
      for (let i = x; i < x + w; i++)
        for (let j = y; j < y + h; j++) {
          expect(cells.has(`${i},${j}`), `${panel.title} overlaps at ${i},${j}`).toBe(false);
          cells.add(`${i},${j}`);
        }
    }
  });

  it('shows throughput, latency percentiles, depth and in-flight, long polls, lock expiries, dead letters, offloading, errors by code, pauses, limits, redrive and schedules', () => {
    const uses = (pattern: RegExp): string[] => targets.filter((t) => pattern.test(t.expr)).map((t) => t.panel);
    expect(uses(/sum by \(operation\) \(rate\(pushpop_operations_total\{/)).toContain('Throughput by operation');
    for (const q of ['0.5', '0.95', '0.99'])
      expect(uses(new RegExp(`histogram_quantile\\(${q.replace('.', '\\.')}, .*pushpop_operation_duration_seconds_bucket`)).length).toBeGreaterThan(0);
    expect(uses(/pushpop_queued_items/)).toContain('Depth and in-flight');
    expect(uses(/pushpop_live_locks/)).toContain('Depth and in-flight');
    expect(uses(/pushpop_long_polls_waiting/).length).toBeGreaterThan(0);
    expect(uses(/pushpop_long_poll_wake_ups_total/).length).toBeGreaterThan(0);
    expect(uses(/pushpop_lock_expirations_total/).length).toBeGreaterThan(0);
    expect(uses(/pushpop_items_dead_lettered_total/).length).toBeGreaterThan(0);
    expect(uses(/pushpop_items_redriven_total/).length).toBeGreaterThan(0);
    expect(uses(/pushpop_segments_offloaded_total/).length).toBeGreaterThan(0);
    expect(uses(/pushpop_offloaded_segments/).length).toBeGreaterThan(0);
    expect(uses(/sum by \(operation, outcome\) \(rate\(pushpop_operations_total\{[^}]*outcome!="ok"/)).toContain('Errors by code');
    expect(uses(/pushpop_paused_queues/).length).toBeGreaterThan(0);
    expect(uses(/pushpop_pops_limited_total/).length).toBeGreaterThan(0);
    expect(uses(/pushpop_schedule_firings_total/).length).toBeGreaterThan(0);
  });

  it("groups and filters only by labels its metrics have (or Prometheus's instance and job, and le of a histogram)", () => {
    const labelsOf = new Map<string, readonly string[]>(Object.values(METRICS).map((m) => [m.name, 'labels' in m ? m.labels : []]));
    const problems: string[] = [];
    for (const target of targets) {
      const allowed = new Set(['instance', 'job', 'le']);
      for (const name of metricNames(target.expr)) for (const label of labelsOf.get(name.replace(/_(bucket|sum|count)$/, '')) ?? []) allowed.add(label);
      const used = [
        ...[...target.expr.matchAll(/\bby \(([^)]*)\)/g)].flatMap((m) => m[1].split(',').map((l) => l.trim())),
        ...[...target.expr.matchAll(/[{,]\s*([a-z_]+)\s*(?:=~|!=|!~|=)/g)].map((m) => m[1]),
      ];
      for (const label of used) if (!allowed.has(label)) problems.push(`${target.panel}: ${label} in ${target.expr}`);
      // The legend names only labels the series keep.
      for (const [, label] of (target.legendFormat ?? '').matchAll(/\{\{(\w+)\}\}/g))
        if (!allowed.has(label)) problems.push(`${target.panel}: legend {{${label}}}`);
    }
    expect(problems).toEqual([]);
  });

  it('filters every series by the instance variable and uses only variables Grafana sets', () => {
    for (const target of targets) {
      for (const name of metricNames(target.expr)) {
        const selectors = [...target.expr.matchAll(new RegExp(`${name}(\\{[^}]*\\})?`, 'g'))].map((m) => m[1] ?? '');
        for (const selector of selectors) expect(selector, `${target.panel}: ${name}`).toContain('instance=~"$instance"');
      }
      expect(asSent(target.expr), target.panel).not.toContain('$');
    }
  });
});

describe(`the dashboard's queries against a live /metrics (${databaseKind})`, () => {
  let service: TestService | undefined;
  let exposition = '';

  beforeAll(async () => {
    service = await startService();
    const { http } = service;
    const q = uniqueQueueId('grafana');
    for (let i = 0; i < 3; i++) expect((await http.post(`/queue/${q}/push`).send({ item: { i } })).status).toBe(200);
    expect((await http.post(`/queue/${q}/push/batch`).send({ items: [{ item: { b: 1 } }, { item: { b: 2 } }] })).status).toBe(200);
    expect((await http.post(`/queue/${q}/pop?depth=1`)).status).toBe(200);
    const locked = await http.post(`/queue/${q}/pop?depth=1&require_ack=true`);
    expect(locked.status).toBe(200);
    expect((await http.post(`/queue/${q}/acknowledge`).send({ lock_id: locked.body.lock_id })).status).toBe(200);
    const released = await http.post(`/queue/${q}/pop?depth=1&require_ack=true`);
    expect((await http.post(`/queue/${q}/release`).send({ lock_id: released.body.lock_id })).status).toBe(200);
    expect((await http.post(`/queue/${q}/push`).send({ item: [] })).status).toBe(400);
    const res = await http.get('/metrics');
    expect(res.status).toBe(200);
    exposition = res.text;
  });

  let prometheus: PrometheusServer | undefined;

  afterAll(async () => {
    await prometheus?.stop();
    if (service) {
      await service.close();
      removeDataDir(service.dataDir);
    }
  });

  it('every metric name of every panel query is in /metrics', () => {
    // Sample names, and for histograms their _bucket/_sum/_count series; a labelled counter
    // nothing has counted yet shows only its # TYPE line.
    const names = new Set<string>();
    for (const line of exposition.split('\n')) {
      const type = /^# TYPE (\S+) (\S+)$/.exec(line);
      if (type) {
        names.add(type[1]);
        if (type[2] === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(type[1] + suffix);
      } else if (line && !line.startsWith('#')) names.add(/^[^{\s]+/.exec(line)![0]);
    }
    const missing = targets.flatMap((t) =>
      metricNames(t.expr)
        .filter((n) => !names.has(n))
        .map((n) => `${t.panel}: ${n}`),
    );
    expect(missing).toEqual([]);
    expect(
      targets.every((t) => metricNames(t.expr).length > 0),
      'every query reads a pushpop metric',
    ).toBe(true);
    // The counters the traffic panels read have samples now.
    for (const name of ['pushpop_items_pushed_total', 'pushpop_items_popped_total', 'pushpop_operation_duration_seconds_bucket']) {
      expect(exposition).toMatch(new RegExp(`^${name}(\\{[^}]*\\})? [1-9]`, 'm'));
    }
  });

  it.skipIf(missingBinaries(PROMTOOL_BIN).length > 0 && !onCI)('promtool accepts every expression (as recording rules)', async () => {
    requireBinary(PROMTOOL_BIN);
    const dir = mkdtempSync(join(tmpdir(), 'pushpop-grafana-'));
    try {
      // JSON is YAML: the rules file is written as JSON.
      const rules = targets.map((t, i) => ({ record: `pushpop:dashboard_query_${i}`, expr: asSent(t.expr) }));
      writeFileSync(join(dir, 'rules.yml'), JSON.stringify({ groups: [{ name: 'dashboard', rules }] }, null, 2));
      const result = await runProcess(PROMTOOL_BIN, ['check', 'rules', join(dir, 'rules.yml')], { timeoutMs: 30_000 });
      expect(result.code, `${result.stdout}${result.stderr}`).toBe(0);
      expect(result.stdout).toContain(`SUCCESS: ${rules.length} rules found`);

      // And an expression it must refuse is refused (the check can fail).
      writeFileSync(join(dir, 'bad.yml'), JSON.stringify({ groups: [{ name: 'bad', rules: [{ record: 'x:y', expr: 'sum by (le (rate(x[1m]))' }] }] }));
      expect((await runProcess(PROMTOOL_BIN, ['check', 'rules', join(dir, 'bad.yml')], { timeoutMs: 30_000 })).code).not.toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.skipIf(missingBinaries(PROMETHEUS_BIN).length > 0 && !onCI)(
    'a real Prometheus scraping the service answers every query, the traffic and latency panels with series',
    async () => {
      requireBinary(PROMETHEUS_BIN);
      prometheus = await startPrometheus({ targets: [new URL(service!.url).host], scrapeIntervalSeconds: 1 });
      // Traffic between scrapes, so that rates and quantiles have something to say.
      const q = uniqueQueueId('grafana-live');
      const deadline = Date.now() + 30_000;
      let pushedSeries: unknown[] = [];
      while (Date.now() < deadline) {
        await service!.http.post(`/queue/${q}/push`).send({ item: { at: Date.now() } });
        await service!.http.post(`/queue/${q}/pop`);
        pushedSeries = await instantQuery(prometheus, 'rate(pushpop_items_pushed_total[5s]) > 0').catch(() => []);
        if (pushedSeries.length > 0) break;
        await sleep(200);
      }
      expect(pushedSeries.length, `Prometheus saw no pushes:\n${prometheus.output()}`).toBeGreaterThan(0);
      const answers = new Map<string, number>();
      for (const target of targets) {
        // Grafana's $__rate_interval is at least four scrape intervals: 4 s here.
        const series = await instantQuery(prometheus, asSent(target.expr).replaceAll('[1m]', '[4s]'));
        answers.set(`${target.panel} ${target.refId}`, series.length);
      }
      for (const key of [
        'Items per second A',
        'Throughput by operation A',
        'Latency percentiles ($operation) C',
        'p99 latency by operation A',
        'Depth and in-flight A',
      ]) {
        expect(answers.get(key), key).toBeGreaterThan(0);
      }
    },
  );
});

describe('Grafana in docker/compose.yaml', () => {
  type Service = {
    image?: string;
    volumes?: string[];
    ports?: string[];
    depends_on?: string[] | Record<string, unknown>;
    environment?: Record<string, string>;
  };
  const compose = parseYaml(read('docker/compose.yaml')) as { services: Record<string, Service>; volumes?: Record<string, unknown> };
  const grafana = compose.services.grafana;
  /** host path (resolved from docker/) → container path, for the bind mounts of the grafana service. */
  const mounts = new Map(
    (grafana?.volumes ?? []).filter((v) => v.startsWith('./')).map((v) => [resolve(dockerDir, v.split(':')[0]), v.split(':')[1]] as const),
  );

  it('runs grafana/grafana after prometheus on port 3000, read-only for anonymous visitors', () => {
    expect(grafana.image).toMatch(/^grafana\/grafana:\d+\.\d+\.\d+$/);
    expect(grafana.ports).toContain('3000:3000');
    expect([grafana.depends_on].flat()).toContain('prometheus');
    expect(grafana.environment).toMatchObject({ GF_AUTH_ANONYMOUS_ENABLED: 'true', GF_AUTH_ANONYMOUS_ORG_ROLE: 'Viewer' });
  });

  it('provisions the Prometheus service as the data source', () => {
    const target = mounts.get(join(dockerDir, 'grafana/provisioning/datasources'));
    expect(target).toBe('/etc/grafana/provisioning/datasources');
    const file = parseYaml(read('docker/grafana/provisioning/datasources/prometheus.yaml')) as { datasources: { type: string; url: string; access: string }[] };
    expect(file.datasources).toHaveLength(1);
    const [source] = file.datasources;
    expect(source).toMatchObject({ type: 'prometheus', access: 'proxy' });
    const url = new URL(source.url);
    expect(Object.keys(compose.services)).toContain(url.hostname);
    expect(compose.services[url.hostname].image).toMatch(/^prom\/prometheus/);
    expect(compose.services[url.hostname].ports?.map((p) => p.split(':').at(-1))).toContain(url.port);
  });

  it('provisions docker/grafana/pushpop.json from the folder its provider reads, as the home dashboard', () => {
    expect(mounts.get(join(dockerDir, 'grafana/provisioning/dashboards'))).toBe('/etc/grafana/provisioning/dashboards');
    const file = parseYaml(read('docker/grafana/provisioning/dashboards/pushpop.yaml')) as { providers: { type: string; options: { path: string } }[] };
    expect(file.providers).toHaveLength(1);
    expect(file.providers[0].type).toBe('file');
    const dashboardPath = mounts.get(join(dockerDir, 'grafana/pushpop.json'));
    expect(dashboardPath).toBeDefined();
    expect(posix.dirname(dashboardPath!)).toBe(file.providers[0].options.path);
    expect(grafana.environment?.GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH).toBe(dashboardPath);
  });
});
