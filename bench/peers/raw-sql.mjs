#!/usr/bin/env node
// The benchmark's floor: pushpop's push and pop routes over the least SQL that can do the job
// (one INSERT per push, one DELETE ... SKIP LOCKED per pop) on a `pg` pool of 10. No actors, no
// segments, no offloading, no locks: what HTTP plus PostgreSQL cost by themselves.
//
//   node bench/peers/raw-sql.mjs --database-url=postgres://postgres@127.0.0.1:5432/bench_floor --port=8101
//
// Creates its table and index when they are missing. Items are stored as jsonb, so they come
// back with jsonb's key order and cannot contain \u0000 (pushpop keeps the JSON text as pushed).

import pg from 'pg';
import process from 'node:process';
import { peerOptions, servePeer } from './http-common.mjs';
import { POP, PUSH, TABLE, byPriorityThenId, createSchema } from './queue-table.mjs';

const { databaseUrl, port, host } = peerOptions('raw-sql peer');
const pool = new pg.Pool({ connectionString: databaseUrl, max: 10, application_name: 'pushpop-bench-floor' });
pool.on('error', (error) => process.stderr.write(`raw-sql peer: idle client error: ${error.message}\n`));

await createSchema(pool);

// Named statements (queue-table.mjs): each pooled connection parses and plans them once.

await servePeer({
  name: 'raw-sql peer',
  host,
  port,
  describe: `pg pool of 10, table ${TABLE}`,
  storage: {
    async push(queueId, itemJson, _item, priority) {
      await pool.query({ name: 'push', text: PUSH, values: [queueId, priority, itemJson] });
    },
    async pop(queueId, depth) {
      const { rows } = await pool.query({ name: 'pop', text: POP, values: [queueId, depth] });
      // RETURNING has no order of its own
      if (rows.length > 1) rows.sort(byPriorityThenId);
      return rows.map((row) => row.item);
    },
    async ready() {
      await pool.query('SELECT 1');
    },
    async close() {
      await pool.end();
    },
  },
});
