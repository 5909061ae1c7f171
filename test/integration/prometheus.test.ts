/**
 * /metrics as Prometheus itself sees it: `promtool check metrics` lints the exposition, and a
 * real Prometheus server (Debian's `prometheus` package) scrapes the service on loopback and
 * answers the pushed count through its query API.
 *
 * Needs /usr/bin/prometheus and /usr/bin/promtool (`apt-get install -y prometheus`). Missing
 * binaries fail the tests on CI (CI set) and skip them elsewhere. Nothing here touches a
 * system Prometheus on 9090: the server gets a free loopback port and a temporary TSDB.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  instantQuery,
  missingBinaries,
  onCI,
  PROMETHEUS_BIN,
  PROMTOOL_BIN,
  requireBinary,
  runProcess,
  scrapeTargets,
  startPrometheus,
  type PrometheusServer,
  type PromSample,
} from '../support/prometheus.js';
import { sleep } from '../support/queue-helpers.js';
import { databaseKind, removeDataDir, startService, uniqueQueueId, type TestService } from '../support/service.js';

const missing = missingBinaries(PROMETHEUS_BIN, PROMTOOL_BIN);
const skip = missing.length > 0 && !onCI;
const title = skip
  ? `Prometheus (skipped: ${missing.join(', ')} not installed; apt-get install -y prometheus)`
  : `Prometheus scraping pushpop (${databaseKind})`;

/** Items pushed by beforeAll; pushpop_items_pushed_total of this process must say exactly this. */
const PUSHED = 7;

describe.skipIf(skip)(title, () => {
  let service: TestService | undefined;
  let prometheus: PrometheusServer | undefined;

  beforeAll(async () => {
    service = await startService();
    const { http } = service;
    const queueId = uniqueQueueId('prom');
    for (let i = 0; i < 3; i++) {
      const res = await http.post(`/queue/${queueId}/push`).send({ item: { n: i }, priority: i });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    }
    const batch = await http.post(`/queue/${queueId}/push/batch`).send({ items: [3, 4, 5, 6].map((n) => ({ item: { n } })) });
    expect(batch.status, JSON.stringify(batch.body)).toBe(200);
    expect(3 + batch.body.count).toBe(PUSHED);
    // A few more series for the linter: a pop, an acknowledged pop, an error outcome.
    expect((await http.post(`/queue/${queueId}/pop?depth=2`)).status).toBe(200);
    const locked = await http.post(`/queue/${queueId}/pop?depth=2&require_ack=true`);
    expect(locked.status).toBe(200);
    expect((await http.post(`/queue/${queueId}/acknowledge`).send({ lock_id: locked.body.lock_id })).status).toBe(200);
    expect((await http.post(`/queue/${queueId}/push`).send({ item: [] })).status).toBe(400);
  });

  afterAll(async () => {
    await prometheus?.stop();
    if (service) {
      await service.close();
      removeDataDir(service.dataDir);
    }
  });

  it('promtool check metrics accepts the /metrics exposition', async () => {
    requireBinary(PROMTOOL_BIN);
    const res = await fetch(`${service!.url}/metrics`, { signal: AbortSignal.timeout(10_000) });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await res.text();
    expect(text).toMatch(/^pushpop_items_pushed_total 7$/m);

    const result = await runProcess(PROMTOOL_BIN, ['check', 'metrics'], { input: text, timeoutMs: 30_000 });
    // promtool prints one line per problem: "<metric> <what is wrong>"; exit 0 means none.
    expect(result.code, `promtool check metrics exited ${result.code} (signal ${result.signal}):\n${result.stdout}${result.stderr}`).toBe(0);
  });

  it(`a real Prometheus scrapes the service and reports ${PUSHED} pushed items`, async () => {
    requireBinary(PROMETHEUS_BIN);
    const target = new URL(service!.url).host; // 127.0.0.1:<port>
    expect(target).toMatch(/^127\.0\.0\.1:\d+$/);
    prometheus = await startPrometheus({ targets: [target], job: 'pushpop', scrapeIntervalSeconds: 1 });

    const deadline = Date.now() + 30_000;
    let last: PromSample[] = [];
    let lastError = '';
    while (Date.now() < deadline) {
      try {
        last = await instantQuery(prometheus, 'pushpop_items_pushed_total');
        lastError = '';
        if (last.length > 0 && Number(last[0].value[1]) === PUSHED) break;
      } catch (error) {
        lastError = (error as Error).message;
      }
      await sleep(250);
    }
    if (!(last.length === 1 && Number(last[0].value[1]) === PUSHED)) {
      const targets = JSON.stringify(await scrapeTargets(prometheus));
      throw new Error(
        `Prometheus did not report pushpop_items_pushed_total ${PUSHED} within 30 s: last answer ${JSON.stringify(last)} ${lastError}\n` +
          `targets: ${targets}\nprometheus output:\n${prometheus.output()}`,
      );
    }
    expect(last[0].metric).toMatchObject({ __name__: 'pushpop_items_pushed_total', job: 'pushpop', instance: target });

    // The scrape itself is healthy (up == 1) for the same target.
    const up = await instantQuery(prometheus, 'up{job="pushpop"}');
    expect(up.map((s) => [s.metric.instance, s.value[1]])).toEqual([[target, '1']]);

    const stopped = await prometheus.stop();
    prometheus = undefined;
    expect(stopped, 'prometheus exits on SIGTERM').toEqual({ code: 0, signal: null });
  });
});
