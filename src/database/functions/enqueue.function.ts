import type { DatabaseFunction } from './database-function.js';

/**
 * `pushpop_enqueue(queue_id, item, priority, delay_seconds, dedup_id, headers)`: an application
 * that shares pushpop's database enqueues inside its own transaction. The call only checks its
 * arguments as an HTTP push does and adds a row to `enqueued_items`; the service carries
 * committed rows into their queues (src/enqueue, docs/architecture.md "Enqueue from SQL").
 *
 * What the caller's transaction pays: its checks (the limits are constants folded into its plan,
 * see enqueue-limits.function.ts), one insert (one index), and on its first call one more insert
 * at commit (below). It takes no lock shared by all queues and sends
 * no `NOTIFY` per call (a `NOTIFY` holds a lock of the whole server until its commit is flushed:
 * every notifying commit would wait for every other one; the trigger below sends one only to
 * wake idle carriers). The depth of an item is looked at only when its stored form is large
 * enough to nest 65 levels (a `jsonb` that does takes at least 520 bytes) or compressed.
 *
 * **Commit order.** The first row a transaction adds has `opens`: the deferred constraint
 * trigger on it ({@link ENQUEUE_COMMITTED}) runs at the transaction's `COMMIT` and records the
 * transaction in `enqueue_commits` with the next `commit_seq`. Numbers taken at commit follow
 * the order transactions commit in (one that committed before another's `COMMIT` began always
 * has the smaller number), whatever order they called the function in; the carrier moves rows
 * by `commit_seq`, then by `seq` (call order) within a transaction. Which transaction opened is
 * kept in a transaction-local setting, so it is undone with a savepoint that is rolled back
 * (together with the row and its trigger event), and the next call opens again.
 *
 * `SECURITY DEFINER` with its `search_path` pinned to pushpop's schema (then `pg_temp`): a role
 * granted only `EXECUTE` (and `USAGE` on the schema) enqueues and can read or change nothing.
 */
