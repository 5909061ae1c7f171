#!/usr/bin/env node
// The benchmark's group-commit floor: the raw-SQL floor (bench/peers/raw-sql.mjs, same table, same
// statements from queue-table.mjs) with group commit. While statements are in flight, arriving
// pushes wait and are then written together by one multi-row INSERT ... SELECT FROM unnest(...),
// and arriving pops (of any queues) are served together by one DELETE ... USING (unnest ...
// LATERAL ... FOR UPDATE SKIP LOCKED) RETURNING; each caller is answered from its own part. The
// cheapest durable PostgreSQL queue over HTTP: one commit (one WAL flush) for many requests.
//
//   node bench/peers/group-commit.mjs --database-url=postgres://postgres@127.0.0.1:5432/bench_group_commit --port=8103
//
// Order as in raw-sql.mjs: priority, then FIFO per queue. Items are stored as jsonb (see there).

import pg from 'pg';
import console from 'node:console';
import process from 'node:process';
import { option, peerOptions, servePeer } from './http-common.mjs';
import { POP_MANY, PUSH, PUSH_MANY, TABLE, byPriorityThenId, createSchema } from './queue-table.mjs';

const { databaseUrl, port, host } = peerOptions('group-commit peer');
/** Statements of one kind (pushes, pops) running at once; the pool holds both kinds. */
const IN_FLIGHT = Number(option('in-flight', 'GROUP_IN_FLIGHT', '2'));
/** Most requests in one statement. */
const MAX_GROUP = 1000;
if (!Number.isInteger(IN_FLIGHT) || IN_FLIGHT < 1 || IN_FLIGHT > 5) {
  console.error('group-commit peer: --in-flight / GROUP_IN_FLIGHT must be an integer 1-5');
  process.exit(2);
}

const pool = new pg.Pool({ connectionString: databaseUrl, max: 2 * IN_FLIGHT, application_name: 'pushpop-bench-group-commit' });
pool.on('error', (error) => process.stderr.write(`group-commit peer: idle client error: ${error.message}\n`));

await createSchema(pool);

/**
 * Group commit of one kind of request. `run(requests)` executes one statement for a group and
 * answers one result per request, in order (an Error for a request that failed alone).
 *
 * Invariant: at most `inFlight` groups run at once; a request submitted while that many run
 * waits, and every waiting request (at most `maxGroup`) goes into the next group, in the order
 * they were submitted. So a quiet server sends a request at once, alone, and a busy one sends
 * one statement per `inFlight` completions however many requests arrive.
 */
class GroupCommitter {
  #pending = [];
  #running = 0;

  constructor(run, { inFlight, maxGroup }) {
    this.run = run;
    this.inFlight = inFlight;
    this.maxGroup = maxGroup;
  }

  submit(request) {
    return new Promise((resolve, reject) => {
      this.#pending.push({ request, resolve, reject });
      this.#next();
    });
  }

  #next() {
    while (this.#running < this.inFlight && this.#pending.length > 0) {
      const group = this.#pending.splice(0, this.maxGroup);
      this.#running += 1;
      this.run(group.map((entry) => entry.request))
        .then(
          (results) => group.forEach((entry, i) => (results[i] instanceof Error ? entry.reject(results[i]) : entry.resolve(results[i]))),
          (error) => group.forEach((entry) => entry.reject(error)),
        )
        .finally(() => {
          this.#running -= 1;
          this.#next();
        });
    }
  }
}

/** SQLSTATE class 22 (data exception, e.g. \u0000 in jsonb): the fault of one item, not of the group. */
const isDataError = (error) => typeof error?.code === 'string' && error.code.startsWith('22');

const pushes = new GroupCommitter(
  async (group) => {
    try {
      await pool.query({
        name: 'push-many',
        text: PUSH_MANY,
        values: [group.map((p) => p.queueId), group.map((p) => p.priority), group.map((p) => p.itemJson)],
      });
      return group.map(() => undefined);
    } catch (error) {
      if (!isDataError(error) || group.length === 1) throw error;
      // one item the table refuses fails the whole statement: push each alone, so that only
      // its caller gets the error (and the others their 200), as on the raw-SQL floor
      return Promise.all(
        group.map((p) =>
          pool.query({ name: 'push', text: PUSH, values: [p.queueId, p.priority, p.itemJson] }).then(
            () => undefined,
            (e) => (e instanceof Error ? e : new Error(String(e))),
          ),
        ),
      );
    }
  },
  { inFlight: IN_FLIGHT, maxGroup: MAX_GROUP },
);

const pops = new GroupCommitter(
  async (group) => {
    // one subquery per queue (see POP_MANY): callers of the same queue share it, and get its
    // rows in queue order, each as many as it asked for, in the order they came
    const queues = new Map();
    for (const p of group) queues.set(p.queueId, (queues.get(p.queueId) ?? 0) + p.depth);
    const ids = [...queues.keys()];
    const { rows } = await pool.query({ name: 'pop-many', text: POP_MANY, values: [ids, [...queues.values()]] });
    const byQueue = new Map(ids.map((id) => [id, []]));
    for (const row of rows) byQueue.get(ids[Number(row.ord) - 1]).push(row);
    for (const list of byQueue.values()) if (list.length > 1) list.sort(byPriorityThenId);
    const taken = new Map(ids.map((id) => [id, 0]));
    return group.map((p) => {
      const start = taken.get(p.queueId);
      taken.set(p.queueId, start + p.depth);
      return byQueue
        .get(p.queueId)
        .slice(start, start + p.depth)
        .map((row) => row.item);
    });
  },
  { inFlight: IN_FLIGHT, maxGroup: MAX_GROUP },
);

await servePeer({
  name: 'group-commit peer',
  host,
  port,
  describe: `pg pool of ${2 * IN_FLIGHT}, ${IN_FLIGHT} push and ${IN_FLIGHT} pop statement(s) in flight, table ${TABLE}`,
  storage: {
    push(queueId, itemJson, _item, priority) {
      return pushes.submit({ queueId, itemJson, priority });
    },
    pop(queueId, depth) {
      return pops.submit({ queueId, depth });
    },
    async ready() {
      await pool.query('SELECT 1');
    },
    async close() {
      await pool.end();
    },
  },
});
