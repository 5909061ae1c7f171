import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generatedFiles } from '../database/functions/generated-files.js';

/**
 * Writes the files generated from the database functions' declarations (see
 * `database/functions/generated-files.ts`): `src/database/sql/*.sql` and
 * `src/database/functions/write-turn.values.ts`. With `--check`, writes nothing and fails naming
 * each file that is not current (CI, through scripts/check-generated.sh).
 */
function main(): void {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
  const check = process.argv.includes('--check');
  const stale: string[] = [];
  for (const { path, text } of generatedFiles()) {
    const target = resolve(root, path);
    const current = existsSync(target) ? readFileSync(target, 'utf8') : undefined;
    if (current === text) continue;
    stale.push(path);
    if (check) continue;
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, text);
    console.log(`Wrote ${path}`);
  }
  if (check && stale.length > 0) {
    console.error(`Not current with the declarations in src/database/functions/: ${stale.join(', ')}. Run 'npm run database:generate' and commit them.`);
    process.exit(1);
  }
  if (stale.length === 0) console.log('The generated database files are current');
}

main();
