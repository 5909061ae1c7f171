import type { QueryRunner } from 'typeorm';

/**
 * A function of pushpop's schema, declared once. Migrations create it from this declaration
 * (see {@link syncDatabaseFunctions}), and a test compares what `pg_get_functiondef` shows
 * after migrating with the function this declaration creates.
 */
export interface DatabaseFunction {
  readonly name: string;
  /** What this function (or overload) is for, in a sentence: written above it in its `.sql` file. */
  readonly summary: string;
  /** In order; `type` as written in `CREATE FUNCTION`. */
  readonly parameters: readonly { readonly name: string; readonly type: string; readonly default?: string }[];
  readonly returns: string;
  readonly language: 'plpgsql' | 'sql';
  /** The text between the dollar quotes, exactly as PostgreSQL keeps it (`prosrc`). */
  readonly body: string;
  /**
   * Runs with its owner's rights (`SECURITY DEFINER`), its `search_path` pinned to the schema it
   * is created in and then `pg_temp` (see {@link syncDatabaseFunctions}), so that a caller's
   * objects of the same names are never found instead of pushpop's.
   */
  readonly securityDefiner?: true;
  /**
   * `IMMUTABLE`: the same answer for the same arguments until the function is replaced. A `sql`
   * function so declared whose body is a constant is folded into the plans that call it, and
   * replacing it invalidates those plans.
   */
  readonly immutable?: true;
}

/** `CREATE OR REPLACE FUNCTION …` of a declaration, one parameter a line (PostgreSQL keeps only the body's text as written). */
export function createFunctionStatement(fn: DatabaseFunction): string {
  const parameters = fn.parameters.map((p) => `  ${p.name} ${p.type}${p.default === undefined ? '' : ` DEFAULT ${p.default}`}`).join(',\n');
  const definer = fn.securityDefiner ? ' SECURITY DEFINER SET search_path FROM CURRENT' : '';
  const immutable = fn.immutable ? ' IMMUTABLE' : '';
  return `CREATE OR REPLACE FUNCTION ${fn.name}(\n${parameters}\n) RETURNS ${fn.returns} LANGUAGE ${fn.language}${immutable}${definer} AS $fn$${fn.body}$fn$`;
}

/** `name(type, …)`: the signature PostgreSQL tells overloads apart by. */
export function functionSignature(fn: DatabaseFunction): string {
  return `${fn.name}(${fn.parameters.map((p) => p.type).join(', ')})`;
}

/**
 * Makes the functions of the current schema those declared in `functions`: every declared one
 * created or replaced (in the order given: a `sql` function's body must find the functions it
 * calls), and every other overload of a declared name dropped.
 *
 * `CREATE OR REPLACE` keeps each function's identity, so a process still running the previous
 * release goes on calling it during a rolling upgrade. It cannot rename a parameter of a
 * signature that stays: a migration that does so drops the old one first.
 */
export async function syncDatabaseFunctions(runner: QueryRunner, functions: readonly DatabaseFunction[]): Promise<void> {
  // What `SET search_path FROM CURRENT` keeps: the current schema, then pg_temp (searched last).
  const [{ path }]: { path: string }[] = await runner.query(`SELECT current_setting('search_path') AS path`);
  await runner.query(`SELECT set_config('search_path', quote_ident(current_schema()) || ', pg_temp', false)`);
  try {
    for (const fn of functions) await runner.query(createFunctionStatement(fn));
  } finally {
    await runner.query(`SELECT set_config('search_path', $1, false)`, [path]);
  }
  const names = [...new Set(functions.map((fn) => fn.name))];
  const declared: { oid: number }[] = await runner.query(`SELECT to_regprocedure(s)::oid AS oid FROM unnest($1::text[]) AS s`, [
    functions.map(functionSignature),
  ]);
  const others: { signature: string }[] = await runner.query(
    `SELECT p.oid::regprocedure::text AS signature FROM pg_proc p
      WHERE p.pronamespace = current_schema()::regnamespace AND p.proname = ANY($1::text[]) AND p.oid <> ALL($2::oid[])`,
    [names, declared.map((d) => d.oid)],
  );
  for (const { signature } of others) await runner.query(`DROP FUNCTION ${signature}`);
}
