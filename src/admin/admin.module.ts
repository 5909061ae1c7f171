import { DynamicModule, MiddlewareConsumer, Module, NestModule, RequestMethod } from '@nestjs/common';
import { ServeStaticModule } from '@nestjs/serve-static';
import type { ServerResponse } from 'node:http';
import { AdminAssets } from './admin-assets.js';
import { AdminMiddleware } from './admin.middleware.js';

/** Hashed bundles never change under their name; everything else (index.html) is revalidated. */
function setCacheHeaders(res: ServerResponse, path: string): void {
  res.setHeader('Cache-Control', /[\\/]assets[\\/]/.test(path) ? 'public, max-age=31536000, immutable' : 'no-cache');
}

/**
 * Serves the admin console (`apps/admin`, a Vite SPA built separately) at `/admin/`, as
 * Ghostfolio serves its client: `ServeStaticModule` with the API left alone. The static
 * handler is mounted on `/admin` only, so no API route (`/queue…`, `/queues`, `/health…`,
 * `/metrics`, `/docs`, `/openapi.json`) can reach it; unknown paths under `/admin/` get
 * `index.html` (the console routes by hash, but a reload of a deep link must not 404),
 * except under `/admin/assets/`, where a missing file is a 404 rather than HTML served as script.
 *
 * Whether a build exists is decided when the app is created ({@link AdminModule.forRoot} is
 * called by `AppModule.forRoot`): without one the service starts anyway and `/admin/` answers
 * 503 `ADMIN_NOT_BUILT`. In Nest's preview mode (`npm run openapi`) nothing here runs, and the
 * module has no controller, so the OpenAPI document is unaffected.
 */
@Module({})
export class AdminModule implements NestModule {
  static forRoot(assets: AdminAssets = AdminAssets.find()): DynamicModule {
    return {
      module: AdminModule,
      imports: assets.built
        ? [
            ServeStaticModule.forRoot({
              rootPath: assets.root,
              serveRoot: '/admin',
              exclude: ['/admin/assets/{*path}'],
              serveStaticOptions: { index: 'index.html', redirect: false, setHeaders: setCacheHeaders },
            }),
          ]
        : [],
      providers: [{ provide: AdminAssets, useValue: assets }],
    };
  }

  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(AdminMiddleware).forRoutes({ path: 'admin', method: RequestMethod.ALL }, { path: 'admin/{*path}', method: RequestMethod.ALL });
  }
}
