import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { QueryRunner } from 'typeorm';
import { DATABASE_FUNCTIONS } from '../../src/database/functions/database-functions.js';
import { generatedFiles } from '../../src/database/functions/generated-files.js';

const ROOT = resolve(import.meta.dirname, '../..');

/** `pg_get_functiondef` of every overload of `names` in `schema`, by signature, the schema's name left out. */
async function definitions(runner: QueryRunner, schema: string, names: string[]): Promise<Map<string, string>> {
  const rows: { signature: string; definition: string }[] = await runner.query(
    `SELECT p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')' AS signature, pg_get_functiondef(p.oid) AS definition
       FROM pg_proc p WHERE p.pronamespace = to_regnamespace($1) AND p.proname = ANY($2::text[])`,
    [schema, names],
  );
  // The schema's name is left out of a pinned search_path too (`SET search_path TO '<schema>', 'pg_temp'`).
  const named = (definition: string): string =>
    definition.replace(`FUNCTION ${schema}.`, 'FUNCTION ').replace(/^ SET search_path TO .*$/m, (line) => line.replaceAll(schema, '<schema>'));
  return new Map(rows.map((r) => [r.signature, named(r.definition)]));
}

/** The first line where two texts differ, for a readable failure. */
function firstDifference(actual: string, expected: string): string {
  const [a, e] = [actual.split('\n'), expected.split('\n')];
  const line = a.findIndex((text, i) => text !== e[i]);
  const at = line === -1 ? a.length : line;
  return `line ${at + 1}: found ${JSON.stringify(a[at] ?? '')}, declared ${JSON.stringify(e[at] ?? '')}`;
}

/**
 * How the functions of the runner's current schema differ from their declarations (empty: not
 * at all), and which checked-in `src/database/sql/*.sql` file differs from what the declarations
 * generate (`stale: <path>`). What the checked-in files make is read from PostgreSQL itself:
 * they are run in a scratch schema, inside a transaction (or savepoint) that is rolled back, and
 * the migrated functions and theirs are compared as `pg_get_functiondef` prints them. So the
 * declarations, the files a reviewer reads and the migrated schema are all the same.
 */
export async function functionDrift(runner: QueryRunner): Promise<string[]> {
  const drift: string[] = [];
  const sqlFiles = generatedFiles().filter((f) => f.path.endsWith('.sql'));
  const checkedIn = sqlFiles.map((f) => {
    const path = resolve(ROOT, f.path);
    const text = existsSync(path) ? readFileSync(path, 'utf8') : '';
    if (text !== f.text) drift.push(`stale: ${f.path}`);
    return text;
  });
  const [{ schema }] = (await runner.query(`SELECT current_schema() AS schema`)) as { schema: string }[];
  const names = [...new Set(DATABASE_FUNCTIONS.map((fn) => fn.name))];
  const actual = await definitions(runner, schema, names);

  const scratch = `pushpop_declared_${randomBytes(4).toString('hex')}`;
  const nested = runner.isTransactionActive;
  await (nested ? runner.query('SAVEPOINT declared') : runner.startTransaction());
  let expected: Map<string, string>;
  try {
    await runner.query(`CREATE SCHEMA ${scratch}`);
    await runner.query(`SET LOCAL search_path = ${scratch}, pg_temp`);
    for (const text of checkedIn) if (text) await runner.query(text);
    expected = await definitions(runner, scratch, names);
  } finally {
    await (nested ? runner.query('ROLLBACK TO SAVEPOINT declared') : runner.rollbackTransaction());
  }

  for (const [signature, definition] of expected) {
    const found = actual.get(signature);
    if (found === undefined) drift.push(`missing: ${signature}`);
    else if (found !== definition) drift.push(`differs: ${signature}, ${firstDifference(found, definition)}`);
  }
  for (const signature of actual.keys()) if (!expected.has(signature)) drift.push(`not declared: ${signature}`);
  return drift;
}
