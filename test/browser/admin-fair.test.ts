import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { databaseKind } from '../support/service.js';
import { browserTestsEnabled, useConsole } from './browser-support.js';

/**
 * The console and fair pops in headless Chromium: the queue list marks the queues in the ready
 * set (items to hand out, not paused), and the fair-pop button beside the list's prefix filter
 * pops the queues under it in turn, naming each.
 */

const suite = browserTestsEnabled ? describe : describe.skip;

suite(`admin console: the ready set and fair pops in Chromium (${databaseKind})`, () => {
  const fx = useConsole('fair ');
  const { open, queueId } = fx;

  async function push(id: string, n: number): Promise<void> {
    const items = Array.from({ length: n }, (_, i) => ({ item: { n: i } }));
    const { error } = await fx.client.POST('/queue/{queue_id}/push/batch', { params: { path: { queue_id: id } }, body: { items } });
    expect(error).toBeUndefined();
  }

  const ready = (page: Page, id: string) => page.locator(`[data-testid=queue-row][data-queue-id="${id}"]`).getAttribute('data-ready');

  it('the list marks ready queues; the fair pop takes from them in turn under the filter, then finds nothing', async () => {
    const prefix = `${queueId('fair')}-`;
    const [a, b, empty, paused] = ['a', 'b', 'c', 'd'].map((s) => prefix + s);
    await push(a, 2);
    await push(b, 1);
    await push(paused, 1);
    for (const [id, body] of [
      [empty, {}],
      [paused, { paused: true }],
    ] as const) {
      const { error } = await fx.client.PUT('/queue/{queue_id}/settings', { params: { path: { queue_id: id } }, body });
      expect(error).toBeUndefined();
    }
    const { page } = await open('/admin/');
    // Without a prefix there is no fair pop.
    expect(await page.getByTestId('fair-pop-form').count()).toBe(0);
    await page.getByLabel('Filter queues by prefix').fill(prefix);
    await expect.poll(() => Promise.all([a, b, empty, paused].map((id) => ready(page, id)))).toEqual(['true', 'true', 'false', 'false']);

    const form = page.getByTestId('fair-pop-form');
    const result = page.getByTestId('fair-pop-result');
    // In queue id order from the first, a new prefix's round: a, b (now empty), a again.
    for (const expected of [a, b, a]) {
      await form.getByRole('button', { name: 'Fair pop' }).click();
      await expect.poll(() => result.getAttribute('data-queue-id')).toBe(expected);
      expect(await result.textContent()).toMatch(new RegExp(`^1 item from ${expected}: \\[\\{"n":\\d\\}\\]$`));
    }
    await form.getByRole('button', { name: 'Fair pop' }).click();
    await expect.poll(() => result.textContent()).toBe(`Nothing to hand out under “${prefix}”.`);
    await expect.poll(() => Promise.all([a, b].map((id) => ready(page, id)))).toEqual(['false', 'false']);
  });
});
