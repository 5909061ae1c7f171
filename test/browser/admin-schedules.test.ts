import { copyFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { previewFirings } from '../../apps/admin/src/schedules.js';
import { ScheduleRule } from '../../src/schedules/schedule-rule.js';
import { uniqueQueueId, databaseKind } from '../support/service.js';
import { browserTestsEnabled, ROOT, screenshot, useConsole } from './browser-support.js';

/**
 * The console's schedules page in headless Chromium (`/admin/#/schedules`): a new schedule's
 * next five firings shown before it is saved (computed in the browser, the same as the
 * service computes them), saving, the list with next and last run, pause and resume, edit,
 * delete. `UPDATE_DOCS_SCREENSHOT=1` also writes docs/admin-schedules.png for the README.
 */

const suite = browserTestsEnabled ? describe : describe.skip;

suite(`admin console: schedules in Chromium (${databaseKind})`, () => {
  const fx = useConsole('schedules ');
  const { open } = fx;

  async function scheduleOf(id: string) {
    const { data, error, response } = await fx.client.GET('/schedules/{schedule_id}', { params: { path: { schedule_id: id } } });
    if (response.status === 404) return undefined;
    if (error || !data) throw new Error(`GET /schedules/${id}: ${JSON.stringify(error)}`);
    return data;
  }
  const row = (page: Page, id: string) => page.locator(`[data-testid=schedule-row][data-schedule-id="${id}"]`);
  const previewTimes = (page: Page) => page.getByTestId('preview-time').evaluateAll((nodes) => nodes.map((n) => Number(n.getAttribute('data-time'))));

  it('create with the next five firings shown before saving, then pause, resume, edit and delete', async () => {
    const id = uniqueQueueId('admin-schedule');
    const queue = uniqueQueueId('admin-schedule-q');
    // One that exists already, listed with its next and last run.
    const nightly = uniqueQueueId('nightly-export');
    const made = await fx.client.PUT('/schedules/{schedule_id}', {
      params: { path: { schedule_id: nightly } },
      body: { queue_id: 'exports', cron: '0 3 * * *', timezone: 'UTC', item: { export: 'all' } },
    });
    expect(made.error).toBeUndefined();
    const { page, requests } = await open('/admin/#/schedules');
    await expect.poll(() => row(page, nightly).count()).toBe(1);
    await expect.poll(() => page.getByTestId('schedules-page').count()).toBe(1);
    await page.getByTestId('new-schedule').click();
    const form = page.getByTestId('schedule-form');
    await form.locator('input[name=schedule_id]').fill(id);
    await form.locator('input[name=queue_id]').fill(queue);
    await form.locator('input[name=timezone]').fill('Europe/Berlin');

    // A bad expression: said at once, nothing sent.
    await form.locator('input[name=cron]').fill('*/15 * * *');
    await expect.poll(() => page.getByTestId('preview-problem').textContent()).toContain('5 fields');
    await form.locator('input[name=cron]').fill('30 2 * * 0');
    await expect.poll(async () => (await previewTimes(page)).length).toBe(5);
    const shown = await previewTimes(page);
    // The same five times the service's rule gives (croner in both), a week apart but for daylight-saving changes.
    expect(shown).toEqual(ScheduleRule.of('30 2 * * 0', 'Europe/Berlin').nextRuns(5, shown[0] - 1));
    expect(shown).toEqual((previewFirings('30 2 * * 0', 'Europe/Berlin', shown[0] - 1) as { times: number[] }).times);
    const labels = await page.getByTestId('preview-time').allTextContents();
    expect(labels[0]).toMatch(/Sun.*0?2:30:00/);
    expect(requests.filter((r) => r.startsWith('PUT /schedules'))).toEqual([]);

    await form.locator('textarea[name=item]').fill('{"report": "weekly"}');
    if (process.env.UPDATE_DOCS_SCREENSHOT) {
      const shot = await screenshot(page, 'schedules form');
      copyFileSync(shot, join(ROOT, 'docs', 'admin-schedules.png'));
      expect(statSync(join(ROOT, 'docs', 'admin-schedules.png')).size).toBeLessThan(300 * 1024);
    }
    await page.getByTestId('save-schedule').click();
    await expect.poll(() => row(page, id).count()).toBe(1);
    const saved = await scheduleOf(id);
    expect(saved).toMatchObject({
      queue_id: queue,
      cron: '30 2 * * 0',
      timezone: 'Europe/Berlin',
      item: { report: 'weekly' },
      paused: false,
      last_run_at: null,
    });
    expect(saved!.next_run_at! * 1000, 'the first firing shown is the one the service waits for').toBe(shown[0]);
    expect(await row(page, id).getByTestId('last-run').textContent()).toBe('never');
    await expect.poll(() => page.getByTestId('schedule-form').count()).toBe(0); // the form closes

    await row(page, id).getByTestId('pause-schedule').click();
    await expect.poll(() => row(page, id).getAttribute('data-paused')).toBe('true');
    expect(await scheduleOf(id)).toMatchObject({ paused: true, next_run_at: null });
    expect(await row(page, id).getByTestId('next-run').textContent()).toBe('paused');
    await row(page, id).getByTestId('pause-schedule').click();
    await expect.poll(() => row(page, id).getAttribute('data-paused')).toBe('false');
    expect((await scheduleOf(id))?.next_run_at).toBe(saved!.next_run_at);

    await row(page, id).getByTestId('edit-schedule').click();
    await expect.poll(() => page.getByTestId('schedule-form').locator('input[name=cron]').inputValue()).toBe('30 2 * * 0');
    await page.getByTestId('schedule-form').locator('input[name=cron]').fill('0 9 * * 1-5');
    await page.getByTestId('save-schedule').click();
    await expect.poll(async () => (await scheduleOf(id))?.cron).toBe('0 9 * * 1-5');

    await row(page, id).getByTestId('delete-schedule').click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
    await expect.poll(() => row(page, id).count()).toBe(0);
    expect(await scheduleOf(id)).toBeUndefined();
    await fx.client.DELETE('/schedules/{schedule_id}', { params: { path: { schedule_id: nightly } } });
  });

  it('the header links to the page', async () => {
    const { page } = await open('/admin/');
    await page.getByTestId('schedules-link').click();
    await expect.poll(() => page.getByTestId('schedules-page').count()).toBe(1);
    expect(page.url()).toMatch(/#\/schedules$/);
  });
});
