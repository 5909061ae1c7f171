import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdminAssets } from '../../src/admin/admin-assets.js';
import { AdminModule } from '../../src/admin/admin.module.js';
import { AllExceptionsFilter } from '../../src/common/all-exceptions.filter.js';

// How /admin is served, without Chromium and without building the console: the module alone,
// over a stand-in build directory (or none), with the service's error filter.

async function adminApp(assets: AdminAssets): Promise<NestFastifyApplication> {
  const app = await NestFactory.create<NestFastifyApplication>(AdminModule.forRoot(assets), new FastifyAdapter(), { logger: false });
  app.useGlobalFilters(new AllExceptionsFilter());
  await app.init();
  // Fastify loads its plugins (the console among them) when it gets ready; `listen()` would do this.
  await app.getHttpAdapter().getInstance().ready();
  return app;
}

describe('admin console serving', () => {
  let dir: string;
  let built: NestFastifyApplication;
  let missing: NestFastifyApplication;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'pushpop-admin-'));
    mkdirSync(join(dir, 'assets'));
    writeFileSync(join(dir, 'index.html'), '<!doctype html><title>pushpop admin</title>');
    writeFileSync(join(dir, 'assets', 'index-abc123.js'), 'console.log(1)');
    built = await adminApp(new AdminAssets(dir, true));
    missing = await adminApp(new AdminAssets(join(dir, 'nowhere'), false));
  });

  afterAll(async () => {
    await built?.close();
    await missing?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('redirects /admin to /admin/, keeping the query', async () => {
    const res = await request(built.getHttpServer()).get('/admin?x=1');
    expect(res.status).toBe(301);
    expect(res.headers.location).toBe('/admin/?x=1');
  });

  it('serves index.html at /admin/ and for unknown paths under it, revalidated', async () => {
    for (const path of ['/admin/', '/admin/index.html', '/admin/queue/orders', '/admin/a/b/c']) {
      const res = await request(built.getHttpServer()).get(path);
      expect(res.status, path).toBe(200);
      expect(res.headers['content-type'], path).toMatch(/text\/html/);
      expect(res.text, path).toContain('pushpop admin');
      expect(res.headers['cache-control'], path).toBe('no-cache');
    }
  });

  it('serves hashed assets as immutable and a missing asset as 404, not HTML', async () => {
    const asset = await request(built.getHttpServer()).get('/admin/assets/index-abc123.js');
    expect(asset.status).toBe(200);
    expect(asset.headers['content-type']).toMatch(/javascript/);
    expect(asset.headers['cache-control']).toContain('immutable');
    const gone = await request(built.getHttpServer()).get('/admin/assets/index-gone.js');
    expect(gone.status).toBe(404);
    expect(gone.body).toMatchObject({ statusCode: 404, error_code: 'NOT_FOUND' });
  });

  it('sends the console with security headers: a policy that allows its own origin only, nosniff, no referrer; the API without them', async () => {
    for (const path of ['/admin/', '/admin/assets/index-abc123.js', '/admin/queue/x']) {
      const res = await request(built.getHttpServer()).get(path);
      const csp = String(res.headers['content-security-policy']);
      expect(csp, path).toContain("default-src 'self'");
      expect(csp, path).toContain("script-src 'self'");
      expect(csp, path).toContain("connect-src 'self'");
      expect(csp, path).toContain("frame-ancestors 'none'");
      expect(csp, path).not.toMatch(/unsafe-inline|unsafe-eval|\*|https?:/);
      expect(res.headers['x-content-type-options'], path).toBe('nosniff');
      expect(res.headers['referrer-policy'], path).toBe('no-referrer');
    }
    const api = await request(built.getHttpServer()).get('/health');
    expect(api.headers['content-security-policy']).toBeUndefined();
  });

  it('leaves other paths to the API (404 from the service, not the console)', async () => {
    for (const path of ['/', '/queues', '/administrator', '/health']) {
      const res = await request(built.getHttpServer()).get(path);
      expect(res.status, path).toBe(404);
      expect(res.body, path).toMatchObject({ statusCode: 404, error_code: 'NOT_FOUND' });
    }
  });

  it('without a build: the app starts and /admin/ answers 503 ADMIN_NOT_BUILT', async () => {
    for (const path of ['/admin', '/admin/', '/admin/index.html', '/admin/queue/x']) {
      const res = await request(missing.getHttpServer()).get(path);
      expect(res.status, path).toBe(503);
      expect(res.body, path).toEqual({ statusCode: 503, error_code: 'ADMIN_NOT_BUILT', message: 'run npm run build' });
    }
    const other = await request(missing.getHttpServer()).get('/queues');
    expect(other.status).toBe(404);
  });

  it('logs a warning, not an error, when the build is missing', async () => {
    const warnings: string[] = [];
    const original = Logger.prototype.warn;
    Logger.prototype.warn = function (message: unknown) {
      warnings.push(String(message));
    };
    try {
      new AdminAssets(join(dir, 'nowhere'), false).onApplicationBootstrap();
    } finally {
      Logger.prototype.warn = original;
    }
    expect(warnings.join('\n')).toMatch(/ADMIN_NOT_BUILT/);
  });
});
