// Builds dist/ so that the package stands on its own (`npm pack` installs without the
// repository): the generated client (libs/api-client, private and never published) is compiled
// into dist/api-client/ and the imports of `@pushpop/api-client` point there.
import { execFileSync } from 'node:child_process';
import { copyFileSync, readdirSync, readFileSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const apiClient = join(root, '../api-client');
const dist = join(root, 'dist');
const tsc = join(root, '../../node_modules/typescript/bin/tsc');

rmSync(dist, { recursive: true, force: true });
execFileSync(process.execPath, [tsc, '-p', join(apiClient, 'tsconfig.json'), '--outDir', join(dist, 'api-client'), '--declarationMap', 'false'], {
  stdio: 'inherit',
});
copyFileSync(join(apiClient, 'src/schema.d.ts'), join(dist, 'api-client/schema.d.ts'));
execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.json')], { stdio: 'inherit' });

for (const name of readdirSync(dist)) {
  if (!/\.(js|d\.ts)$/.test(name)) continue;
  const file = join(dist, name);
  const text = readFileSync(file, 'utf8');
  const rewritten = text.replaceAll(/(['"])@pushpop\/api-client\1/g, "'./api-client/index.js'");
  if (rewritten !== text) writeFileSync(file, rewritten);
}
chmodSync(join(dist, 'cli.js'), 0o755);