export const PUSHPOP_ENQUEUE: DatabaseFunction = {
  name: 'pushpop_enqueue',
  summary: "Adds an item to a queue inside the caller's own transaction: it becomes poppable once that transaction commits, in commit order.",
  parameters: [
    { name: 'queue_id', type: 'text' },
    { name: 'item', type: 'jsonb' },
    { name: 'priority', type: 'integer', default: '0' },
    { name: 'delay_seconds', type: 'integer', default: '0' },
    { name: 'dedup_id', type: 'text', default: 'NULL::text' },
    { name: 'headers', type: 'jsonb', default: 'NULL::jsonb' },
  ],
  returns: 'bigint',
  language: 'plpgsql',
  securityDefiner: true,
  body: `
#variable_conflict use_variable
DECLARE
  v_max_bytes integer;
  v_max_priority integer;
  v_text text;
  v_bytes integer;
  v_xid xid8 := pg_current_xact_id();
  v_tag text;
  v_opens boolean;
  v_header record;
  v_seq bigint;
BEGIN
  -- Lengths apart from the pattern: a bounded repetition ({1,200}) costs PostgreSQL's regex engine about 0.3 ms a match.
  IF queue_id IS NULL OR queue_id !~ '^[A-Za-z0-9._:@-]+$' OR octet_length(queue_id) > 200 OR queue_id IN ('.', '..') THEN
    RAISE EXCEPTION 'pushpop_enqueue: queue_id must be 1-200 characters of A-Z a-z 0-9 . _ : @ - (and not . or ..)' USING ERRCODE = '22023';
  END IF;
  v_max_bytes := pushpop_enqueue_max_item_bytes();
  v_max_priority := pushpop_enqueue_max_priority();
  IF item IS NULL OR jsonb_typeof(item) <> 'object' THEN
    RAISE EXCEPTION 'pushpop_enqueue: item must be a JSON object' USING ERRCODE = '22023';
  END IF;
  v_text := item::text;
  -- An item nested deeper than 64 levels takes at least 520 bytes uncompressed, and has at least 65 brackets (cheap tests first).
  IF (pg_column_size(item) >= 520 OR pg_column_compression(item) IS NOT NULL)
     AND length(v_text) - length(translate(v_text, '{[', '')) > 64
     AND jsonb_path_exists(item, 'strict $.**{64} ? (@.type() == "object" || @.type() == "array")') THEN
    RAISE EXCEPTION 'pushpop_enqueue: item must not nest deeper than 64 levels' USING ERRCODE = '22023';
  END IF;
  v_bytes := octet_length(v_text);
  IF v_bytes > v_max_bytes THEN
    -- The text form has a space after every separator; the item is measured as compact JSON, as over HTTP.
    SELECT v_bytes - coalesce(sum(CASE WHEN n = 0 THEN 0 WHEN t = 'object' THEN 2 * n - 1 ELSE n - 1 END), 0) INTO v_bytes
      FROM (SELECT jsonb_typeof(v) AS t,
                   CASE jsonb_typeof(v) WHEN 'object' THEN (SELECT count(*) FROM jsonb_object_keys(v)) WHEN 'array' THEN jsonb_array_length(v) ELSE 0 END AS n
              FROM jsonb_path_query(item, 'strict $.**') AS v) AS containers;
    IF v_bytes > v_max_bytes THEN
      RAISE EXCEPTION 'pushpop_enqueue: item must be at most % bytes of JSON (it is %)', v_max_bytes, v_bytes USING ERRCODE = '22023';
    END IF;
  END IF;
  IF priority IS NULL OR priority < 0 OR priority > v_max_priority THEN
    RAISE EXCEPTION 'pushpop_enqueue: priority must be an integer from 0 to %', v_max_priority USING ERRCODE = '22023';
  END IF;
  IF delay_seconds IS NULL OR delay_seconds < 0 OR delay_seconds > 31536000 THEN
    RAISE EXCEPTION 'pushpop_enqueue: delay_seconds must be an integer from 0 to 31536000' USING ERRCODE = '22023';
  END IF;
  IF dedup_id IS NOT NULL AND (dedup_id !~ '^[A-Za-z0-9._:@-]+$' OR octet_length(dedup_id) > 128) THEN
    RAISE EXCEPTION 'pushpop_enqueue: dedup_id must be 1-128 characters of A-Z a-z 0-9 . _ : @ -' USING ERRCODE = '22023';
  END IF;
  IF headers IS NOT NULL THEN
    IF jsonb_typeof(headers) <> 'object' THEN
      RAISE EXCEPTION 'pushpop_enqueue: headers must be an object of string values' USING ERRCODE = '22023';
    END IF;
    IF (SELECT count(*) FROM jsonb_object_keys(headers)) > 16 THEN
      RAISE EXCEPTION 'pushpop_enqueue: headers must have at most 16 entries' USING ERRCODE = '22023';
    END IF;
    FOR v_header IN SELECT key, value FROM jsonb_each(headers) LOOP
      IF v_header.key !~ '^[A-Za-z0-9._-]+$' OR octet_length(v_header.key) > 64 THEN
        RAISE EXCEPTION 'pushpop_enqueue: headers name % must be 1-64 characters of A-Z a-z 0-9 . _ -', to_jsonb(left(v_header.key, 80)) USING ERRCODE = '22023';
      END IF;
      IF jsonb_typeof(v_header.value) <> 'string' THEN
        RAISE EXCEPTION 'pushpop_enqueue: headers.% must be a string', v_header.key USING ERRCODE = '22023';
      END IF;
      IF char_length(v_header.value #>> '{}') > 1024 THEN
        RAISE EXCEPTION 'pushpop_enqueue: headers.% must be at most 1024 characters', v_header.key USING ERRCODE = '22023';
      END IF;
    END LOOP;
  END IF;
  -- The transaction's first row in this schema opens it (see the declaration's comment).
  v_tag := v_xid::text || ' ' || current_schema();
  v_opens := current_setting('pushpop.enqueue_opened', true) IS DISTINCT FROM v_tag;
  IF v_opens THEN
    PERFORM set_config('pushpop.enqueue_opened', v_tag, true);
  END IF;
  INSERT INTO enqueued_items (xid, queue_id, item, priority, deliver_at, dedup_id, headers, opens)
  VALUES (v_xid, queue_id, item, priority,
          CASE WHEN delay_seconds > 0 THEN clock_timestamp() + make_interval(secs => delay_seconds) END,
          dedup_id, headers, v_opens)
  RETURNING seq INTO v_seq;
  RETURN v_seq;
END;
`,
};

