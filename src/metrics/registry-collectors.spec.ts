import { describe, expect, it } from 'vitest';
import type { DatabaseProvider } from '../database/database.provider.js';
import { MetricsRegistry } from './metrics-registry.js';
import { RegistryCollectors } from './registry-collectors.js';

/** Collectors on a fresh registry, with a clock and a database readiness the test moves. */
function collectors() {
  const metrics = new MetricsRegistry();
  const time = { now: 1_000_000 };
  const db = { isReady: true };
  const port = new RegistryCollectors(metrics, { now: () => time.now }, db as DatabaseProvider);
  const scrape = async (name: string): Promise<string[]> =>
    (await metrics.registry.metrics()).split('\n').filter((line) => line.startsWith(name) || line.startsWith(`# HELP ${name} `));
  return { port, time, db, scrape };
}

describe('RegistryCollectors', () => {
  it('a counter mirrors the count it reads at each scrape, as a number or by its one label', async () => {
    const { port, scrape } = collectors();
    const counts = { plain: 2, byCause: { local: 1, recheck: 0 } };
    port.counter({ name: 'test_plain_total', help: 'Plain' }, () => counts.plain);
    port.counter({ name: 'test_by_cause_total', help: 'By cause', labels: ['cause'] }, () => counts.byCause);
    expect(await scrape('test_plain_total')).toEqual(['# HELP test_plain_total Plain', 'test_plain_total 2']);
    counts.plain = 5;
    counts.byCause.recheck = 3;
    expect(await scrape('test_plain_total')).toEqual(['# HELP test_plain_total Plain', 'test_plain_total 5']);
    expect(await scrape('test_by_cause_total')).toEqual([
      '# HELP test_by_cause_total By cause',
      'test_by_cause_total{cause="local"} 1',
      'test_by_cause_total{cause="recheck"} 3',
    ]);
  });

  it('a gauge reads its value at each scrape', async () => {
    const { port, scrape } = collectors();
    let value = 7;
    port.gauge({ name: 'test_gauge', help: 'G' }, () => value);
    expect(await scrape('test_gauge')).toContain('test_gauge 7');
    value = 3;
    expect(await scrape('test_gauge')).toContain('test_gauge 3');
  });

  it('a stored count is read at most every 10 s, not while the database is closed, and keeps the last count when a read fails', async () => {
    const { port, time, db, scrape } = collectors();
    let reads = 0;
    let next: () => Promise<number> = () => Promise.resolve(4);
    port.storedCount({ name: 'test_stored', help: 'S' }, () => {
      reads += 1;
      return next();
    });
    expect(await scrape('test_stored')).toContain('test_stored 4');
    next = () => Promise.resolve(9);
    time.now += 10_000;
    expect(await scrape('test_stored')).toContain('test_stored 4');
    time.now += 1;
    expect(await scrape('test_stored')).toContain('test_stored 9');
    next = () => Promise.reject(new Error('the database is gone'));
    time.now += 10_001;
    expect(await scrape('test_stored')).toContain('test_stored 9');
    db.isReady = false;
    time.now += 10_001;
    expect(await scrape('test_stored')).toContain('test_stored 9');
    expect(reads).toBe(3);
  });

  it('a histogram counts what it is told, with or without labels', async () => {
    const { port, scrape } = collectors();
    const plain = port.histogram({ name: 'test_plain_seconds', help: 'P' });
    const labelled = port.histogram({ name: 'test_outcome_seconds', help: 'O', labels: ['outcome'] });
    plain(0.002);
    labelled(0.5, { outcome: 'ok' });
    labelled(30, { outcome: 'error' });
    expect(await scrape('test_plain_seconds_count')).toEqual(['test_plain_seconds_count 1']);
    expect(await scrape('test_outcome_seconds_count')).toEqual(['test_outcome_seconds_count{outcome="ok"} 1', 'test_outcome_seconds_count{outcome="error"} 1']);
    expect(await scrape('test_outcome_seconds_bucket{le="25"')).toEqual([
      'test_outcome_seconds_bucket{le="25",outcome="ok"} 1',
      'test_outcome_seconds_bucket{le="25",outcome="error"} 0',
    ]);
  });
});
