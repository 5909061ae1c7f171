import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Logger, OnApplicationBootstrap } from '@nestjs/common';

/**
 * Where `npm run build --workspace=@pushpop/admin` writes the console: `apps/admin/dist` at the
 * repository root, two levels above this file both in `src/admin/` (tests, from source) and in
 * `dist/admin/` (`npm start`, the Docker image).
 */
export const ADMIN_DIST_DIR = fileURLToPath(new URL('../../apps/admin/dist', import.meta.url));

/** The built admin console, as found when the app was created. */
export class AdminAssets implements OnApplicationBootstrap {
  readonly indexFile: string;

  constructor(
    readonly root: string,
    readonly built: boolean,
  ) {
    this.indexFile = join(root, 'index.html');
  }

  /** Looks for the build now: the app decides once, at creation, whether it serves the console. */
  static find(root = ADMIN_DIST_DIR): AdminAssets {
    return new AdminAssets(root, existsSync(join(root, 'index.html')));
  }

  onApplicationBootstrap(): void {
    // Not fatal: tests and `npm run start:dev` run from source without building the console.
    if (!this.built) new Logger('Admin').warn(`No admin console build in ${this.root}: /admin/ answers 503 ADMIN_NOT_BUILT until \`npm run build\``);
  }
}
