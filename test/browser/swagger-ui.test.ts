import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseKind, removeDataDir, startService, type TestService } from '../support/service.js';
import { browserTestsEnabled, launchChromium, requireChromium } from './browser-support.js';

/**
 * Swagger UI with API keys: the Authorize button takes a key, and "Try it out" then sends it.
 * Swagger UI's files are served by the service itself; the page loads nothing from elsewhere.
 */

const KEY = 'swagger-key-0123456789abcd';
const suite = browserTestsEnabled ? describe : describe.skip;

suite(`Swagger UI with API keys in Chromium (${databaseKind})`, () => {
  let svc: TestService;
  let browser: Browser;

  beforeAll(async () => {
    requireChromium();
    svc = await startService({ env: { API_KEYS: `docs:${KEY}:read` }, docs: true });
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await svc?.close();
    if (svc) removeDataDir(svc.dataDir);
  });

  it('Authorize takes a bearer key, and Try it out on GET /whoami answers with its name', async () => {
    const page = await browser.newPage();
    const elsewhere: string[] = [];
    page.on('request', (request) => {
      if (!request.url().startsWith(svc.url)) elsewhere.push(request.url());
    });
    const sent: (string | undefined)[] = [];
    page.on('request', (request) => {
      if (request.url() === `${svc.url}/whoami`) sent.push(request.headers()['authorization']);
    });
    try {
      await page.goto(`${svc.url}/docs`);
      await page.locator('button.authorize').first().click();
      const bearer = page.locator('.auth-container').filter({ hasText: 'bearer' }).first();
      await bearer.locator('input').first().fill(KEY);
      await bearer.locator('button.authorize').click();
      await page.locator('.modal-ux button.btn-done, .modal-ux .close-modal').first().click();

      const operation = page.locator('#operations-operations-whoami');
      await operation.locator('.opblock-summary').click();
      await operation.locator('button.try-out__btn').click();
      await operation.locator('button.execute').click();
      const body = operation.locator('.live-responses-table .response-col_description pre').first();
      await expect.poll(async () => (await body.textContent()) ?? '', { timeout: 10_000 }).toContain('"name": "docs"');
      expect(sent).toEqual([`Bearer ${KEY}`]);
      expect(elsewhere).toEqual([]);
    } finally {
      await page.close();
    }
  });
});
