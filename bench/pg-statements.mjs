// What one statement costs the Node process that sends it through `pg`, by its number of
// parameters: the share of a push's CPU that is the driver's, apart from pushpop's own code.
//
//   node bench/pg-statements.mjs [--database-url=postgres://postgres@127.0.0.1:5432/postgres]
//     [--statements=3000] [--connections=16] [--rounds=2]
//
// Sends, from --connections connections at once, prepared statements of three sizes: `SELECT 1`;
// one turn write's 38 values of the short form (as a push to a queue binds them: a queue id,
// versions, the priorities' JSON, one item of 176 characters, the rest empty arrays or nulls);
// and ten such turns' values in one statement (380 parameters), as grouped turn writes carry
// them. The statement only tests its parameters (`$n::text IS NULL`), so PostgreSQL does little;
// what is measured is this process's CPU per statement (process.cpuUsage: parameter encoding,
// the protocol, the socket, the answer's parsing).
import console from 'node:console';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import pg from 'pg';
import { arg } from './common/args.mjs';

const databaseUrl = arg('database-url', 'postgres://postgres@127.0.0.1:5432/postgres');
const statements = Number(arg('statements', '3000'));
const connections = Number(arg('connections', '16'));
const rounds = Number(arg('rounds', '2'));

const pool = new pg.Pool({ connectionString: databaseUrl, max: connections });
const payload = 'x'.repeat(150);
const priorities = JSON.stringify({
  0: { count: 57, head_segment: 0, tail_segment: 0, next_position: 57, head_offloaded_segment: null, tail_offloaded_segment: null },
});

/** A push turn's values of the short form, in the order of its parameters. */
const turnValues = (i) => [
  ...[`queue-${i}`, 1000 + i, 1001 + i, false, 100, 1, 57, priorities],
  ...[[], [], [], []], // segment rows deleted
  ...[[0], [0], [56], [JSON.stringify({ seq: i, payload })]], // the row inserted
  ...[null, null, null, null, null, null, null], // the exclusive lock, unchanged
  ...[[], [], [], []], // the offload store's rows
  ...[null, null, null, [], [], [], [], null, null, [], []], // delayed items, dedup ids
];

const SIZES = [
  { label: 'SELECT 1', turns: 0 },
  { label: 'one turn (38 parameters)', turns: 1 },
  { label: 'ten turns (380 parameters)', turns: 10 },
];

function statement(turns) {
  const values = () => Array.from({ length: turns }, (_, t) => turnValues(t)).flat();
  const n = values().length;
  const text = n === 0 ? 'SELECT 1' : `SELECT ${Array.from({ length: n }, (_, i) => `$${i + 1}::text IS NULL`).join(' AND ')} AS a`;
  return { name: `pg_statements_${turns}`, text, values };
}

async function run({ name, text, values }) {
  const each = Math.ceil(statements / connections);
  await Promise.all(
    Array.from({ length: connections }, async () => {
      for (let k = 0; k < each; k++) await pool.query({ name, text, values: values() });
    }),
  );
  return each * connections;
}

const rows = [];
for (let round = 1; round <= rounds; round++) {
  for (const { label, turns } of SIZES) {
    const s = statement(turns);
    await run(s); // warm-up: prepared on every connection
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const n = await run(s);
    const cpu = process.cpuUsage(cpu0);
    rows.push({
      round,
      statement: label,
      'statements/s': Math.round(n / ((performance.now() - t0) / 1000)),
      'CPU µs/statement': +((cpu.user + cpu.system) / n).toFixed(1),
      'user µs': +(cpu.user / n).toFixed(1),
      'system µs': +(cpu.system / n).toFixed(1),
    });
  }
}
console.table(rows);
await pool.end();
