import { Injectable, NestMiddleware } from '@nestjs/common';
import type { NextFunction, Request, Response } from 'express';
import { AdminAssets } from './admin-assets.js';
import { AdminNotBuiltError } from './admin.errors.js';

/**
 * Runs before the static files on every `/admin` and `/admin/...` request: `/admin` moves to
 * `/admin/` (so the page's relative URLs and its hash routes resolve under the console), and
 * without a build every request gets the contract's 503 body from the global error filter.
 */
@Injectable()
export class AdminMiddleware implements NestMiddleware {
  constructor(private readonly assets: AdminAssets) {}

  use(req: Request, res: Response, next: NextFunction): void {
    const [path, query] = splitUrl(req.originalUrl);
    if (path !== '/admin' && !path.startsWith('/admin/')) return next();
    if (!this.assets.built) throw new AdminNotBuiltError();
    if (path === '/admin') return res.redirect(301, `/admin/${query}`);
    next();
  }
}

function splitUrl(url: string): [string, string] {
  const q = url.indexOf('?');
  return q < 0 ? [url, ''] : [url.slice(0, q), url.slice(q)];
}
