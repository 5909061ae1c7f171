import type { DatabaseFunction } from './database-function.js';
import { parametersOf, type WriteTurnParameter } from './write-turn.parameters.js';

/** The shared-lock rows of the turn's locks (`l`, read from `p_sl_upserts`), for the plain insert and the upsert alike. */
const SHARED_LOCK_ROWS = `INSERT INTO shared_locks (queue_id, lock_id, state, priorities, segments, positions, items, deliveries, dead_lettered_from, headers, created_at, expires_at)
    SELECT p_queue_id, l.id, l.state, l.priorities, l.segments, l.positions, l.items, l.deliveries, l.from_queues, l.headers,
           to_timestamp(l.created / 1000.0), to_timestamp(l.expires / 1000.0)
      FROM l`;

/**
 * The body of `pushpop_write_turn`, full or short. The short body is the full one without what
 * only the full form's parameters bring (settings, shared locks, given-back items, dead
 * letters, delivery counts), so the two cannot drift apart: a turn that gives none of those
 * parameters gets the same writes from either. Both read more easily as the SQL they make, in
 * `src/database/sql/pushpop_write_turn.sql`.
 *
 * It applies everything a turn changed if and only if the queue row still has the version the
 * turn was computed from. Called in autocommit it is the whole transaction; the order inside is
 * fixed: the version check first, then deletes before inserts (a priority emptied and refilled
 * in one turn reuses segment and position numbers), then the lock, the offloaded segments, the
 * delayed items and dedup ids, the shared locks and given-back items (those popped again deleted
 * before those given back: an item may be both in one turn), and last the dead letters and the
 * redriven items (added to other queues' delayed items, due at once, bumping those queues'
 * versions, their rows locked first in `queue_id` order).
 */
