// The one table of the raw-SQL peers (bench/peers/raw-sql.mjs, bench/peers/group-commit.mjs) and
// every statement on it: its schema, the single-row push and pop, and their many-row forms for
// group commit. One definition, so the two floors differ only in how they send the statements.
//
// Order: a queue hands out its lowest priority number first, and within a priority the lowest
// id (insertion order): priority then FIFO per queue.

export const TABLE = 'queue_items';

/** Creates the table and its index when they are missing. */
export async function createSchema(pool) {
  await pool.query(`CREATE TABLE IF NOT EXISTS ${TABLE} (id bigserial PRIMARY KEY, queue_id text NOT NULL, priority int NOT NULL, item jsonb NOT NULL)`);
  await pool.query(`CREATE INDEX IF NOT EXISTS ${TABLE}_queue_priority_id ON ${TABLE} (queue_id, priority, id)`);
}

/** One item: $1 queue id, $2 priority, $3 the item's JSON text. */
export const PUSH = `INSERT INTO ${TABLE} (queue_id, priority, item) VALUES ($1, $2, $3::jsonb)`;

/** Up to $2 items of queue $1, removed; rows in no particular order. */
export const POP = `DELETE FROM ${TABLE} WHERE id IN (SELECT id FROM ${TABLE} WHERE queue_id = $1 ORDER BY priority, id LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING priority, id, item::text AS item`;

/**
 * Many items at once: $1 queue ids, $2 priorities, $3 JSON texts, element i being one item.
 * Rows are inserted (and get their ids) in array order.
 */
export const PUSH_MANY = `INSERT INTO ${TABLE} (queue_id, priority, item) SELECT queue_id, priority, item::jsonb FROM unnest($1::text[], $2::int[], $3::text[]) WITH ORDINALITY AS batch(queue_id, priority, item, ord) ORDER BY ord`;

/**
 * Pops of many queues at once: $1 queue ids (each at most once: two lateral subqueries of one
 * statement would lock, and so both return, the same rows), $2 how many items of each. Every row
 * carries `ord`, the 1-based index of its queue in $1; rows in no particular order.
 */
export const POP_MANY = `DELETE FROM ${TABLE} AS t USING (
  SELECT batch.ord, head.id
  FROM unnest($1::text[], $2::int[]) WITH ORDINALITY AS batch(queue_id, depth, ord)
  CROSS JOIN LATERAL (
    SELECT id FROM ${TABLE} WHERE queue_id = batch.queue_id ORDER BY priority, id LIMIT batch.depth FOR UPDATE SKIP LOCKED
  ) AS head
) AS taken
WHERE t.id = taken.id
RETURNING taken.ord, t.priority, t.id, t.item::text AS item`;

/** The order a queue hands its rows out in (for rows that RETURNING gives in no order). */
export const byPriorityThenId = (a, b) => a.priority - b.priority || (BigInt(a.id) < BigInt(b.id) ? -1 : 1);
