import { copyFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { DatabaseProvider } from '../../src/database/database.provider.js';
import { EnqueueCarrier } from '../../src/enqueue/enqueue-carrier.js';
import { databaseKind, uniqueQueueId } from '../support/service.js';
import { browserTestsEnabled, ROOT, screenshot, useConsole } from './browser-support.js';

/**
 * The admin console (apps/admin) in headless Chromium, served by the service at /admin/ and
 * talking to it through the generated fx.client. Every test ends with a screenshot under
 * test-results/browser/ and fails on any console error or uncaught exception of the page.
 *
 * `UPDATE_DOCS_SCREENSHOT=1 npx vitest run --project browser -t overview` also writes the
 * picture docs/admin-console.png (shown in the README and docs/usage.md).
 */

const suite = browserTestsEnabled ? describe : describe.skip;

suite(`admin console in Chromium (${databaseKind})`, () => {
  const fx = useConsole('');
  const { open, queueId } = fx;

  async function push(id: string, items: Record<string, unknown>[], priority = 0): Promise<void> {
    for (let i = 0; i < items.length; i += 1000) {
      const batch = items.slice(i, i + 1000).map((item) => ({ item, priority }));
      const { error } = await fx.client.POST('/queue/{queue_id}/push/batch', { params: { path: { queue_id: id } }, body: { items: batch } });
      expect(error).toBeUndefined();
    }
  }

  async function inspect(id: string) {
    const { data, error } = await fx.client.GET('/queue/{queue_id}', { params: { path: { queue_id: id } } });
    if (error || !data) throw new Error(`GET /queue/${id}: ${JSON.stringify(error)}`);
    return data;
  }

  const numbered = (n: number, from = 0) => Array.from({ length: n }, (_, i) => ({ n: from + i }));

  it('pushes an item through the form to a new queue: the list and the panel count it', async () => {
    const id = queueId('admin-push');
    const { page, requests } = await open();
    await page.getByLabel('Open queue by id').fill(id);
    await page.getByLabel('Open queue by id').press('Enter');
    await page.getByTestId('queue-missing').waitFor();
    expect(new URL(page.url()).hash).toBe(`#/queue/${id}`);

    await page.locator('textarea[name=item]').fill('{"order": 1001, "sku": "A-7", "note": "naïve ☕"}');
    await page.locator('input[name=priority]').fill('3');
    await page.getByRole('button', { name: 'Push', exact: true }).click();

    await expect.poll(() => page.getByTestId('result-message').textContent()).toBe(`Item pushed to queue ${id} at priority 3`);
    const row = page.locator(`[data-testid=queue-row][data-queue-id="${id}"]`);
    await expect.poll(() => row.getAttribute('data-count')).toBe('1');
    await expect.poll(() => page.getByTestId('queue-count').textContent()).toBe('1');
    await expect.poll(() => row.getAttribute('aria-current')).toBe('true');
    const segment = page.locator('[data-testid=priority][data-priority="3"] [data-testid=segment]');
    await expect.poll(() => segment.getAttribute('data-kind')).toBe('head-tail');
    expect(await segment.getAttribute('data-items')).toBe('1');
    await expect.poll(() => page.getByTestId('items').textContent()).toContain('"sku": "A-7"');

    const info = await inspect(id);
    expect(info.count).toBe(1);
    expect(info.priorities['3'].count).toBe(1);
    expect(requests.filter((r) => r.startsWith(`POST /queue/${id}/push`))).toHaveLength(1);
  });

  it('pops with acknowledgement: the lock counts down, acknowledge empties the queue', async () => {
    const id = queueId('admin-ack');
    await push(id, [{ job: 'a' }]);
    const { error } = await fx.client.POST('/queue/{queue_id}/push', {
      params: { path: { queue_id: id } },
      body: { item: { job: 'b' }, headers: { tenant: 'acme' } },
    });
    expect(error).toBeUndefined();
    const { page } = await open(`/admin/#/queue/${id}`);
    await expect.poll(() => page.getByTestId('queue-count').textContent()).toBe('2');

    await page.locator('input[name=depth]').fill('2');
    await page.locator('input[name=ttl]').fill('60');
    await page.getByRole('button', { name: 'Pop with ack', exact: true }).click();

    await expect.poll(() => page.getByTestId('result-message').textContent()).toBe('Popped 2 items, held under a lock until acknowledged.');
    expect(await page.getByTestId('popped-items').textContent()).toContain('"job": "b"');
    expect(JSON.parse((await page.getByTestId('popped-headers').textContent())!)).toEqual([{}, { tenant: 'acme' }]);
    const lockId = await page.getByTestId('result-lock-id').textContent();
    expect(lockId).toMatch(/^[A-Za-z0-9_-]{11,}$/);
    await expect.poll(() => page.getByTestId('lock-id').inputValue()).toBe(lockId);

    const countdown = page.getByTestId('lock-countdown');
    await countdown.waitFor();
    const first = await countdown.textContent();
    expect(first).toMatch(/^expires in (\d+\.\d s|\d+:\d\d\.\d)$/);
    await expect.poll(() => countdown.textContent(), { timeout: 2000 }).not.toBe(first);
    await expect.poll(() => page.getByTestId('lock-items').textContent()).toBe('2 items held');
    await expect.poll(() => page.getByTestId('queue-count').textContent()).toBe('0');
    await expect.poll(() => page.locator(`[data-testid=queue-row][data-queue-id="${id}"]`).getAttribute('data-locked')).toBe('true');

    await page.getByTestId('lock-card').getByRole('button', { name: 'Acknowledge', exact: true }).click();
    await expect.poll(() => page.getByTestId('result-message').textContent()).toBe('Acknowledged 2 items: gone for good.');
    await expect.poll(() => page.getByTestId('lock-countdown').count()).toBe(0);
    await expect.poll(() => page.getByTestId('queue-count').textContent()).toBe('0');
    expect(await page.getByTestId('segments').count()).toBe(0);

    const info = await fx.client.GET('/queue/{queue_id}', { params: { path: { queue_id: id } } });
    if (info.data) {
      expect(info.data.count).toBe(0);
      expect(info.data.lock).toBeNull();
    } else {
      expect(info.error?.error_code).toBe('QUEUE_NOT_FOUND');
    }
  });

  it('draws the segment chain: head, buffer, offloaded segments and tail; long runs collapse', async () => {
    const id = queueId('admin-segments');
    // SEGMENT_SIZE 100, BUFFER_SEGMENTS 1: segments 0-5, 2-4 offloaded.
    await push(id, numbered(600), 0);
    // 1,500 items at priority 1: segments 0-14, 2-13 offloaded, drawn as one block.
    await push(id, numbered(1500, 10_000), 1);
    const { page } = await open(`/admin/#/queue/${id}`);
    await expect.poll(() => page.getByTestId('queue-count').textContent()).toBe('2,100');

    const p0 = page.locator('[data-testid=priority][data-priority="0"] [data-testid=segment]');
    await expect.poll(() => p0.count()).toBe(6);
    const blocks = await p0.evaluateAll((nodes) =>
      nodes.map((n) =>
        [
          n.getAttribute('data-kind'),
          n.getAttribute('data-state'),
          n.getAttribute('data-first'),
          n.getAttribute('data-last'),
          n.getAttribute('data-items'),
        ].join(' '),
      ),
    );
    expect(blocks).toEqual([
      'head state 0 0 100',
      'buffer state 1 1 100',
      'offloaded offloaded 2 2 100',
      'offloaded offloaded 3 3 100',
      'offloaded offloaded 4 4 100',
      'tail state 5 5 100',
    ]);

    const run = page.locator('[data-testid=priority][data-priority="1"] [data-testid=segment][data-state=offloaded]');
    await expect.poll(() => run.count()).toBe(1);
    expect(await run.textContent()).toBe('segments 2–13 offloaded (1,200 items)');
    expect(await run.getAttribute('data-first')).toBe('2');
    expect(await run.getAttribute('data-last')).toBe('13');
    const p1Kinds = await page
      .locator('[data-testid=priority][data-priority="1"] [data-testid=segment]')
      .evaluateAll((nodes) => nodes.map((n) => n.getAttribute('data-kind')));
    expect(p1Kinds).toEqual(['head', 'buffer', 'offloaded', 'tail']);

    // An offloaded segment lists its items from the offload store.
    await p0.nth(3).getByRole('button').click();
    await expect.poll(() => page.getByTestId('segment-items').textContent()).toContain(`offloaded_queue_0_seg_3_${id}`);
    await expect.poll(() => page.getByTestId('items').locator('li').first().textContent()).toContain('"n": 300');

    const info = await inspect(id);
    expect(info.priorities['0']).toMatchObject({ head_offloaded_segment: 2, tail_offloaded_segment: 4 });
  });

  it('refuses invalid JSON and non-objects in the push form without sending anything', async () => {
    const id = queueId('admin-invalid');
    await push(id, [{ keep: true }]);
    const { page, requests } = await open(`/admin/#/queue/${id}`);
    await expect.poll(() => page.getByTestId('queue-count').textContent()).toBe('1');
    const item = page.locator('textarea[name=item]');
    const pushButton = page.getByRole('button', { name: 'Push', exact: true });

    await item.fill('{"order": 1001,');
    await pushButton.click();
    await expect.poll(() => page.getByTestId('push-problem').textContent()).toMatch(/^Not valid JSON: /);
    expect(await item.getAttribute('aria-invalid')).toBe('true');

    await item.fill('[{"order": 1001}]');
    await pushButton.click();
    await expect.poll(() => page.getByTestId('push-problem').textContent()).toBe('An item must be a JSON object ({…}), not an array.');

    await item.fill('"just a string"');
    await pushButton.click();
    await expect.poll(() => page.getByTestId('push-problem').textContent()).toBe('An item must be a JSON object ({…}), not a string.');

    await item.fill('{"ok": true}');
    await page.locator('input[name=priority]').fill('256');
    await pushButton.click();
    await expect.poll(() => page.getByTestId('push-problem').textContent()).toBe('Priority must be a whole number from 0 to 255.');

    expect(requests.filter((r) => r.includes('/push'))).toEqual([]);
    expect((await inspect(id)).count).toBe(1);
    expect(await page.getByTestId('queue-count').textContent()).toBe('1');
  });

  it("shows the API's error message: a pop while locked, extending a lock acknowledged elsewhere", async () => {
    const id = queueId('admin-errors');
    await push(id, [{ job: 1 }, { job: 2 }]);
    const { page } = await open(`/admin/#/queue/${id}`);
    await expect.poll(() => page.getByTestId('queue-count').textContent()).toBe('2');
    await page.getByRole('button', { name: 'Pop with ack', exact: true }).click();
    const lockId = page.getByTestId('lock-id');
    await expect.poll(() => lockId.inputValue()).toMatch(/^[A-Za-z0-9_-]{11,}$/);

    await page.getByRole('button', { name: 'Pop', exact: true }).click();
    const popError = page.getByTestId('pop-form').getByTestId('api-error');
    await expect.poll(() => popError.getAttribute('data-error-code')).toBe('QUEUE_LOCKED');
    expect(await popError.textContent()).toContain('Queue is locked pending acknowledgement');

    // Another consumer acknowledges the lock; the console still holds its id.
    const acked = await fx.client.POST('/queue/{queue_id}/acknowledge', { params: { path: { queue_id: id } }, body: { lock_id: await lockId.inputValue() } });
    expect(acked.data?.items_acknowledged).toBe(1);

    await page.getByTestId('lock-card').getByRole('button', { name: 'Extend', exact: true }).click();
    const lockError = page.getByTestId('lock-card').getByTestId('api-error');
    await expect.poll(() => lockError.getAttribute('data-error-code')).toBe('LOCK_NOT_FOUND');
    expect(await lockError.textContent()).toContain('No active lock found');
    expect(await lockError.textContent()).toContain('HTTP 404');
    await expect.poll(() => page.getByTestId('lock-card').textContent()).toContain('The queue has no active lock');
  });

  it('deletes a queue after confirming in the page dialog', async () => {
    const id = queueId('admin-delete');
    await push(id, numbered(5));
    const { page } = await open(`/admin/#/queue/${id}`);
    await expect.poll(() => page.getByTestId('queue-count').textContent()).toBe('5');

    await page.getByRole('button', { name: 'Delete queue' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.waitFor();
    expect(await dialog.textContent()).toContain('This removes 5 items');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await expect.poll(() => dialog.isVisible()).toBe(false);
    expect((await inspect(id)).count).toBe(5);

    await page.getByRole('button', { name: 'Delete queue' }).click();
    await dialog.getByRole('button', { name: 'Delete queue' }).click();
    await expect.poll(() => page.getByTestId('result-message').textContent()).toBe(`Deleted queue ${id} with 5 items.`);
    await expect.poll(() => page.getByTestId('queue-missing').count()).toBe(1);
    await expect.poll(() => page.locator(`[data-testid=queue-row][data-queue-id="${id}"]`).count()).toBe(0);
  });

  it('overview: several queues, one offloaded, locks, service numbers', async () => {
    const queues: Record<string, [number, number][]> = {
      orders: [
        [0, 2350],
        [1, 420],
        [5, 35],
      ],
      'emails.outbound': [[0, 48]],
      'webhooks.retry': [[2, 7]],
      'reports.nightly': [[0, 3]],
      invoices: [[0, 250]],
      'payments.refunds': [[0, 12]],
      'search.reindex': [[9, 860]],
      thumbnails: [[0, 131]],
    };
    for (const id of Object.keys(queues)) await fx.client.DELETE('/queue/{queue_id}', { params: { path: { queue_id: id } } });
    fx.track(...Object.keys(queues));
    let serial = 1000;
    for (const [id, parts] of Object.entries(queues)) {
      for (const [priority, n] of parts) {
        const items = Array.from({ length: n }, () => {
          serial += 1;
          if (id === 'orders') return { order: serial, sku: `A-${serial % 97}`, qty: (serial % 4) + 1 };
          if (id === 'emails.outbound') return { template: 'receipt', to: `user${serial}@example.com` };
          return { id: serial };
        });
        await push(id, items, priority);
      }
    }
    // A lock held by some other consumer.
    const other = await fx.client.POST('/queue/{queue_id}/pop', {
      params: { path: { queue_id: 'emails.outbound' }, query: { depth: 10, require_ack: true, ttl_seconds: 300 } },
    });
    expect(other.data?.locked).toBe(true);

    const { page } = await open('/admin/#/queue/orders');
    await expect.poll(() => page.getByTestId('queue-count').textContent()).toBe('2,805');
    await page.locator('input[name=depth]').fill('5');
    await page.locator('input[name=ttl]').fill('300');
    await page.getByRole('button', { name: 'Pop with ack', exact: true }).click();
    await page.getByTestId('lock-countdown').waitFor();
    await expect.poll(() => page.getByTestId('health').getAttribute('data-health')).toBe('ok');
    // ops/s needs two scrapes of /metrics, five seconds apart.
    await expect.poll(() => page.locator('[data-metric=ops]').textContent(), { timeout: 15_000, interval: 500 }).toMatch(/^\d/);
    await expect.poll(() => page.locator('[data-testid=queue-row]').count()).toBeGreaterThanOrEqual(8);
    expect(await page.locator('[data-testid=segment][data-state=offloaded]').count()).toBeGreaterThan(0);
    // The clicks scrolled the panel: the picture shows it from the top.
    await page.locator('main').evaluate((main) => main.scrollTo(0, 0));
    await page.mouse.move(0, 799);

    const shot = await screenshot(page, 'overview');
    if (process.env.UPDATE_DOCS_SCREENSHOT) {
      const target = join(ROOT, 'docs', 'admin-console.png');
      copyFileSync(shot, target);
      expect(statSync(target).size).toBeLessThan(300 * 1024);
    }

    // On a shared database other tests' queues may fill the first page: find ours by prefix.
    await page.getByLabel('Filter queues by prefix').fill('emails.');
    const emails = page.locator('[data-testid=queue-row][data-queue-id="emails.outbound"]');
    await expect.poll(() => page.locator('[data-testid=queue-row]').count()).toBe(1);
    expect(await emails.getAttribute('data-locked')).toBe('true');
    expect(await emails.getAttribute('data-count')).toBe('38');
  });

  it('lists queues a page at a time, filtered by prefix', async () => {
    const prefix = `${uniqueQueueId('admin-page')}-`;
    const ids = Array.from({ length: 57 }, (_, i) => `${prefix}${String(i).padStart(2, '0')}`);
    fx.track(...ids);
    for (const id of ids) await push(id, [{ id }]);
    const { page } = await open();
    await page.getByLabel('Filter queues by prefix').fill(prefix);
    const list = page.getByTestId('queue-list');
    const rows = page.locator('[data-testid=queue-row]');
    await expect.poll(() => list.getAttribute('data-prefix')).toBe(prefix);
    expect(await rows.count()).toBe(50);
    expect(await rows.first().getAttribute('data-queue-id')).toBe(ids[0]);
    await page.getByRole('button', { name: 'Next ›' }).click();
    await expect.poll(() => list.getAttribute('data-page')).toBe('2');
    expect(await rows.count()).toBe(7);
    expect(await rows.first().getAttribute('data-queue-id')).toBe(ids[50]);
    expect(await page.getByRole('button', { name: 'Next ›' }).isDisabled()).toBe(true);
    await page.getByRole('button', { name: '‹ Prev' }).click();
    await expect.poll(() => list.getAttribute('data-page')).toBe('1');
    expect(await rows.count()).toBe(50);

    await rows.nth(3).click();
    await expect.poll(() => page.getByTestId('queue-panel').getAttribute('data-queue-id')).toBe(ids[3]);
    expect(decodeURIComponent(new URL(page.url()).hash)).toBe(`#/queue/${ids[3]}`);
  });

  it('header: items enqueued from SQL that wait to be carried, and the oldest one’s age', async () => {
    const carrier = fx.svc.app.get(EnqueueCarrier);
    const { page } = await open();
    await expect.poll(() => page.locator('[data-metric=enqueue-waiting]').textContent(), { timeout: 15_000 }).toBe('0');
    // No carrier runs: committed rows wait (the metric is the database's count, read at most every 10 s).
    await carrier.onModuleDestroy();
    const db = new pg.Client(fx.svc.app.get(DatabaseProvider).clientConfig('admin-test'));
    await db.connect();
    const q = uniqueQueueId('admin-sql');
    fx.track(q);
    try {
      await db.query('BEGIN');
      for (let n = 0; n < 3; n++) await db.query(`SELECT pushpop_enqueue($1, $2::jsonb)`, [q, JSON.stringify({ n })]);
      await db.query('COMMIT');
      await expect.poll(() => page.locator('[data-metric=enqueue-waiting]').textContent(), { timeout: 30_000, interval: 500 }).toMatch(/^3 · oldest \d+s$/);
    } finally {
      while ((await carrier.carry())?.taken);
      await db.end();
    }
  });
});
