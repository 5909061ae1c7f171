// Packs @pushpop/client into a tarball that installs on its own, without touching dist/: builds
// into a staging directory (scripts/build.mjs --out, the generated client compiled in), copies
// the README and the examples beside it with a package.json that has no scripts, and runs
// `npm pack` there.
//   npm run tarball --workspace=@pushpop/client -- --destination <dir>   (default: the current directory)
// Makes the destination if missing. Prints the tarball's path. `--check` (the package's prepack) refuses a plain `npm pack` of
// libs/client, which would ship whatever dist/ holds.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import process from 'node:process';
import console from 'node:console';
import { fileURLToPath, URL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const { values } = parseArgs({ options: { destination: { type: 'string' }, check: { type: 'boolean' } } });
if (values.check) {
  console.error(
    'Pack @pushpop/client with `npm run tarball --workspace=@pushpop/client -- --destination <dir>`: it builds a fresh dist/ for the tarball and leaves this one alone.',
  );
  process.exit(1);
}
const destination = resolve(values.destination ?? process.cwd());
// `npm pack` writes into an existing directory only.
mkdirSync(destination, { recursive: true });
const staging = mkdtempSync(join(tmpdir(), 'pushpop-client-pack-'));
try {
  execFileSync(process.execPath, [join(root, 'scripts/build.mjs'), '--out', join(staging, 'dist')], { stdio: ['ignore', 'ignore', 'inherit'] });
  for (const name of ['README.md', 'examples']) cpSync(join(root, name), join(staging, name), { recursive: true });
  const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  delete manifest.scripts;
  delete manifest.devDependencies;
  writeFileSync(join(staging, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const packed = JSON.parse(execFileSync(npm, ['pack', '--json', '--pack-destination', destination], { cwd: staging, encoding: 'utf8' }));
  console.log(join(destination, packed[0].filename));
} finally {
  rmSync(staging, { recursive: true, force: true });
}
