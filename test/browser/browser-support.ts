import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createPushpopClient, type PushpopClient } from '@pushpop/api-client';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, expect } from 'vitest';
import { removeDataDir, startService, type TestService, uniqueQueueId } from '../support/service.js';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const ADMIN_DIR = join(ROOT, 'apps', 'admin');
const ADMIN_INDEX = join(ADMIN_DIR, 'dist', 'index.html');
export const SCREENSHOT_DIR = join(ROOT, 'test-results', 'browser');

/** Debian's `chromium` package; playwright-core downloads no browser of its own. */
export const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * Whether the browser tests run here: with Chromium installed, always; without it they are
 * skipped on a developer's machine, but fail under CI (see {@link requireChromium}).
 */
export const browserTestsEnabled = existsSync(CHROMIUM) || Boolean(process.env.CI);

export function requireChromium(): void {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `${CHROMIUM} is missing: the admin console tests need Debian's chromium (apt-get install -y chromium). CI is set, so they fail instead of skipping.`,
    );
  }
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}

function newestMtime(path: string): number {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = stat.mtimeMs;
  for (const entry of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, entry)));
  return newest;
}

/**
 * The service serves apps/admin/dist: build it when it is missing or older than its sources
 * (CI has just run `npm run build`, so there it is already fresh).
 */
export function ensureAdminBuilt(): void {
  const sources = ['src', 'index.html', 'vite.config.ts', 'package.json'].map((p) => join(ADMIN_DIR, p));
  if (existsSync(ADMIN_INDEX) && statSync(ADMIN_INDEX).mtimeMs >= Math.max(...sources.map(newestMtime))) return;
  try {
    execFileSync('npm', ['run', 'build', '--workspace=@pushpop/admin'], { cwd: ROOT, stdio: 'pipe', encoding: 'utf8' });
  } catch (error) {
    const e = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(`building the admin console failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`, { cause: error });
  }
}

/**
 * Chromium reports an HTTP error answer to fetch() as a console error ("Failed to load
 * resource: the server responded with a status of 404"). The console asks for such answers on
 * purpose (a queue that does not exist yet, a lock acknowledged elsewhere) and shows them, so
 * 4xx answers from the service itself are not errors of the page; everything else is.
 */
function isHandledHttpError(text: string, url: string, origin: string): boolean {
  return /^Failed to load resource: the server responded with a status of 4\d\d\b/.test(text) && url.startsWith(origin);
}

export interface ConsolePage {
  context: BrowserContext;
  page: Page;
  /** Console errors and uncaught exceptions of the page. */
  errors: string[];
  /** Requests that left the service's origin (the console must work offline). */
  external: string[];
  /** Every request to the service, as "METHOD path". */
  requests: string[];
}

/** A fresh browser context at laptop size on the console, collecting errors and requests. */
export async function openConsole(browser: Browser, origin: string, path = '/admin/'): Promise<ConsolePage> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1, locale: 'en-US' });
  const page = await context.newPage();
  const errors: string[] = [];
  const external: string[] = [];
  const requests: string[] = [];
  page.on('console', (message) => {
    if (message.type() !== 'error') return;
    const url = message.location().url;
    if (!isHandledHttpError(message.text(), url, origin)) errors.push(`console.error: ${message.text()} (${url})`);
  });
  page.on('pageerror', (error) => errors.push(`uncaught: ${error.message}`));
  page.on('request', (request) => {
    const url = request.url();
    if (url.startsWith(origin)) requests.push(`${request.method()} ${url.slice(origin.length)}`);
    else if (!url.startsWith('data:')) external.push(url);
  });
  await page.goto(origin + path);
  return { context, page, errors, external, requests };
}

export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const path = join(
    SCREENSHOT_DIR,
    `${name
      .replace(/[^a-z0-9]+/gi, '-')
      .replace(/^-|-$/g, '')
      .toLowerCase()}.png`,
  );
  await page.screenshot({ path });
  return path;
}

/** What a console test file gets from {@link useConsole}: set up before its first test. */
export interface ConsoleFixture {
  readonly svc: TestService;
  readonly client: PushpopClient;
  /** Opens the console in a fresh browser context (closed, screenshotted and checked after the test). */
  open(path?: string): Promise<ConsolePage>;
  /** A unique queue id, deleted after the test. */
  queueId(label: string): string;
  /** Queues created otherwise, deleted after the test. */
  track(...ids: string[]): void;
}

/**
 * The hooks every console test file needs: a service and Chromium for the file; after each
 * test, its queues deleted, a screenshot of the page it opened (`screenshotPrefix` + the test's
 * name), and a failure on any console error of the page or request that left the service.
 */
export function useConsole(screenshotPrefix = ''): ConsoleFixture {
  let svc: TestService | undefined;
  let client: PushpopClient | undefined;
  let browser: Browser | undefined;
  let current: ConsolePage | undefined;
  let created: string[] = [];

  beforeAll(async () => {
    requireChromium();
    ensureAdminBuilt();
    svc = await startService();
    client = createPushpopClient(svc.url);
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
    for (const id of created) await client!.DELETE('/queue/{queue_id}', { params: { path: { queue_id: id } } });
    created = [];
    if (!open) return;
    await screenshot(open.page, `${screenshotPrefix}${context.task.name}`);
    await open.context.close();
    expect(open.errors, 'console errors or uncaught exceptions in the page').toEqual([]);
    expect(open.external, 'requests that left the service').toEqual([]);
  });

  return {
    get svc() {
      return svc!;
    },
    get client() {
      return client!;
    },
    async open(path = '/admin/') {
      current = await openConsole(browser!, svc!.url, path);
      return current;
    },
    queueId(label) {
      const id = uniqueQueueId(label);
      created.push(id);
      return id;
    },
    track(...ids) {
      created.push(...ids);
    },
  };
}
