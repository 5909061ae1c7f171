import { expect, it, describe } from 'vitest';
import { databaseKind } from '../support/service.js';
import { browserTestsEnabled, useConsole } from './browser-support.js';

/**
 * The admin console's redrive action (POST /queue/{id}/redrive) on a queue page, in headless
 * Chromium: a confirmation that names where the items go and how many, then the answer. Like
 * admin.test.ts, every test ends with a screenshot under test-results/browser/ and fails on a
 * console error of the page or a request that leaves the service.
 */

const suite = browserTestsEnabled ? describe : describe.skip;

suite(`admin console: redrive in Chromium (${databaseKind})`, () => {
  const fx = useConsole('redrive ');
  const { open, queueId } = fx;

  async function push(id: string, names: string[]): Promise<void> {
    const { error } = await fx.client.POST('/queue/{queue_id}/push/batch', {
      params: { path: { queue_id: id } },
      body: { items: names.map((name) => ({ item: { name } })) },
    });
    expect(error).toBeUndefined();
  }

  /** Items of `source` dead-lettered to `dlq`: pushed, popped under a lock, released past `max_deliveries: 1`. */
  async function deadLetter(source: string, dlq: string, names: string[]): Promise<void> {
    const put = await fx.client.PUT('/queue/{queue_id}/settings', {
      params: { path: { queue_id: source } },
      body: { max_deliveries: 1, dead_letter_queue: dlq },
    });
    expect(put.error).toBeUndefined();
    await push(source, names);
    const popped = await fx.client.POST('/queue/{queue_id}/pop', {
      params: { path: { queue_id: source }, query: { depth: 100, require_ack: true } },
    });
    const released = await fx.client.POST('/queue/{queue_id}/release', {
      params: { path: { queue_id: source } },
      body: { lock_id: popped.data?.lock_id ?? '' },
    });
    expect(released.data?.items_dead_lettered).toBe(names.length);
  }

  async function names(id: string): Promise<string[]> {
    const { data } = await fx.client.POST('/queue/{queue_id}/pop', { params: { path: { queue_id: id }, query: { depth: 100 } } });
    return (data?.items ?? []).map((i) => String((i as { name?: unknown }).name));
  }

  it('sends dead letters back where they came from after a confirmation naming where and how many', async () => {
    const source = queueId('admin-redrive-src');
    const dlq = queueId('admin-redrive-dlq');
    await deadLetter(source, dlq, ['a', 'b', 'c']);
    await push(dlq, ['plain']);
    const { page, requests } = await open(`/admin/#/queue/${dlq}`);
    await expect.poll(() => page.getByTestId('queue-count').textContent()).toBe('4');

    await page.getByTestId('redrive-open').click();
    const dialog = page.getByRole('dialog', { name: `Redrive queue ${dlq}?` });
    await expect.poll(() => dialog.isVisible()).toBe(true);
    expect(await dialog.getByTestId('redrive-confirm-text').textContent()).toContain(
      'moves up to 4 of 4 waiting items back to the queues they were dead-lettered from',
    );
    // Cancel sends nothing.
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await expect.poll(() => dialog.isVisible()).toBe(false);
    expect(requests.filter((r) => r.startsWith('POST ') && r.includes('/redrive'))).toEqual([]);

    await page.getByTestId('redrive-open').click();
    await dialog.getByRole('button', { name: 'Redrive', exact: true }).click();
    await expect
      .poll(() => page.getByTestId('result-message').textContent())
      .toBe(`Redrove 3 items of ${dlq} to the queues they were dead-lettered from; 1 item left.`);
    await expect.poll(() => page.getByTestId('queue-count').textContent()).toBe('1');
    expect(await names(source)).toEqual(['a', 'b', 'c']);
    expect(await names(dlq)).toEqual(['plain']);
  });

  it('moves at most the number given to the destination typed, and refuses the queue itself before sending', async () => {
    const id = queueId('admin-redrive-to-src');
    const target = queueId('admin-redrive-to');
    await push(id, ['x1', 'x2', 'x3']);
    const { page, requests } = await open(`/admin/#/queue/${id}`);
    await expect.poll(() => page.getByTestId('queue-count').textContent()).toBe('3');
    const form = page.getByTestId('redrive-form');

    await form.locator('input[name=destination]').fill(id);
    await page.getByTestId('redrive-open').click();
    await expect.poll(() => form.getByTestId('redrive-problem').textContent()).toBe('The destination must be another queue.');

    await form.locator('input[name=destination]').fill(target);
    await form.locator('input[name=max_items]').fill('2');
    await page.getByTestId('redrive-open').click();
    const dialog = page.getByRole('dialog', { name: `Redrive queue ${id}?` });
    expect(await dialog.getByTestId('redrive-confirm-text').textContent()).toContain(`moves up to 2 of 3 waiting items to the tail of queue ${target}`);
    await dialog.getByRole('button', { name: 'Redrive', exact: true }).click();
    await expect.poll(() => page.getByTestId('result-message').textContent()).toBe(`Redrove 2 items of ${id} to ${target}; 1 item left.`);
    fx.track(target);
    expect(requests.filter((r) => r.startsWith(`POST /queue/${id}/redrive`))).toHaveLength(1);
    expect(await names(target)).toEqual(['x1', 'x2']);
    expect(await names(id)).toEqual(['x3']);
  });
});
