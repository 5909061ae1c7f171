import { relative, sep } from 'node:path';
import { DynamicModule, Module, NotFoundException, OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply } from 'fastify';
import helmet from 'helmet';
import { AdminAssets } from './admin-assets.js';
import { AdminNotBuiltError } from './admin.errors.js';

/**
 * The console's security headers, from helmet: a Content-Security-Policy that lets the page load
 * and connect to its own origin only (no inline script, no framing), `X-Content-Type-Options:
 * nosniff`, `Referrer-Policy: no-referrer`. No HSTS: the service speaks plain HTTP unless a proxy
 * in front of it terminates TLS, and that proxy decides.
 */
const consoleHeaders = helmet({
  contentSecurityPolicy: {
    useDefaults: false,
    directives: {
      defaultSrc: ["'self'"],
      scriptSrc: ["'self'"],
      styleSrc: ["'self'"],
      imgSrc: ["'self'", 'data:'],
      fontSrc: ["'self'"],
      connectSrc: ["'self'"],
      objectSrc: ["'none'"],
      baseUri: ["'self'"],
      formAction: ["'self'"],
      frameAncestors: ["'none'"],
    },
  },
  strictTransportSecurity: false,
  referrerPolicy: { policy: 'no-referrer' },
});

/** Hashed bundles never change under their name; everything else (index.html) is revalidated. */
function setCacheHeaders(root: string): (reply: FastifyReply, path: string) => void {
  return (reply, path) => {
    reply.header('Cache-Control', relative(root, path).startsWith(`assets${sep}`) ? 'public, max-age=31536000, immutable' : 'no-cache');
  };
}

/**
 * The console as a Fastify plugin, registered with the prefix `/admin`, so nothing it does can
 * reach an API route. Its not-found handler covers `/admin` and everything under it:
 * - with a build, `@fastify/static` serves the files; a path with no file gets `index.html`
 *   (the console routes by hash, but a reload of a deep link must not 404), except under
 *   `/admin/assets/`, where a missing file is a 404 rather than HTML served as script;
 *   `/admin` moves to `/admin/`, so the page's relative URLs resolve under the console;
 * - without one, every request gets 503 ADMIN_NOT_BUILT.
 * Errors go to the app's error handler, that is the global filter.
 */
async function adminConsole(admin: FastifyInstance, { assets }: { assets: AdminAssets }): Promise<void> {
  // This plugin's own hook: the API's answers do not carry the console's policy.
  admin.addHook('onRequest', (request, reply, done) =>
    consoleHeaders(request.raw, reply.raw, (error?: unknown) => done(error instanceof Error ? error : undefined)),
  );
  if (!assets.built) {
    admin.setNotFoundHandler(() => {
      throw new AdminNotBuiltError();
    });
    return;
  }
  await admin.register(fastifyStatic, { root: assets.root, index: 'index.html', dotfiles: 'ignore', setHeaders: setCacheHeaders(assets.root) });
  admin.get('/', { prefixTrailingSlash: 'no-slash' }, (request, reply) => {
    const q = request.url.indexOf('?');
    return reply.redirect(`/admin/${q < 0 ? '' : request.url.slice(q)}`, 301);
  });
  admin.setNotFoundHandler((request, reply) => {
    if (request.url.startsWith('/admin/assets/')) throw new NotFoundException(`Cannot ${request.method} ${request.url}`);
    return reply.sendFile('index.html');
  });
}

/**
 * Serves the admin console (`apps/admin`, a Vite SPA built separately) at `/admin/`, beside the
 * API, as Ghostfolio serves its client (see {@link adminConsole}).
 *
 * Whether a build exists is decided when the app is created ({@link AdminModule.forRoot} is
 * called by `AppModule.forRoot`): without one the service starts anyway and `/admin/` answers
 * 503 `ADMIN_NOT_BUILT`. In Nest's preview mode (`npm run openapi`) nothing here runs, and the
 * module has no controller, so the OpenAPI document is unaffected.
 */
@Module({})
export class AdminModule implements OnModuleInit {
  constructor(
    private readonly adapterHost: HttpAdapterHost,
    private readonly assets: AdminAssets,
  ) {}

  static forRoot(assets: AdminAssets = AdminAssets.find()): DynamicModule {
    return { module: AdminModule, providers: [{ provide: AdminAssets, useValue: assets }] };
  }

  onModuleInit(): void {
    // Loaded when Fastify gets ready, after Nest has installed its error and not-found handlers.
    void this.adapterHost.httpAdapter.getInstance<FastifyInstance>().register(adminConsole, { prefix: '/admin', assets: this.assets });
  }
}