/**
 * The advisory lock (two keys, of the schema) every commit that enqueued holds shared from its
 * commit trigger until it is visible; a carrier takes it exclusively, without waiting, before it
 * stops (see {@link ENQUEUE_COMMITTED}).
 */
export const ENQUEUE_GATE = `hashtext('pushpop_enqueue_gate'), hashtext(current_schema())`;

/**
 * The deferred constraint trigger on the row that opens a transaction's rows: it runs as the
 * transaction commits and gives it its `commit_seq` (see {@link PUSHPOP_ENQUEUE}). It runs in
 * the caller's session after `pushpop_enqueue` returned, hence `SECURITY DEFINER` as well.
 *
 * **Wake-ups.** It wakes the carriers only when no other committed transaction waits to be
 * carried: a `NOTIFY` on the schema's items channel (the one `ItemNotifications` listens on, its
 * name computed as `itemsChannel` does) with the payload {@link ENQUEUE_WAKE}. A `NOTIFY` holds a
 * lock of the whole server until its commit is flushed (every notifying commit waits for the one
 * before), so a busy stream of commits must not send one each: while transactions wait, a
 * carrier is at work and carries again after each carriage that found rows (`EnqueueCarrier`).
 *
 * What keeps that from losing a commit: the transaction numbers itself first and looks for
 * others after, so a transaction that sees another waiting was numbered before that one's rows
 * were deleted, by a carriage after which its carrier looks again. A commit still under way
 * then (numbered, not visible yet) holds {@link ENQUEUE_GATE} shared until it is visible; a
 * carrier stops only when it gets that lock exclusively and then finds nothing. The shared lock
 * never makes two commits wait for each other.
 */
export const ENQUEUE_COMMITTED: DatabaseFunction = {
  name: 'pushpop_enqueue_committed',
  summary: 'Numbers a transaction that called pushpop_enqueue as it commits (a deferred trigger), and wakes the carriers when none was waiting.',
  parameters: [],
  returns: 'trigger',
  language: 'plpgsql',
  securityDefiner: true,
  body: `
BEGIN
  PERFORM pg_advisory_xact_lock_shared(${ENQUEUE_GATE});
  INSERT INTO enqueue_commits (xid) VALUES (NEW.xid) ON CONFLICT (xid) DO NOTHING;
  -- Another transaction waits if one of the two newest rows is not this one's: read from the end of the
  -- commit_seq index, where rows are live (carriages delete from the other end and leave dead rows there).
  IF NOT EXISTS (SELECT 1 FROM (SELECT xid FROM enqueue_commits ORDER BY commit_seq DESC LIMIT 2) AS newest WHERE newest.xid <> NEW.xid) THEN
    PERFORM pg_notify(CASE WHEN current_schema() = 'public' THEN 'pushpop_items'
                           WHEN octet_length('pushpop_items.' || current_schema()) <= 63 THEN 'pushpop_items.' || current_schema()
                           ELSE 'pushpop_items.' || md5(current_schema()) END, ' enqueue');
  END IF;
  RETURN NULL;
END;
`,
};

/**
 * The payload of the carriers' wake-up on the items channel: never a queue id (it starts with a
 * space), nor a queue's state (those start with `{`).
 */
export const ENQUEUE_WAKE = ' enqueue';
