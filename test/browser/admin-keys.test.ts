import { createPushpopClient, type PushpopClient } from '@pushpop/api-client';
import type { Browser, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { databaseKind, removeDataDir, startService, type TestService, uniqueQueueId } from '../support/service.js';
import { browserTestsEnabled, ensureAdminBuilt, launchChromium, openConsole, requireChromium, screenshot, type ConsolePage } from './browser-support.js';

/**
 * The admin console against a service with API keys (README "Security"): it asks for a key
 * when the API answers 401, keeps it in the tab's sessionStorage only, shows its name and
 * scopes, and disables what the key may not do. Like admin.test.ts, every test fails on a
 * console error of the page or a request that leaves the service.
 */

const KEYS = {
  ops: { key: 'ops-key-0123456789abcdef', scopes: ['admin'] },
  viewer: { key: 'viewer-key-0123456789abc', scopes: ['read'] },
  feeder: { key: 'feeder-key-0123456789abc', scopes: ['produce'] },
};
const API_KEYS = Object.entries(KEYS)
  .map(([name, { key, scopes }]) => `${name}:${key}:${scopes.join('+')}`)
  .join(',');
const STORAGE_NAME = 'pushpop.admin.apiKey';

const suite = browserTestsEnabled ? describe : describe.skip;

suite(`admin console with API keys in Chromium (${databaseKind})`, () => {
  let svc: TestService;
  let admin: PushpopClient;
  let browser: Browser;
  let current: ConsolePage | undefined;
  let created: string[] = [];

  beforeAll(async () => {
    requireChromium();
    ensureAdminBuilt();
    svc = await startService({ env: { API_KEYS } });
    admin = createPushpopClient(svc.url, { apiKey: KEYS.ops.key });
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  afterEach(async (context) => {
    const open = current;
    current = undefined;
    for (const id of created) await admin.DELETE('/queue/{queue_id}', { params: { path: { queue_id: id } } });
    created = [];
    if (!open) return;
    await screenshot(open.page, `keys ${context.task.name}`);
    await open.context.close();
    expect(open.errors, 'console errors or uncaught exceptions in the page').toEqual([]);
    expect(open.external, 'requests that left the service').toEqual([]);
    // The key never travels in a URL.
    for (const { key } of Object.values(KEYS)) expect(open.requests.filter((r) => r.includes(key))).toEqual([]);
  });

  async function open(path = '/admin/'): Promise<ConsolePage> {
    current = await openConsole(browser, svc.url, path);
    return current;
  }

  async function queueWith(label: string, n: number): Promise<string> {
    const id = uniqueQueueId(label);
    created.push(id);
    const items = Array.from({ length: n }, (_, i) => ({ item: { n: i } }));
    const { error } = await admin.POST('/queue/{queue_id}/push/batch', { params: { path: { queue_id: id } }, body: { items } });
    expect(error).toBeUndefined();
    return id;
  }

  async function enterKey(page: Page, key: string): Promise<void> {
    const prompt = page.getByTestId('key-prompt');
    await prompt.locator('input[name=api-key]').fill(key);
    await prompt.getByRole('button', { name: 'Use key' }).click();
  }

  const stored = (page: Page) => page.evaluate((name) => ({ session: sessionStorage.getItem(name), local: localStorage.length }), STORAGE_NAME);
  const identity = (page: Page) => page.getByTestId('identity-label').textContent();

  it('asks for a key because the API answers 401; a wrong key shows the API message and asks again', async () => {
    const { page, requests } = await open();
    const prompt = page.getByTestId('key-prompt');
    await prompt.waitFor();
    expect(await prompt.locator('input[name=api-key]').getAttribute('type')).toBe('password');
    expect(requests).toContain('GET /whoami');
    // Nothing of the console behind the prompt asks the API (no stream of 401s).
    expect(await page.getByTestId('queue-list').count()).toBe(0);
    expect(await page.getByTestId('identity').count()).toBe(0);

    await enterKey(page, 'not-a-known-key-0123456789');
    const error = prompt.getByTestId('api-error');
    await expect.poll(() => error.getAttribute('data-error-code')).toBe('UNAUTHORIZED');
    expect(await error.textContent()).toContain('Unknown API key');
    expect(await error.textContent()).toContain('HTTP 401');
    expect(await prompt.isVisible()).toBe(true);
    expect(await stored(page)).toEqual({ session: null, local: 0 });

    // Typed with a blank inside: refused before anything is sent.
    const whoami = () => requests.filter((r) => r === 'GET /whoami').length;
    const before = whoami();
    await enterKey(page, 'two words');
    await expect.poll(() => error.textContent()).toContain('An API key has no spaces');
    expect(whoami()).toBe(before);

    // A key kept from earlier that the service no longer knows: the prompt says so.
    await page.evaluate(([name, key]) => sessionStorage.setItem(name, key), [STORAGE_NAME, 'revoked-key-0123456789ab']);
    await page.reload();
    await expect.poll(() => page.getByTestId('key-prompt').getByTestId('api-error').textContent()).toContain('Unknown API key');
  });

  it('a read-only key: its name and scope in the header, queues listed, push, pop and delete disabled; kept across a reload; Forget key asks again', async () => {
    const id = await queueWith('keys-read', 3);
    const { page } = await open(`/admin/#/queue/${id}`);
    const authorization: (string | undefined)[] = [];
    page.on('request', (request) => {
      if (new URL(request.url()).pathname.startsWith('/queue')) authorization.push(request.headers()['authorization']);
    });
    await enterKey(page, KEYS.viewer.key);

    await expect.poll(() => identity(page)).toBe('viewer · read');
    expect(await page.getByTestId('key-prompt').count()).toBe(0);
    await expect.poll(() => page.getByTestId('queue-count').textContent()).toBe('3');
    await page.getByLabel('Filter queues by prefix').fill(id);
    await expect.poll(() => page.locator(`[data-testid=queue-row][data-queue-id="${id}"]`).getAttribute('data-count')).toBe('3');
    expect(authorization.length).toBeGreaterThan(0);
    expect(new Set(authorization)).toEqual(new Set([`Bearer ${KEYS.viewer.key}`]));

    const deleteButton = page.getByRole('button', { name: 'Delete queue' });
    expect(await deleteButton.isDisabled()).toBe(true);
    expect(await deleteButton.getAttribute('title')).toContain('needs the admin scope');
    const pushButton = page.getByRole('button', { name: 'Push', exact: true });
    expect(await pushButton.isDisabled()).toBe(true);
    expect(await pushButton.getAttribute('title')).toContain('Pushing needs the produce (or admin) scope; the key “viewer” has read.');
    expect(await page.getByRole('button', { name: 'Pop', exact: true }).isDisabled()).toBe(true);
    expect(await page.getByRole('button', { name: 'Pop with ack', exact: true }).isDisabled()).toBe(true);
    expect(await page.getByTestId('push-form').getByTestId('scope-note').textContent()).toContain('needs the produce');
    expect(await page.getByTestId('pop-form').getByTestId('scope-note').textContent()).toContain('needs the consume');
    // The settings are shown; changing them needs admin.
    expect(await page.locator('[data-testid=settings-values] [data-setting=lock_mode] dd').textContent()).toMatch(/^exclusive/);
    const editSettings = page.getByTestId('settings-edit');
    expect(await editSettings.isDisabled()).toBe(true);
    expect(await editSettings.getAttribute('title')).toBe('Changing a queue’s settings needs the admin scope; the key “viewer” has read.');
    expect(await page.getByTestId('settings').getByTestId('scope-note').textContent()).toContain('needs the admin scope');
    // /metrics needs read: the viewer sees the numbers.
    await expect.poll(() => page.locator('[data-metric=items-in-memory]').textContent()).toMatch(/^\d/);

    // Kept for the tab's session only: sessionStorage, never localStorage or the URL.
    expect(await stored(page)).toEqual({ session: KEYS.viewer.key, local: 0 });
    expect(page.url()).not.toContain(KEYS.viewer.key);
    await page.reload();
    await expect.poll(() => identity(page)).toBe('viewer · read');
    await expect.poll(() => page.getByTestId('queue-count').textContent()).toBe('3');
    expect(await page.getByTestId('key-prompt').count()).toBe(0);

    await page.getByRole('button', { name: 'Forget key' }).click();
    await page.getByTestId('key-prompt').waitFor();
    expect(await page.getByTestId('identity').count()).toBe(0);
    expect(await stored(page)).toEqual({ session: null, local: 0 });
    await page.reload();
    await page.getByTestId('key-prompt').waitFor();
  });

  it('a key without read: a note instead of the queue list, pushing works, the service numbers are refused politely', async () => {
    const id = await queueWith('keys-produce', 1);
    const { page, requests } = await open(`/admin/#/queue/${id}`);
    await enterKey(page, KEYS.feeder.key);
    await expect.poll(() => identity(page)).toBe('feeder · produce');

    expect(await page.getByTestId('queue-panel').getByTestId('no-read').textContent()).toContain('Listing and reading queues needs the read (or admin) scope');
    expect(await page.locator('.sidebar').getByTestId('no-read').textContent()).toContain('the key “feeder” has produce');
    await expect.poll(() => page.getByTestId('metrics').getAttribute('data-refused')).toBe('FORBIDDEN');
    expect(await page.getByTestId('metrics').textContent()).toBe('service numbers need the read scope');

    await page.locator('textarea[name=item]').fill('{"from": "feeder"}');
    await page.getByRole('button', { name: 'Push', exact: true }).click();
    await expect.poll(() => page.getByTestId('result-message').textContent()).toBe(`Item pushed to queue ${id} at priority 0`);
    expect(await page.getByRole('button', { name: 'Pop', exact: true }).isDisabled()).toBe(true);
    expect(await page.getByRole('button', { name: 'Delete queue' }).isDisabled()).toBe(true);

    const { data } = await admin.GET('/queue/{queue_id}', { params: { path: { queue_id: id } } });
    expect(data?.count).toBe(2);
    // Reads the key may not do are never asked for.
    expect(requests.filter((r) => r.startsWith('GET /queues') || r.startsWith(`GET /queue/${id}`))).toEqual([]);
  });

  it('a 401 from any call while signed in (the key was dropped from the service) brings the prompt back with the API message', async () => {
    const { page } = await open();
    await enterKey(page, KEYS.viewer.key);
    await expect.poll(() => identity(page)).toBe('viewer · read');
    await page.getByTestId('queue-list').waitFor();

    // What a restarted service without this key answers the list's next poll.
    await page.route('**/queues?*', (route) =>
      route.fulfill({
        status: 401,
        contentType: 'application/json',
        headers: { 'www-authenticate': 'Bearer realm="pushpop"' },
        body: JSON.stringify({ statusCode: 401, error_code: 'UNAUTHORIZED', message: 'Unknown API key' }),
      }),
    );
    const prompt = page.getByTestId('key-prompt');
    await prompt.waitFor();
    expect(await prompt.getByTestId('api-error').textContent()).toContain('Unknown API key');
    expect(await page.getByTestId('queue-list').count()).toBe(0);

    await page.unroute('**/queues?*');
    await enterKey(page, KEYS.ops.key);
    await expect.poll(() => identity(page)).toBe('ops · admin');
    await page.getByTestId('queue-list').waitFor();
    expect(await stored(page)).toEqual({ session: KEYS.ops.key, local: 0 });
  });

  it('with the admin key a queue’s settings can be changed', async () => {
    const id = await queueWith('keys-settings', 1);
    const { page } = await open(`/admin/#/queue/${id}`);
    await enterKey(page, KEYS.ops.key);
    await expect.poll(() => identity(page)).toBe('ops · admin');
    await page.getByTestId('settings-edit').click();
    await page.getByTestId('settings-form').locator('select[name=lock_mode]').selectOption('shared');
    await page.getByTestId('settings-form').getByRole('button', { name: 'Save settings' }).click();
    await expect.poll(() => page.locator('[data-testid=settings-values] [data-setting=lock_mode] dd').textContent()).toMatch(/^shared/);
    const { data } = await admin.GET('/queue/{queue_id}/settings', { params: { path: { queue_id: id } } });
    expect(data?.lock_mode).toBe('shared');
  });

  it('with the admin key a queue can be deleted', async () => {
    const id = await queueWith('keys-delete', 4);
    const { page } = await open(`/admin/#/queue/${id}`);
    await enterKey(page, KEYS.ops.key);
    await expect.poll(() => identity(page)).toBe('ops · admin');
    await expect.poll(() => page.getByTestId('queue-count').textContent()).toBe('4');
    expect(await page.getByTestId('scope-note').count()).toBe(0);

    await page.getByRole('button', { name: 'Delete queue' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByRole('button', { name: 'Delete queue' }).click();
    await expect.poll(() => page.getByTestId('result-message').textContent()).toBe(`Deleted queue ${id} with 4 items.`);
    await expect.poll(() => page.getByTestId('queue-missing').count()).toBe(1);
    const { error } = await admin.GET('/queue/{queue_id}', { params: { path: { queue_id: id } } });
    expect(error?.error_code).toBe('QUEUE_NOT_FOUND');
  });
});
