import { copyFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { sleep } from '../support/queue-helpers.js';
import { databaseKind } from '../support/service.js';
import { browserTestsEnabled, ROOT, screenshot, useConsole } from './browser-support.js';

/**
 * The console's live charts: on the overview, the service's pushes and pops per second, queued
 * items and locks held (from /metrics); on a queue's page, its waiting and held items and their
 * change per second (from its polls), beside the service's pushes and pops. Under a push/pop
 * load the lines get points and the numbers move.
 *
 * `UPDATE_DOCS_SCREENSHOT=1 npx vitest run --project browser -t "queue charts"` also writes
 * docs/admin-charts.png (shown in docs/operations.md).
 */
const suite = browserTestsEnabled ? describe : describe.skip;

const spark = (page: Page, scope: string, series: string) => page.locator(`[data-testid=${scope}] [data-testid=sparkline][data-series=${series}]`);
const pointsOf = async (page: Page, scope: string, series: string): Promise<number> => Number(await spark(page, scope, series).getAttribute('data-points'));
/** The number a chart shows (`1,234`, `+2.5`, `-3.0`), or NaN for `–`. */
const valueOf = async (page: Page, scope: string, series: string): Promise<number> =>
  Number(((await spark(page, scope, series).getByTestId('sparkline-value').textContent()) ?? '').replace(/,/g, '').replace('–', 'NaN'));

suite(`admin console charts in Chromium (${databaseKind})`, () => {
  const fx = useConsole('charts-');

  /** Pushes `batch` items to `queueId` and pops `depth` every `everyMs` until stopped. */
  function load(queueId: string, options: { batch: number; depth: number; everyMs: number }): { stop: () => Promise<void> } {
    let running = true;
    const done = (async () => {
      for (let n = 0; running; n++) {
        const items = Array.from({ length: options.batch }, (_, i) => ({ item: { n, i } }));
        await fx.client.POST('/queue/{queue_id}/push/batch', { params: { path: { queue_id: queueId } }, body: { items } });
        if (options.depth > 0) await fx.client.POST('/queue/{queue_id}/pop', { params: { path: { queue_id: queueId }, query: { depth: options.depth } } });
        await sleep(options.everyMs);
      }
    })();
    return {
      stop: async () => {
        running = false;
        await done;
      },
    };
  }

  it('overview charts: pushes/s and pops/s, queued items and locks held move under load', async () => {
    const q = fx.queueId('charts-overview');
    const locked = fx.queueId('charts-locked');
    await fx.client.POST('/queue/{queue_id}/push', { params: { path: { queue_id: locked } }, body: { item: { held: true } } });
    const lock = await fx.client.POST('/queue/{queue_id}/pop', { params: { path: { queue_id: locked }, query: { require_ack: true, ttl_seconds: 300 } } });
    expect(lock.data?.locked).toBe(true);

    const { page } = await fx.open('/admin/');
    await spark(page, 'service-charts', 'pushes').waitFor();
    const traffic = load(q, { batch: 20, depth: 10, everyMs: 200 });
    try {
      // Rates need two samples, two seconds apart; the gauges are counted at most every 10 s.
      await expect.poll(() => pointsOf(page, 'service-charts', 'pushes'), { timeout: 15_000 }).toBeGreaterThanOrEqual(3);
      await expect.poll(() => valueOf(page, 'service-charts', 'pushes'), { timeout: 15_000 }).toBeGreaterThan(0);
      await expect.poll(() => valueOf(page, 'service-charts', 'pops'), { timeout: 15_000 }).toBeGreaterThan(0);
      await expect.poll(() => valueOf(page, 'service-charts', 'depth'), { timeout: 25_000, interval: 500 }).toBeGreaterThan(0);
      await expect.poll(() => valueOf(page, 'service-charts', 'in-flight'), { timeout: 25_000, interval: 500 }).toBeGreaterThanOrEqual(1);
      expect(await pointsOf(page, 'service-charts', 'depth')).toBeGreaterThanOrEqual(3);
      // The line is drawn through the points.
      const line = await spark(page, 'service-charts', 'pushes').locator('polyline.spark-line').getAttribute('points');
      expect(line!.split(' ').length).toBe(await pointsOf(page, 'service-charts', 'pushes'));
    } finally {
      await traffic.stop();
    }
    // Pushes stop: the rate falls back to 0.
    await expect.poll(() => valueOf(page, 'service-charts', 'pushes'), { timeout: 15_000 }).toBe(0);
  });

  it('queue charts: waiting, held by locks and change/s of one queue, as it fills and drains', async () => {
    const q = fx.queueId('charts-queue');
    // Shared lock mode: plain pops go on while a lock holds some items.
    await fx.client.PUT('/queue/{queue_id}/settings', { params: { path: { queue_id: q } }, body: { lock_mode: 'shared' } });
    const filling = load(q, { batch: 25, depth: 0, everyMs: 250 });
    const { page } = await fx.open(`/admin/#/queue/${encodeURIComponent(q)}`);
    try {
      await expect.poll(() => pointsOf(page, 'queue-charts', 'depth'), { timeout: 15_000 }).toBeGreaterThanOrEqual(3);
      await expect.poll(() => valueOf(page, 'queue-charts', 'change'), { timeout: 15_000 }).toBeGreaterThan(0);
      await expect.poll(() => valueOf(page, 'queue-charts', 'pushes'), { timeout: 15_000 }).toBeGreaterThan(0);
    } finally {
      await filling.stop();
    }
    // What the queue holds once the load stopped (the page shows it within a poll).
    const peak = (await fx.client.GET('/queue/{queue_id}', { params: { path: { queue_id: q } } })).data!.count;
    expect(peak).toBeGreaterThanOrEqual(125);
    await expect.poll(() => valueOf(page, 'queue-charts', 'depth'), { timeout: 10_000 }).toBe(peak);
    const held = await fx.client.POST('/queue/{queue_id}/pop', { params: { path: { queue_id: q }, query: { depth: 5, require_ack: true, ttl_seconds: 300 } } });
    expect(held.data?.count).toBe(5);
    await expect.poll(() => valueOf(page, 'queue-charts', 'in-flight'), { timeout: 10_000 }).toBe(5);

    // Drain: the waiting line goes down, its change per second below 0.
    const draining = (async () => {
      for (let i = 0; i < 12; i++) {
        await fx.client.POST('/queue/{queue_id}/pop', { params: { path: { queue_id: q }, query: { depth: 10 } } });
        await sleep(400);
      }
    })();
    await expect.poll(() => valueOf(page, 'queue-charts', 'change'), { timeout: 15_000 }).toBeLessThan(0);
    await expect.poll(() => valueOf(page, 'queue-charts', 'pops'), { timeout: 15_000 }).toBeGreaterThan(0);
    await draining;
    await expect.poll(() => valueOf(page, 'queue-charts', 'depth'), { timeout: 10_000 }).toBe(peak - 5 - 120);

    await page.locator('main').evaluate((main) => main.scrollTo(0, 0));
    await page.mouse.move(0, 799);
    const shot = await screenshot(page, 'queue charts');
    if (process.env.UPDATE_DOCS_SCREENSHOT) {
      const target = join(ROOT, 'docs', 'admin-charts.png');
      copyFileSync(shot, target);
      expect(statSync(target).size).toBeLessThan(300 * 1024);
    }
  });
});
