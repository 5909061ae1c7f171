// Builds dist/ (or the directory given with --out) so that the package stands on its own
// (`npm pack` installs without the repository): the generated client (libs/api-client, private
// and never published) is compiled into <out>/api-client/ and the imports of
// `@pushpop/api-client` point there.
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import process from 'node:process';
import { fileURLToPath, URL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const { values } = parseArgs({ options: { out: { type: 'string' } } });
const out = resolve(values.out ?? join(root, 'dist'));
const apiClient = join(root, '../api-client');
const tsc = join(root, '../../node_modules/typescript/bin/tsc');
const run = (args) => execFileSync(process.execPath, [tsc, ...args], { stdio: 'inherit' });

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
run(['-p', join(apiClient, 'tsconfig.json'), '--outDir', join(out, 'api-client'), '--declarationMap', 'false', '--sourceMap', 'false']);
copyFileSync(join(apiClient, 'src/schema.d.ts'), join(out, 'api-client/schema.d.ts'));

// The client, type-checked against the declarations just built.
const config = join(out, 'tsconfig.build.json');
writeFileSync(
  config,
  JSON.stringify({
    extends: join(root, 'tsconfig.json'),
    compilerOptions: {
      rootDir: join(root, 'src'),
      outDir: out,
      typeRoots: [join(root, '../../node_modules/@types')],
      paths: { '@pushpop/api-client': [join(out, 'api-client/index.d.ts')] },
    },
    include: [join(root, 'src/**/*.ts')],
    exclude: [join(root, 'src/**/*.spec.ts')],
  }),
);
try {
  run(['-p', config]);
} finally {
  rmSync(config);
}

for (const name of readdirSync(out)) {
  if (!/\.(js|d\.ts)$/.test(name)) continue;
  const file = join(out, name);
  const text = readFileSync(file, 'utf8');
  const rewritten = text.replaceAll(/(['"])@pushpop\/api-client\1/g, "'./api-client/index.js'");
  if (rewritten !== text) writeFileSync(file, rewritten);
}
chmodSync(join(out, 'cli.js'), 0o755);
