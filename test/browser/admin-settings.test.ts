import type { QueueSettingsRequest } from '@pushpop/api-client';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { databaseKind } from '../support/service.js';
import { browserTestsEnabled, useConsole } from './browser-support.js';

/**
 * The admin console's settings card (PUT /queue/{id}/settings), a shared queue's locks and the
 * link to a dead-letter queue, in headless Chromium. Like admin.test.ts, every test ends with a
 * screenshot under test-results/browser/ and fails on a console error of the page or a request
 * that leaves the service.
 */

const suite = browserTestsEnabled ? describe : describe.skip;

suite(`admin console: settings, shared locks, dead letters in Chromium (${databaseKind})`, () => {
  const fx = useConsole('settings ');
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

  async function popWithAck(id: string, depth: number, ttl: number): Promise<string> {
    const { data, error } = await fx.client.POST('/queue/{queue_id}/pop', {
      params: { path: { queue_id: id }, query: { depth, require_ack: true, ttl_seconds: ttl } },
    });
    expect(error).toBeUndefined();
    expect(data?.lock_id).toBeTruthy();
    return data?.lock_id ?? '';
  }

  /** What the settings card shows, field by field. */
  function shown(page: Page): Promise<Record<string, string>> {
    return page
      .locator('[data-testid=settings-values] [data-setting]')
      .evaluateAll((nodes) => Object.fromEntries(nodes.map((n) => [n.getAttribute('data-setting') ?? '', n.querySelector('dd')?.textContent ?? ''])));
  }

  const form = (page: Page) => page.getByTestId('settings-form');

  it('shows all the settings and changes them through the form', async () => {
    const id = queueId('admin-settings');
    const dead = queueId('admin-settings-dead');
    await push(id, 3);
    const before = await settingsOf(id);
    const { page, requests } = await open(`/admin/#/queue/${id}`);
    await expect
      .poll(() => shown(page))
      .toEqual({
        segment_size: `${before.segment_size} · items per segment`,
        buffer_segments: `${before.buffer_segments} · kept out of the offload store`,
        lock_mode: 'exclusive · one lock at a time',
        max_deliveries: 'no limit',
        dead_letter_queue: 'none',
        paused: 'no',
        retry_delay: 'none: given back at once · after an expiry or release',
        max_in_flight: 'no limit · items held by locks',
        max_pops_per_second: 'no limit',
      });

    await page.getByTestId('settings-edit').click();
    expect(await form(page).locator('input[name=segment_size]').inputValue()).toBe(String(before.segment_size));
    expect(await form(page).locator('select[name=lock_mode]').inputValue()).toBe('exclusive');
    await form(page).locator('select[name=lock_mode]').selectOption('shared');
    await form(page).locator('input[name=max_deliveries]').fill('4');
    await form(page).locator('input[name=dead_letter_queue]').fill(dead);
    await form(page).getByRole('button', { name: 'Save settings' }).click();

    await expect
      .poll(() => page.getByTestId('result-message').textContent())
      .toBe(
        `Settings of ${id} saved: segment_size ${before.segment_size}, buffer_segments ${before.buffer_segments}, lock_mode shared, max_deliveries 4, dead_letter_queue ${dead}, ` +
          'paused false, retry_delay_seconds 0, retry_backoff exponential, retry_delay_max_seconds 900, max_in_flight none, max_pops_per_second none.',
      );
    expect(await form(page).count()).toBe(0);
    await expect.poll(() => shown(page)).toMatchObject({ lock_mode: 'shared · a lock per pop with ack', max_deliveries: '4', dead_letter_queue: dead });
    expect(await settingsOf(id)).toEqual({ ...before, lock_mode: 'shared', max_deliveries: 4, dead_letter_queue: dead });
    expect(requests.filter((r) => r.startsWith(`PUT /queue/${id}/settings`))).toHaveLength(1);
    await expect.poll(() => page.getByTestId('lock-card').getAttribute('data-lock-mode')).toBe('shared');

    // Blank fields clear the limit and the dead-letter queue.
    await page.getByTestId('settings-edit').click();
    await form(page).locator('input[name=max_deliveries]').fill('');
    await form(page).locator('input[name=dead_letter_queue]').fill('');
    await form(page).getByRole('button', { name: 'Save settings' }).click();
    await expect.poll(() => shown(page)).toMatchObject({ max_deliveries: 'no limit', dead_letter_queue: 'none' });
    expect(await settingsOf(id)).toMatchObject({ max_deliveries: null, dead_letter_queue: null });
  });

  it('shows a refusal of the service under the form and keeps what was typed', async () => {
    const id = queueId('admin-settings-409');
    await push(id, 2);
    const before = await settingsOf(id);
    const { page, requests } = await open(`/admin/#/queue/${id}`);
    await page.getByTestId('settings-edit').click();

    // 409 QUEUE_NOT_EMPTY: the segment layout of a queue holding items.
    const size = form(page).locator('input[name=segment_size]');
    await size.fill('7');
    await form(page).getByRole('button', { name: 'Save settings' }).click();
    const error = form(page).getByTestId('api-error');
    await expect.poll(() => error.getAttribute('data-error-code')).toBe('QUEUE_NOT_EMPTY');
    expect(await error.textContent()).toContain('HTTP 409');
    expect(await size.inputValue()).toBe('7');
    // The panel polls every 2 s; the form outlives the polls.
    await expect.poll(() => requests.filter((r) => r === `GET /queue/${id}`).length, { timeout: 6000 }).toBeGreaterThanOrEqual(3);
    expect(await size.inputValue()).toBe('7');
    expect(await error.count()).toBe(1);

    // 409 QUEUE_LOCKED: the lock mode while a lock lives.
    await popWithAck(id, 1, 120);
    await size.fill(String(before.segment_size));
    await form(page).locator('select[name=lock_mode]').selectOption('shared');
    await form(page).getByRole('button', { name: 'Save settings' }).click();
    await expect.poll(() => error.getAttribute('data-error-code')).toBe('QUEUE_LOCKED');
    expect(await error.textContent()).toContain('HTTP 409');
    expect(await form(page).locator('select[name=lock_mode]').inputValue()).toBe('shared');

    // 400: max_deliveries without a dead-letter queue; the service's own message.
    await form(page).locator('select[name=lock_mode]').selectOption('exclusive');
    await form(page).locator('input[name=max_deliveries]').fill('3');
    await form(page).getByRole('button', { name: 'Save settings' }).click();
    await expect.poll(() => error.getAttribute('data-error-code')).toBe('VALIDATION_FAILED');
    expect(await error.textContent()).toContain('max_deliveries needs dead_letter_queue');

    // A number out of range is refused before anything is sent.
    const puts = requests.filter((r) => r.startsWith('PUT ')).length;
    await form(page).locator('input[name=max_deliveries]').fill('0');
    await form(page).getByRole('button', { name: 'Save settings' }).click();
    await expect.poll(() => form(page).getByTestId('settings-problem').textContent()).toContain('max_deliveries must be a whole number from 1 to 1000');
    expect(requests.filter((r) => r.startsWith('PUT ')).length).toBe(puts);

    await form(page).getByRole('button', { name: 'Cancel' }).click();
    expect(await form(page).count()).toBe(0);
    expect(await settingsOf(id)).toEqual(before);
  });

  it('a shared queue: its locks counted, the items they hold and the next expiry; pops go on', async () => {
    const id = queueId('admin-shared');
    await put(id, { lock_mode: 'shared' });
    await push(id, 6);
    await popWithAck(id, 2, 300);
    await popWithAck(id, 1, 60);
    const { page } = await open(`/admin/#/queue/${id}`);

    const card = page.getByTestId('lock-card');
    await expect.poll(() => card.getAttribute('data-lock-mode')).toBe('shared');
    await expect.poll(() => page.getByTestId('shared-lock-count').textContent()).toBe('2');
    expect(await page.getByTestId('shared-lock-items').textContent()).toBe('3');
    expect(await page.getByTestId('lock-items').textContent()).toBe('3 items held');
    expect(await page.getByTestId('queue-held').textContent()).toBe('3');
    expect(await page.getByTestId('queue-count').textContent()).toBe('3');
    const next = page.getByTestId('shared-lock-next');
    const first = await next.textContent();
    // The 60 s lock expires first.
    expect(first).toMatch(/^next expiry in (\d+\.\d s|\d+:\d\d\.\d)$/);
    const seconds = Number(/in (\d+\.\d) s$/.exec(first ?? '')?.[1]);
    expect(seconds).toBeGreaterThan(40);
    expect(seconds).toBeLessThanOrEqual(60);
    await expect.poll(() => next.textContent(), { timeout: 2000 }).not.toBe(first);
    await expect.poll(() => page.locator(`[data-testid=queue-row][data-queue-id="${id}"]`).getAttribute('data-locked')).toBe('true');

    // The console's own pop with ack takes a third lock; a plain pop is not refused.
    await page.locator('input[name=depth]').fill('1');
    await page.getByRole('button', { name: 'Pop with ack', exact: true }).click();
    await expect.poll(() => page.getByTestId('result-message').textContent()).toBe('Popped 1 item, held under a lock until acknowledged.');
    expect(await page.getByTestId('result-deliveries').textContent()).toBe('1');
    await expect.poll(() => page.getByTestId('shared-lock-count').textContent()).toBe('3');
    await page.getByRole('button', { name: 'Pop', exact: true }).click();
    await expect.poll(() => page.getByTestId('result-message').textContent()).toBe('Popped 1 item.');

    // Release gives its item back in push order, ahead of the one item never delivered.
    await card.getByRole('button', { name: 'Release', exact: true }).click();
    await expect.poll(() => page.getByTestId('result-message').textContent()).toBe('Released: 1 item back in the queue, in push order.');
    await expect.poll(() => page.getByTestId('shared-lock-count').textContent()).toBe('2');
    await expect.poll(() => page.getByTestId('queue-count').textContent()).toBe('2');
  });

  it('links a queue to its dead-letter queue: a released item over max_deliveries is there', async () => {
    const id = queueId('admin-dlq');
    const dead = queueId('admin-dlq-dead');
    await put(id, { lock_mode: 'shared', max_deliveries: 1, dead_letter_queue: dead });
    await push(id, 2);
    const { page } = await open(`/admin/#/queue/${id}`);
    await expect.poll(() => page.getByTestId('queue-count').textContent()).toBe('2');

    await page.locator('input[name=depth]').fill('1');
    await page.getByRole('button', { name: 'Pop with ack', exact: true }).click();
    await expect.poll(() => page.getByTestId('result-deliveries').textContent()).toBe('1');
    await page.getByTestId('lock-card').getByRole('button', { name: 'Release', exact: true }).click();
    await expect
      .poll(() => page.getByTestId('result-message').textContent())
      .toBe('Released: 1 item reached max_deliveries and went to the dead-letter queue.');
    await expect.poll(() => page.getByTestId('queue-count').textContent()).toBe('1');

    const link = page.getByTestId('dlq-link');
    expect(await link.textContent()).toBe(dead);
    await link.click();
    await expect.poll(() => page.getByTestId('queue-panel').getAttribute('data-queue-id')).toBe(dead);
    expect(decodeURIComponent(new URL(page.url()).hash)).toBe(`#/queue/${dead}`);
    await expect.poll(() => page.getByTestId('queue-count').textContent()).toBe('1');
    await expect.poll(() => page.getByTestId('items').textContent()).toContain('"n": 0');
    await expect.poll(() => shown(page)).toMatchObject({ lock_mode: 'exclusive · one lock at a time', dead_letter_queue: 'none' });

    // Back in history: the queue itself again.
    await page.goBack();
    await expect.poll(() => page.getByTestId('queue-panel').getAttribute('data-queue-id')).toBe(id);
  });

  it('a queue that does not exist yet: saving settings creates it', async () => {
    const id = queueId('admin-settings-new');
    const { page } = await open(`/admin/#/queue/${id}`);
    await page.getByTestId('queue-missing').waitFor();
    expect(await page.getByTestId('settings').textContent()).toContain('saving settings creates it');
    await page.getByTestId('settings-edit').click();
    expect(await form(page).locator('input[name=segment_size]').inputValue()).toBe('');
    await form(page).locator('input[name=segment_size]').fill('20');
    await form(page).locator('select[name=lock_mode]').selectOption('shared');
    await form(page).getByRole('button', { name: 'Save settings' }).click();
    await expect.poll(() => shown(page)).toMatchObject({ segment_size: '20 · items per segment', lock_mode: 'shared · a lock per pop with ack' });
    expect(await page.getByTestId('queue-missing').count()).toBe(0);
    expect(await settingsOf(id)).toMatchObject({ segment_size: 20, lock_mode: 'shared' });
  });
});