function writeTurnBody(full: boolean): string {
  /** Text of the full body only. */
  const fullOnly = (sql: string): string => (full ? sql : '');
  return `
DECLARE
  v_from integer := 1;${fullOnly(`
  v_seq bigint;
  v_dest varchar;
  v_n bigint;
  v_sl_rows jsonb;`)}
BEGIN${fullOnly(`
  -- Dead letters and redriven items lock several queue rows: all first, in queue_id order (no deadlock between two such turns).
  IF p_dlq_id IS NOT NULL OR cardinality(p_rd_queue) > 0 THEN
    PERFORM 1 FROM queues WHERE queue_id = p_queue_id OR queue_id = p_dlq_id OR queue_id = ANY(p_rd_queue) ORDER BY queue_id FOR UPDATE;
  END IF;`)}
  -- Null delayed${fullOnly(' or shared')} columns: they stay as they are.
  IF p_expected IS NULL THEN
    INSERT INTO queues (queue_id, version, segment_size, buffer_segments, item_count, priorities, delayed_count, next_due_at, delayed_seq${fullOnly(`,
                        lock_mode, max_deliveries, dead_letter_queue, live_locks, locked_items, next_lock_expiry,
                        paused, retry_delay_seconds, retry_backoff, retry_delay_max_seconds, max_in_flight, max_pops_per_second,
                        pop_tokens, pop_tokens_at`)})
    VALUES (p_queue_id, p_version, p_segment_size, p_buffer_segments, p_item_count, p_priorities,
            coalesce(p_delayed_count, 0), to_timestamp(p_next_due / 1000.0), coalesce(p_delayed_seq, 0)${fullOnly(`,
            coalesce(p_lock_mode, 'exclusive'), p_max_deliveries, p_dead_letter_queue,
            coalesce(p_shared_live, 0), coalesce(p_shared_items, 0), to_timestamp(p_shared_next / 1000.0),
            coalesce(p_paused, false), coalesce(p_retry_delay, 0), coalesce(p_retry_backoff, 'exponential'), coalesce(p_retry_delay_max, 900),
            p_max_in_flight, p_max_pops, p_pop_tokens, p_pop_tokens_at`)})
    ON CONFLICT (queue_id) DO NOTHING;
  ELSIF p_delete THEN
    DELETE FROM queues WHERE queue_id = p_queue_id AND version = p_expected;
  ELSIF p_delayed_count IS NULL${fullOnly(' AND NOT p_settings AND p_shared_live IS NULL AND p_pop_tokens_at IS NULL')} THEN
    UPDATE queues SET version = p_version, item_count = p_item_count, priorities = p_priorities, updated_at = now()
     WHERE queue_id = p_queue_id AND version = p_expected;
  ELSE
    UPDATE queues SET version = p_version, item_count = p_item_count, priorities = p_priorities, updated_at = now(),
           delayed_count = CASE WHEN p_delayed_count IS NULL THEN delayed_count ELSE p_delayed_count END,
           next_due_at = CASE WHEN p_delayed_count IS NULL THEN next_due_at ELSE to_timestamp(p_next_due / 1000.0) END,
           delayed_seq = CASE WHEN p_delayed_count IS NULL THEN delayed_seq ELSE p_delayed_seq END${fullOnly(`,
           segment_size = CASE WHEN p_settings THEN p_segment_size ELSE segment_size END,
           buffer_segments = CASE WHEN p_settings THEN p_buffer_segments ELSE buffer_segments END,
           lock_mode = CASE WHEN p_settings THEN p_lock_mode ELSE lock_mode END,
           max_deliveries = CASE WHEN p_settings THEN p_max_deliveries ELSE max_deliveries END,
           dead_letter_queue = CASE WHEN p_settings THEN p_dead_letter_queue ELSE dead_letter_queue END,
           live_locks = CASE WHEN p_shared_live IS NULL THEN live_locks ELSE p_shared_live END,
           locked_items = CASE WHEN p_shared_live IS NULL THEN locked_items ELSE p_shared_items END,
           next_lock_expiry = CASE WHEN p_shared_live IS NULL THEN next_lock_expiry ELSE to_timestamp(p_shared_next / 1000.0) END,
           paused = CASE WHEN p_settings THEN p_paused ELSE paused END,
           retry_delay_seconds = CASE WHEN p_settings THEN p_retry_delay ELSE retry_delay_seconds END,
           retry_backoff = CASE WHEN p_settings THEN p_retry_backoff ELSE retry_backoff END,
           retry_delay_max_seconds = CASE WHEN p_settings THEN p_retry_delay_max ELSE retry_delay_max_seconds END,
           max_in_flight = CASE WHEN p_settings THEN p_max_in_flight ELSE max_in_flight END,
           max_pops_per_second = CASE WHEN p_settings THEN p_max_pops ELSE max_pops_per_second END,
           pop_tokens = CASE WHEN p_pop_tokens_at IS NULL THEN pop_tokens ELSE p_pop_tokens END,
           pop_tokens_at = CASE WHEN p_pop_tokens_at IS NULL THEN pop_tokens_at ELSE p_pop_tokens_at END`)}
     WHERE queue_id = p_queue_id AND version = p_expected;
  END IF;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  IF p_delete THEN
    DELETE FROM segment_items WHERE queue_id = p_queue_id;
    DELETE FROM queue_locks WHERE queue_id = p_queue_id;
    DELETE FROM offloaded_segments WHERE queue_id = p_queue_id;
    DELETE FROM delayed_items WHERE queue_id = p_queue_id;
    DELETE FROM dedup_ids WHERE queue_id = p_queue_id;
    DELETE FROM shared_locks WHERE queue_id = p_queue_id;
    DELETE FROM returned_items WHERE queue_id = p_queue_id;
    RETURN true;
  END IF;
  -- One index range per segment, never a join with the ranges: a join's plan may read every row
  -- of the queue (the dead rows a bulk load leaves included) when it was made while the table looked small.
  FOR i IN 1 .. coalesce(cardinality(p_del_priority), 0) LOOP
    DELETE FROM segment_items
     WHERE queue_id = p_queue_id AND priority = p_del_priority[i] AND segment = p_del_segment[i]
       AND position BETWEEN p_del_from[i] AND p_del_through[i];
  END LOOP;
  IF cardinality(p_ins_priority) > 0 THEN${fullOnly(`
    -- p_ins_deliveries, p_ins_from and p_ins_headers may be shorter (empty when no item was delivered, dead-lettered or has headers): unnest pads them with nulls.`)}
    INSERT INTO segment_items (queue_id, priority, segment, position, item${fullOnly(', deliveries, dead_lettered_from, headers')})
    SELECT p_queue_id, i.priority, i.segment, i.position, i.item${fullOnly(', coalesce(i.deliveries, 0), i.from_queue, i.headers')}
      FROM unnest(p_ins_priority, p_ins_segment, p_ins_position, p_ins_item${fullOnly(`, coalesce(p_ins_deliveries, '{}'), coalesce(p_ins_from, '{}'), coalesce(p_ins_headers, '{}')`)}) AS i(priority, segment, position, item${fullOnly(', deliveries, from_queue, headers')})${fullOnly(`
     WHERE i.priority IS NOT NULL`)};
  END IF;
  IF p_lock_op = 'upsert' THEN
    INSERT INTO queue_locks (queue_id, lock_id, state, priorities, items, created_at, expires_at${fullOnly(', segments, positions, deliveries, dead_lettered_from, headers')})
    VALUES (p_queue_id, p_lock_id, p_lock_state, p_lock_priorities, p_lock_items, to_timestamp(p_lock_created / 1000.0), to_timestamp(p_lock_expires / 1000.0)${fullOnly(`,
            p_lock_segments, p_lock_positions, p_lock_deliveries, p_lock_from, p_lock_headers`)})
    ON CONFLICT (queue_id) DO UPDATE SET lock_id = EXCLUDED.lock_id, state = EXCLUDED.state, priorities = EXCLUDED.priorities,
      items = EXCLUDED.items, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at${fullOnly(`,
      segments = EXCLUDED.segments, positions = EXCLUDED.positions, deliveries = EXCLUDED.deliveries, dead_lettered_from = EXCLUDED.dead_lettered_from,
      headers = EXCLUDED.headers`)};
  ELSIF p_lock_op = 'delete' THEN
    DELETE FROM queue_locks WHERE queue_id = p_queue_id;
  END IF;
  FOR i IN 1 .. coalesce(cardinality(p_save_keys), 0) LOOP
    INSERT INTO offloaded_segments (queue_id, key, items${fullOnly(', dead_lettered_from, headers')})
    VALUES (p_queue_id, p_save_keys[i], p_save_items[v_from : v_from + p_save_lengths[i] - 1]${fullOnly(`,
            CASE WHEN cardinality(p_save_from) > 0 THEN p_save_from[v_from : v_from + p_save_lengths[i] - 1] END,
            CASE WHEN cardinality(p_save_headers) > 0 THEN p_save_headers[v_from : v_from + p_save_lengths[i] - 1] END`)})
    ON CONFLICT (queue_id, key) DO UPDATE SET items = EXCLUDED.items, created_at = now()${fullOnly(', dead_lettered_from = EXCLUDED.dead_lettered_from, headers = EXCLUDED.headers')};
    v_from := v_from + p_save_lengths[i];
  END LOOP;
  IF cardinality(p_delete_keys) > 0 THEN
    DELETE FROM offloaded_segments WHERE queue_id = p_queue_id AND key = ANY(p_delete_keys);
  END IF;
  -- Due items moved to the segments above: always a prefix of the queue's delayed items in (due_at, seq) order.
  IF p_dl_through_due IS NOT NULL THEN
    DELETE FROM delayed_items
     WHERE queue_id = p_queue_id AND (due_at, seq) <= (to_timestamp(p_dl_through_due / 1000.0), p_dl_through_seq);
  END IF;
  IF cardinality(p_dl_due) > 0 THEN
    INSERT INTO delayed_items (queue_id, due_at, seq, priority, item${fullOnly(', origin_segment, origin_position, deliveries, dead_lettered_from, headers')})
    SELECT p_queue_id, to_timestamp(d.due / 1000.0), d.seq, d.priority, d.item${fullOnly(', d.segment, d.position, d.deliveries, d.from_queue, d.headers')}
      FROM unnest(p_dl_due, p_dl_seq, p_dl_priority, p_dl_item${fullOnly(`, coalesce(p_dl_segment, '{}'), coalesce(p_dl_position, '{}'), coalesce(p_dl_deliveries, '{}'), coalesce(p_dl_from, '{}'),
                  coalesce(p_dl_headers, '{}')`)})
           AS d(due, seq, priority, item${fullOnly(', segment, position, deliveries, from_queue, headers')})${fullOnly(`
     WHERE d.due IS NOT NULL`)};
  END IF;
  -- An expired id the sweep has not deleted yet is replaced.
  IF cardinality(p_dedup_ids) > 0 THEN
    INSERT INTO dedup_ids (queue_id, dedup_id, expires_at)
    SELECT p_queue_id, d.id, to_timestamp(d.expires / 1000.0) FROM unnest(p_dedup_ids, p_dedup_expires) AS d(id, expires)
    ON CONFLICT (queue_id, dedup_id) DO UPDATE SET expires_at = EXCLUDED.expires_at;
  END IF;${fullOnly(`
  IF cardinality(p_sl_deletes) > 0 THEN
    DELETE FROM shared_locks WHERE queue_id = p_queue_id AND lock_id = ANY(p_sl_deletes);
  END IF;
  -- The shared locks written: a row each (an array), or {"locks": [a row each], "single": {"ids": [...], ...}} where single
  -- holds the locks the turn created with one item each as parallel arrays (read in about 40% less time than as rows).
  v_sl_rows := CASE WHEN jsonb_typeof(p_sl_upserts) = 'object' THEN p_sl_upserts->'locks' ELSE p_sl_upserts END;
  IF jsonb_array_length(coalesce(v_sl_rows, '[]')) > 0 THEN
    -- Locks the turn created (fresh) have no row: a plain insert, a fifth cheaper than one looking for a conflict.
    WITH l AS (
      SELECT * FROM jsonb_to_recordset(v_sl_rows) AS l(id varchar, fresh boolean, state varchar, priorities integer[], segments bigint[], positions integer[],
                                                          items text[], deliveries integer[], from_queues varchar[], headers text[],
                                                          created double precision, expires double precision)
    ), created AS (
      ${SHARED_LOCK_ROWS} WHERE l.fresh
    )
    ${SHARED_LOCK_ROWS} WHERE l.fresh IS NOT TRUE
    ON CONFLICT (queue_id, lock_id) DO UPDATE SET state = EXCLUDED.state, priorities = EXCLUDED.priorities, segments = EXCLUDED.segments,
      positions = EXCLUDED.positions, items = EXCLUDED.items, deliveries = EXCLUDED.deliveries, dead_lettered_from = EXCLUDED.dead_lettered_from,
      headers = EXCLUDED.headers, expires_at = EXCLUDED.expires_at;
  END IF;
  IF jsonb_typeof(p_sl_upserts) = 'object' THEN
    INSERT INTO shared_locks (queue_id, lock_id, state, priorities, segments, positions, items, deliveries, dead_lettered_from, headers, created_at, expires_at)
    SELECT p_queue_id, u.id, 'active', ARRAY[u.priority], ARRAY[u.segment], ARRAY[u.position], ARRAY[u.item], ARRAY[u.deliveries],
           CASE WHEN u.from_queue IS NOT NULL THEN ARRAY[u.from_queue] END, CASE WHEN u.header IS NOT NULL THEN ARRAY[u.header] END,
           to_timestamp(u.created / 1000.0), to_timestamp(u.expires / 1000.0)
      FROM jsonb_to_record(p_sl_upserts->'single') AS s(ids varchar[], priorities integer[], segments bigint[], positions integer[], items text[],
                                                       deliveries integer[], from_queues varchar[], headers text[], created double precision[], expires double precision[]),
           unnest(s.ids, s.priorities, s.segments, s.positions, s.items, s.deliveries, coalesce(s.from_queues, '{}'), coalesce(s.headers, '{}'), s.created, s.expires)
             AS u(id, priority, segment, position, item, deliveries, from_queue, header, created, expires);
  END IF;
  IF cardinality(p_retdel_priority) > 0 THEN
    DELETE FROM returned_items r
     USING unnest(p_retdel_priority, p_retdel_segment, p_retdel_position) AS d(priority, segment, position)
     WHERE r.queue_id = p_queue_id AND r.priority = d.priority AND r.segment = d.segment AND r.position = d.position;
  END IF;
  IF cardinality(p_ret_priority) > 0 THEN
    INSERT INTO returned_items (queue_id, priority, segment, position, item, deliveries, dead_lettered_from, headers)
    SELECT p_queue_id, r.priority, r.segment, r.position, r.item, r.deliveries, r.from_queue, r.headers
      FROM unnest(p_ret_priority, p_ret_segment, p_ret_position, p_ret_item, p_ret_deliveries, coalesce(p_ret_from, '{}'), coalesce(p_ret_headers, '{}'))
           AS r(priority, segment, position, item, deliveries, from_queue, headers)
     WHERE r.priority IS NOT NULL;
  END IF;
  -- Dead letters: due at once on the dead-letter queue (created if need be), whose version moves on.
  IF p_dlq_id IS NOT NULL AND cardinality(p_dlq_item) > 0 THEN
    INSERT INTO queues (queue_id, version, segment_size, buffer_segments, item_count, priorities, delayed_count, next_due_at, delayed_seq)
    VALUES (p_dlq_id, p_dlq_version, p_dlq_segment_size, p_dlq_buffer_segments, 0, '{}', cardinality(p_dlq_item), to_timestamp(p_now / 1000.0), cardinality(p_dlq_item))
    ON CONFLICT (queue_id) DO UPDATE SET version = queues.version + 1, updated_at = now(),
      delayed_count = queues.delayed_count + EXCLUDED.delayed_count,
      next_due_at = least(coalesce(queues.next_due_at, EXCLUDED.next_due_at), EXCLUDED.next_due_at),
      delayed_seq = queues.delayed_seq + EXCLUDED.delayed_seq
    RETURNING delayed_seq INTO v_seq;
    INSERT INTO delayed_items (queue_id, due_at, seq, priority, item, dead_lettered_from, headers)
    SELECT p_dlq_id, to_timestamp(p_now / 1000.0), v_seq - cardinality(p_dlq_item) + d.ord - 1, d.priority, d.item, p_queue_id, d.headers
      FROM unnest(p_dlq_priority, p_dlq_item, coalesce(p_dlq_headers, '{}')) WITH ORDINALITY AS d(priority, item, headers, ord)
     WHERE d.item IS NOT NULL;
  END IF;
  -- Redriven items: due at once on their destinations (each created if need be, its version moving on), in the order given.
  IF cardinality(p_rd_queue) > 0 THEN
    FOR v_dest, v_n IN SELECT d.q, count(*) FROM unnest(p_rd_queue) AS d(q) GROUP BY d.q LOOP
      INSERT INTO queues (queue_id, version, segment_size, buffer_segments, item_count, priorities, delayed_count, next_due_at, delayed_seq)
      VALUES (v_dest, p_dlq_version, p_dlq_segment_size, p_dlq_buffer_segments, 0, '{}', v_n, to_timestamp(p_now / 1000.0), v_n)
      ON CONFLICT (queue_id) DO UPDATE SET version = queues.version + 1, updated_at = now(),
        delayed_count = queues.delayed_count + EXCLUDED.delayed_count,
        next_due_at = least(coalesce(queues.next_due_at, EXCLUDED.next_due_at), EXCLUDED.next_due_at),
        delayed_seq = queues.delayed_seq + EXCLUDED.delayed_seq
      RETURNING delayed_seq INTO v_seq;
      INSERT INTO delayed_items (queue_id, due_at, seq, priority, item, headers)
      SELECT v_dest, to_timestamp(p_now / 1000.0), v_seq - v_n + row_number() OVER (ORDER BY d.ord) - 1, d.priority, d.item, d.headers
        FROM unnest(p_rd_queue, p_rd_priority, p_rd_item, coalesce(p_rd_headers, '{}')) WITH ORDINALITY AS d(q, priority, item, headers, ord)
       WHERE d.q = v_dest;
    END LOOP;
  END IF;`)}
  RETURN true;
END
`;
}

