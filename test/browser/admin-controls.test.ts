import type { QueueSettingsRequest } from '@pushpop/api-client';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { databaseKind } from '../support/service.js';
import { browserTestsEnabled, useConsole } from './browser-support.js';

/**
 * The admin console's production controls in headless Chromium: the pause/resume switch on a
 * queue and in the list (paused queues marked), and the retry and limit settings in the settings
 * form. Like admin-settings.test.ts, every test ends with a screenshot under test-results/browser/
 * and fails on a console error of the page or a request that leaves the service.
 */

const suite = browserTestsEnabled ? describe : describe.skip;

suite(`admin console: pause, retry delays and delivery limits in Chromium (${databaseKind})`, () => {
  const fx = useConsole('controls ');
  const { open, queueId } = fx;

  async function push(id: string, n: number): Promise<void> {
    const items = Array.from({ length: n }, (_, i) => ({ item: { n: i } }));
    const { error } = await fx.client.POST('/queue/{queue_id}/push/batch', { params: { path: { queue_id: id } }, body: { items } });
    expect(error).toBeUndefined();
  }

  async function put(id: string, body: QueueSettingsRequest): Promise<void> {
    const { error } = await fx.client.PUT('/queue/{queue_id}/settings', { params: { path: { queue_id: id } }, body });
    expect(error).toBeUndefined();
  }

  async function settingsOf(id: string) {
    const { data, error } = await fx.client.GET('/queue/{queue_id}/settings', { params: { path: { queue_id: id } } });
    if (error || !data) throw new Error(`GET /queue/${id}/settings: ${JSON.stringify(error)}`);
    return data;
  }

  function shown(page: Page): Promise<Record<string, string>> {
    return page
      .locator('[data-testid=settings-values] [data-setting]')
      .evaluateAll((nodes) => Object.fromEntries(nodes.map((n) => [n.getAttribute('data-setting') ?? '', n.querySelector('dd')?.textContent ?? ''])));
  }

  const form = (page: Page) => page.getByTestId('settings-form');
  const listRow = (page: Page, id: string) => page.locator(`[data-testid=queue-row][data-queue-id="${id}"]`);

  it('the switch on a queue pauses and resumes it; a pop while paused says so; the list marks it', async () => {
    const id = queueId('admin-pause');
    await push(id, 2);
    const { page, requests } = await open(`/admin/#/queue/${id}`);
    const toggle = page.getByTestId('pause-switch');
    await expect.poll(() => toggle.getAttribute('aria-checked')).toBe('false');
    await toggle.click();
    await expect.poll(() => page.getByTestId('result-message').textContent()).toBe(`Paused ${id}: pops hand out nothing until it is resumed.`);
    await expect.poll(() => toggle.getAttribute('aria-checked')).toBe('true');
    expect(await settingsOf(id)).toMatchObject({ paused: true });
    expect(requests.filter((r) => r.startsWith(`PUT /queue/${id}/settings`))).toHaveLength(1);
    await expect.poll(() => page.getByTestId('queue-paused').count()).toBe(1);
    await expect.poll(() => shown(page)).toMatchObject({ paused: 'yes · pops hand out nothing' });
    // The list marks the queue as paused.
    await expect.poll(() => listRow(page, id).getAttribute('data-paused')).toBe('true');
    expect(await listRow(page, id).getByTestId('paused-mark').textContent()).toBe('paused');

    await toggle.click();
    await expect.poll(() => page.getByTestId('result-message').textContent()).toBe(`Resumed ${id}: pops hand out items again.`);
    await expect.poll(() => toggle.getAttribute('aria-checked')).toBe('false');
    await expect.poll(() => listRow(page, id).getAttribute('data-paused')).toBe('false');
    expect(await settingsOf(id)).toMatchObject({ paused: false });
  });

  it('the switch in the list pauses a queue without opening it', async () => {
    const id = queueId('admin-list-pause');
    await push(id, 1);
    const { page } = await open('/admin/');
    const row = page.locator('li', { has: listRow(page, id) });
    await expect.poll(() => row.getByTestId('list-pause-switch').count()).toBe(1);
    await row.getByTestId('list-pause-switch').click();
    await expect.poll(() => listRow(page, id).getAttribute('data-paused')).toBe('true');
    expect(await settingsOf(id)).toMatchObject({ paused: true });
    await row.getByTestId('list-pause-switch').click();
    await expect.poll(() => listRow(page, id).getAttribute('data-paused')).toBe('false');
  });

  it('shows the retry and limit settings and changes them through the form; the delay above its maximum is refused before sending', async () => {
    const id = queueId('admin-controls');
    await push(id, 1);
    await put(id, { lock_mode: 'shared' });
    const { page, requests } = await open(`/admin/#/queue/${id}`);
    await expect
      .poll(() => shown(page))
      .toMatchObject({ retry_delay: 'none: given back at once · after an expiry or release', max_pops_per_second: 'no limit' });

    await page.getByTestId('settings-edit').click();
    await form(page).locator('input[name=retry_delay_seconds]').fill('61');
    await form(page).locator('input[name=retry_delay_max_seconds]').fill('60');
    await form(page).getByRole('button', { name: 'Save settings' }).click();
    await expect
      .poll(() => form(page).getByTestId('settings-problem').textContent())
      .toBe('retry_delay_seconds must not be greater than retry_delay_max_seconds.');
    expect(requests.filter((r) => r.startsWith('PUT '))).toHaveLength(0);

    await form(page).locator('input[name=retry_delay_seconds]').fill('5');
    await form(page).locator('select[name=retry_backoff]').selectOption('fixed');
    await form(page).locator('input[name=max_in_flight]').fill('10');
    await form(page).locator('input[name=max_pops_per_second]').fill('2.5');
    await form(page).getByRole('button', { name: 'Save settings' }).click();
    await expect
      .poll(() => shown(page))
      .toMatchObject({
        retry_delay: '5 s, fixed · after an expiry or release',
        max_in_flight: '10 · items held by locks',
        max_pops_per_second: '2.5',
      });
    expect(await settingsOf(id)).toMatchObject({
      retry_delay_seconds: 5,
      retry_backoff: 'fixed',
      retry_delay_max_seconds: 60,
      max_in_flight: 10,
      max_pops_per_second: 2.5,
    });

    // Blank limits are no limit.
    await page.getByTestId('settings-edit').click();
    await form(page).locator('input[name=max_in_flight]').fill('');
    await form(page).locator('input[name=max_pops_per_second]').fill('');
    await form(page).getByRole('button', { name: 'Save settings' }).click();
    await expect.poll(() => shown(page)).toMatchObject({ max_in_flight: 'no limit · items held by locks', max_pops_per_second: 'no limit' });
    expect(await settingsOf(id)).toMatchObject({ max_in_flight: null, max_pops_per_second: null });
  });

  it('a release from the lock card may wait a delay of its own; the answer says how many items wait', async () => {
    const id = queueId('admin-release-delay');
    await push(id, 2);
    const { data } = await fx.client.POST('/queue/{queue_id}/pop', { params: { path: { queue_id: id }, query: { require_ack: true, ttl_seconds: 120 } } });
    const lockId = data?.lock_id ?? '';
    expect(lockId).not.toBe('');
    const { page } = await open(`/admin/#/queue/${id}`);
    await page.getByTestId('lock-id').fill(lockId);
    await page.locator('input[name=release-delay]').fill('30');
    await page.getByTestId('lock-card').getByRole('button', { name: 'Release', exact: true }).click();
    await expect.poll(() => page.getByTestId('result-message').textContent()).toBe('Released: 1 item back after the retry delay, in push order.');
    const info = await fx.client.GET('/queue/{queue_id}', { params: { path: { queue_id: id } } });
    expect(info.data).toMatchObject({ count: 1, delayed: 1 });
  });
});
