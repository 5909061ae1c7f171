import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { repoRoot } from '../support/child-service.js';

/** A private build of libs/client (what `npm pack` ships), for child processes. */
export interface ClientBuild {
  /** The package's entry point, to import from a child script. */
  readonly indexJs: string;
  /** The `pushpop` command. */
  readonly cliJs: string;
  remove(): void;
}

/**
 * Builds the client package into a directory of its own (under libs/client/node_modules, so
 * its dependencies resolve), so that no other build of dist/ can pull files from under a
 * running child. Takes ~10 s.
 */
export function buildClient(timeoutMs = 180_000): Promise<ClientBuild> {
  const out = join(repoRoot, 'libs/client/node_modules/.cache', `test-build-${process.pid}-${randomBytes(4).toString('hex')}`);
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [join(repoRoot, 'libs/client/scripts/build.mjs'), '--out', out], { timeout: timeoutMs }, (error, stdout, stderr) => {
      if (error) return reject(new Error(`building libs/client failed: ${error.message}\n${stdout}\n${stderr}`));
      resolve({ indexJs: join(out, 'index.js'), cliJs: join(out, 'cli.js'), remove: () => rmSync(out, { recursive: true, force: true }) });
    });
  });
}

/** Resolves when `check` is true; fails after `timeoutMs` with `what`. */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