/** A parameter's `unset` as SQL. */
function literal(p: WriteTurnParameter): string {
  if (p.unset === undefined) throw new Error(`${p.name} has no value to stand for it`);
  if (p.unset === null) return 'NULL';
  if (typeof p.unset === 'string') return `'${p.unset.replace(/'/g, "''")}'`;
  if (p.unset === false) return 'false';
  if (typeof p.unset === 'number') return String(p.unset);
  return `'{}'`;
}

const declare = (form: 'short' | 'latest', summary: string, body: string): DatabaseFunction => ({
  name: 'pushpop_write_turn',
  summary,
  parameters: parametersOf(form).map(({ name, type }) => ({ name, type })),
  returns: 'boolean',
  language: 'plpgsql',
  body,
});

/** The form with every parameter. */
export const WRITE_TURN_FULL = declare(
  'latest',
  'The form with every parameter: what a turn calls when it writes anything beyond the short form.',
  writeTurnBody(true),
);
/** The short form; see {@link writeTurnBody}. */
export const WRITE_TURN_SHORT = declare(
  'short',
  'The short form: the full body without what only the longer forms bring. What most turns (pushes, pops, acknowledgements) call.',
  writeTurnBody(false),
);

/**
 * The third release's full form: the latest one with no item headers. A process of that release
 * calls it during a rolling upgrade; the items it writes have no headers (it knows nothing of
 * them). A wrapper passing its own parameters on, and "nothing to write" for the others (each
 * named beside its value).
 */
export const WRITE_TURN_THIRD: DatabaseFunction = (() => {
  const own = parametersOf('third');
  const given = own.map((p) => p.name);
  const lines: string[] = [];
  for (let i = 0; i < given.length; i += 8) lines.push(`    ${given.slice(i, i + 8).join(', ')},`);
  const rest = parametersOf('latest').slice(own.length);
  rest.forEach((p, i) => lines.push(`    ${literal(p)}${i < rest.length - 1 ? ',' : ''} -- ${p.name}`));
  return {
    name: 'pushpop_write_turn',
    summary: "The third release's form with every parameter (no item headers), kept for its processes during a rolling upgrade.",
    parameters: own.map(({ name, type }) => ({ name, type })),
    returns: 'boolean',
    language: 'sql',
    body: `\n  SELECT pushpop_write_turn(\n${lines.join('\n')}\n  )\n`,
  };
})();
