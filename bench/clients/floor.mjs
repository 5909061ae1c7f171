// The raw-SQL floor (bench/peers/raw-sql.mjs) over HTTP with no client library: node:http with a
// keep-alive agent against the floor target's `POST /queue/{id}/push` (one committed INSERT) and
// `POST /queue/{id}/pop?depth=1` (one committed DELETE ... RETURNING). A reference for the
// libraries' columns: what any design with an HTTP hop and a commit per item gets on this
// machine, with nothing between the caller and the SQL.

import { Buffer } from 'node:buffer';
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { URL } from 'node:url';
import { ALL_ROWS, inFlight } from './measure.mjs';

/** Pushes awaited at once when a batch is asked for: the floor has no batch route, so a batch is that many single pushes. */
export const FILL_IN_FLIGHT = 64;
/** Items per pop of the consumer: one committed request per item, as pushpop's acknowledgement with `next`. */
export const POP_DEPTH = 1;
/** A request not answered by then fails (the floor answers in milliseconds). */
const TIMEOUT_MS = 30_000;
/** A consumer loop's pause after a failed pop (an empty pop is polled again at once). */
const PAUSE_AFTER_ERROR_MS = 100;

/** The adapter of bench/clients/measure.mjs for the floor target at `url`. */
export async function createAdapter({ url }) {
  const base = new URL(url);
  const agent = new http.Agent({ keepAlive: true });
  const errors = [];
  let requests = 0;

  /** POST `path` with `body` (a string or null); the answer's parsed JSON, or an error for anything but 200. */
  const post = (path, body) =>
    new Promise((resolvePost, reject) => {
      requests += 1;
      const headers = body === null ? { 'content-length': 0 } : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
      const req = http.request({ host: base.hostname, port: base.port, path, method: 'POST', headers, agent, timeout: TIMEOUT_MS }, (res) => {
        const chunks = [];
        res.on('data', (chunk) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode !== 200) reject(new Error(`POST ${path}: ${res.statusCode} ${text.slice(0, 200)}`));
          else resolvePost(JSON.parse(text));
        });
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error(`POST ${path}: no answer within ${TIMEOUT_MS / 1000} s`)));
      req.on('error', reject);
      req.end(body ?? undefined);
    });
  const push = (queue, item) => post(`/queue/${encodeURIComponent(queue)}/push`, JSON.stringify({ item }));
  const pop = (queue, depth) => post(`/queue/${encodeURIComponent(queue)}/pop?depth=${depth}`, null).then((answer) => answer.items);

  return {
    system: 'raw-SQL floor (HTTP, no library)',
    options: { pop_depth: POP_DEPTH, fill_in_flight: FILL_IN_FLIGHT, agent: 'node:http keep-alive', empty_pop: 'popped again at once' },
    // no batch route and no producer that gathers pushes
    rows: ALL_ROWS.filter((row) => row !== 'produce-batch' && row !== 'produce-linger'),
    takeErrors: () => errors.splice(0),
    /** HTTP requests made so far. */
    requests: () => requests,
    // a queue of the floor is its rows in the peer's table: nothing to create
    async newQueue() {},
    async dropQueue(queue) {
      // nothing to delete but what a capped row left behind
      while ((await pop(queue, 100)).length > 0);
    },
    pushOne: async (queue, item) => void (await push(queue, item)),
    pushBatch: (queue, items) => inFlight(items.length, FILL_IN_FLIGHT, (i) => push(queue, items[i])),
    consumer(queue, concurrency, { onStart, onDone }) {
      let stopping = false;
      let loops = [];
      // pops with depth 1 one after the other, an empty answer popped again at once: no pause, no wait on the server
      const loop = async () => {
        while (!stopping) {
          let items;
          try {
            items = await pop(queue, POP_DEPTH);
          } catch (error) {
            errors.push(String(error?.message ?? error));
            await sleep(PAUSE_AFTER_ERROR_MS);
            continue;
          }
          for (const item of items) {
            onStart(item);
            onDone(1);
          }
        }
      };
      return {
        start() {
          loops = Array.from({ length: concurrency }, loop);
        },
        async stop() {
          stopping = true;
          await Promise.all(loops);
        },
      };
    },
    async close() {
      agent.destroy();
    },
  };
}
