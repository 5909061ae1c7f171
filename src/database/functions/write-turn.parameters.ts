import type { HeldItem, LockState } from '../../queue/core/types.js';
import type { StoredTurnWrite } from '../stored-queue.js';

/**
 * The forms of `pushpop_write_turn` this release declares, each taking the parameters of the one
 * before and more:
 *
 * - `short`: what most turns write (items, the exclusive lock, offloaded segments, delayed items,
 *   dedup ids). Fewer parameters to bind and a smaller body: PostgreSQL spends about a fifth less
 *   on a push than through the form with every parameter. The previous release calls it too;
 * - `third`: everything of the third release (the previous one): settings and controls, shared
 *   locks, given-back items, dead letters and where they came from, redriven items. Still
 *   callable by a process of that release during a rolling upgrade (a wrapper over `latest`);
 * - `latest`: everything: item headers too.
 *
 * Older forms (the first release's 27 parameters, the second's 66) were dropped by
 * `DropOldWriteTurnForms1764100000013`: a release upgrades only from the one before it (see
 * docs/operations.md, Upgrades).
 *
 * A write that gives none of the parameters beyond `short` takes the short form; otherwise the
 * form with every parameter (`latest`).
 */
export type WriteTurnForm = 'short' | 'third' | 'latest';

/** One parameter of `pushpop_write_turn`: its SQL name and type, the form that brings it, and its value. */
export interface WriteTurnParameter {
  readonly name: string;
  readonly type: string;
  readonly form: WriteTurnForm;
  /**
   * The value a turn's write binds. For a parameter beyond `short`: undefined when the write
   * gives it nothing, and the statement needs the form with every parameter as soon as one of
   * them is given.
   */
  readonly value: (write: StoredTurnWrite, queueId: string) => unknown;
  /**
   * For a parameter beyond `short`: what it is when not given (bound by the form with every
   * parameter, and passed by the third release's wrapper for the parameters it lacks), meaning
   * "nothing to write".
   */
  readonly unset?: null | false | string | number | readonly never[];
}

const NONE: readonly never[] = Object.freeze([]);

/**
 * What a turn binds for a parameter beyond `short` that its write does not give: `unset`, except
 * that an empty list is bound as null. The function reads every such list through `cardinality`,
 * `coalesce` or `unnest`, where null and an empty list are alike, and a null costs nothing to
 * bind or to parse (a shared queue's turn leaves about thirty of them empty). The SQL wrapper of
 * the third release passes `unset` itself.
 */
export function unsetBinding(p: WriteTurnParameter): unknown {
  return Array.isArray(p.unset) && p.unset.length === 0 ? null : p.unset;
}

/** The exclusive lock a write saves, if any. */
const savedLock = (w: StoredTurnWrite): LockState | undefined => (w.lock?.op === 'upsert' ? w.lock.lock : undefined);
/** The settings columns are written when the queue is created or its settings change; otherwise the statement leaves them. */
const writesSettings = (w: StoredTurnWrite): boolean => w.expectedVersion === null || w.settingsChanged === true;
/** `list.map(f)`, or undefined for an empty list (a full-only parameter not given). */
const mapped = <T, R>(list: readonly T[], f: (t: T) => R): R[] | undefined => (list.length > 0 ? list.map(f) : undefined);
/**
 * `list.map(f)`, or null for an empty list: for the short form's lists, which the function reads
 * only through `cardinality` (null and empty alike: nothing to write). A null costs nothing to
 * bind and nothing to parse, where `'{}'` costs both, for the dozen and a half lists a turn
 * mostly leaves empty.
 */
const listOf = <T, R>(list: readonly T[], f: (t: T) => R): R[] | null => mapped(list, f) ?? null;
/** The queue each row was dead-lettered from (null: never), or undefined when none was (a full-only parameter not given). */
const fromOf = (rows: readonly { readonly from?: string }[]): (string | null)[] | undefined =>
  rows.some((r) => r.from !== undefined) ? rows.map((r) => r.from ?? null) : undefined;
/** Each row's headers (null: none), or undefined when none has any (a full-only parameter not given). */
const headersOf = (rows: readonly { readonly headers?: string }[]): (string | null)[] | undefined =>
  rows.some((r) => r.headers !== undefined) ? rows.map((r) => r.headers ?? null) : undefined;
const heldBy = (lock: LockState | undefined, f: (item: HeldItem) => unknown): unknown[] | undefined => lock?.items.map(f);

/**
 * `p_sl_upserts`: the shared locks a turn writes, as JSON. The locks it created with one item
 * each (a pop's per-item locks) go as one object of parallel arrays (`single`): PostgreSQL reads
 * a hundred of them in about 40% less time than as a row each (`jsonb_to_recordset` makes each
 * row's five arrays). The others (extended, expired, created with several items) as a row each
 * (`locks`), those the turn created marked `fresh` (inserted without a conflict check). Without
 * any `single` lock, the array of rows alone, as the previous release sends it.
 */
function sharedLockUpserts(w: StoredTurnWrite): string | undefined {
  if (w.sharedLockUpserts.length === 0) return undefined;
  const locks: object[] = [];
  const ids: string[] = [];
  const priorities: number[] = [];
  const segments: number[] = [];
  const positions: number[] = [];
  const items: string[] = [];
  const deliveries: number[] = [];
  const created: number[] = [];
  const expires: number[] = [];
  // Null for a lock without one, given only when one has one (as the rows' columns).
  let fromQueues: (string | null)[] | undefined;
  let headers: (string | null)[] | undefined;
  for (const l of w.sharedLockUpserts) {
    const fresh = w.sharedLocksCreated?.has(l.lockId) === true;
    if (fresh && l.state === 'active' && l.items.length === 1) {
      const [i] = l.items;
      if (i.from !== undefined) fromQueues ??= ids.map(() => null);
      if (i.headers !== undefined) headers ??= ids.map(() => null);
      fromQueues?.push(i.from ?? null);
      headers?.push(i.headers ?? null);
      ids.push(l.lockId);
      priorities.push(i.priority);
      segments.push(i.origin?.segment ?? 0);
      positions.push(i.origin?.position ?? 0);
      items.push(i.json);
      deliveries.push(i.deliveries ?? 1);
      created.push(l.createdAt);
      expires.push(l.expiresAt);
      continue;
    }
    locks.push({
      id: l.lockId,
      ...(fresh ? { fresh: true } : {}),
      state: l.state,
      priorities: l.items.map((i) => i.priority),
      segments: l.items.map((i) => i.origin?.segment ?? 0),
      positions: l.items.map((i) => i.origin?.position ?? 0),
      items: l.items.map((i) => i.json),
      deliveries: l.items.map((i) => i.deliveries ?? 1),
      // undefined when no item has one: JSON.stringify leaves the key out
      from_queues: fromOf(l.items),
      headers: headersOf(l.items),
      created: l.createdAt,
      expires: l.expiresAt,
    });
  }
  if (ids.length === 0) return JSON.stringify(locks);
  const single = {
    ids,
    priorities,
    segments,
    positions,
    items,
    deliveries,
    ...(fromQueues ? { from_queues: fromQueues } : {}),
    ...(headers ? { headers } : {}),
    created,
    expires,
  };
  return JSON.stringify({ locks, single });
}

/**
 * Every parameter of `pushpop_write_turn`, once, in the order of the full form's signature (each
 * form takes the ones of its own and shorter forms, in this order). The function's signatures
 * in SQL and the values a turn binds are both built from this table (the latter by
 * `write-turn.values.ts`, generated from it): nothing else lists them.
 */
export const WRITE_TURN_PARAMETERS: readonly WriteTurnParameter[] = [
  // The queue row, guarded by its version.
  { name: 'p_queue_id', type: 'varchar', form: 'short', value: (_, queueId) => queueId },
  { name: 'p_expected', type: 'bigint', form: 'short', value: (w) => w.expectedVersion },
  { name: 'p_version', type: 'bigint', form: 'short', value: (w) => w.newVersion },
  { name: 'p_delete', type: 'boolean', form: 'short', value: (w) => w.deleteQueue },
  { name: 'p_segment_size', type: 'integer', form: 'short', value: (w) => w.settings.segmentSize },
  { name: 'p_buffer_segments', type: 'integer', form: 'short', value: (w) => w.settings.bufferSegments },
  { name: 'p_item_count', type: 'bigint', form: 'short', value: (w) => w.itemCount },
  { name: 'p_priorities', type: 'jsonb', form: 'short', value: (w) => JSON.stringify(w.priorities) },
  // Segment rows deleted (position ranges) and inserted.
  { name: 'p_del_priority', type: 'integer[]', form: 'short', value: (w) => listOf(w.deletes, (d) => d.priority) },
  { name: 'p_del_segment', type: 'bigint[]', form: 'short', value: (w) => listOf(w.deletes, (d) => d.segment) },
  { name: 'p_del_from', type: 'integer[]', form: 'short', value: (w) => listOf(w.deletes, (d) => d.from) },
  { name: 'p_del_through', type: 'integer[]', form: 'short', value: (w) => listOf(w.deletes, (d) => d.through) },
  { name: 'p_ins_priority', type: 'integer[]', form: 'short', value: (w) => listOf(w.inserts, (i) => i.priority) },
  { name: 'p_ins_segment', type: 'bigint[]', form: 'short', value: (w) => listOf(w.inserts, (i) => i.segment) },
  { name: 'p_ins_position', type: 'integer[]', form: 'short', value: (w) => listOf(w.inserts, (i) => i.position) },
  { name: 'p_ins_item', type: 'text[]', form: 'short', value: (w) => listOf(w.inserts, (i) => i.json) },
  // The exclusive lock: 'upsert', 'delete' or null (unchanged).
  { name: 'p_lock_op', type: 'text', form: 'short', value: (w) => w.lock?.op ?? null },
  { name: 'p_lock_id', type: 'varchar', form: 'short', value: (w) => savedLock(w)?.lockId ?? null },
  { name: 'p_lock_state', type: 'varchar', form: 'short', value: (w) => savedLock(w)?.state ?? null },
  { name: 'p_lock_priorities', type: 'integer[]', form: 'short', value: (w) => heldBy(savedLock(w), (i) => i.priority) ?? null },
  { name: 'p_lock_items', type: 'text[]', form: 'short', value: (w) => heldBy(savedLock(w), (i) => i.json) ?? null },
  { name: 'p_lock_created', type: 'double precision', form: 'short', value: (w) => savedLock(w)?.createdAt ?? null },
  { name: 'p_lock_expires', type: 'double precision', form: 'short', value: (w) => savedLock(w)?.expiresAt ?? null },
  // Rows of the in-database offload store: segments saved (items concatenated, with their counts) and deleted.
  { name: 'p_save_keys', type: 'varchar[]', form: 'short', value: (w) => listOf(w.storeSaves, (s) => s.key) },
  { name: 'p_save_lengths', type: 'integer[]', form: 'short', value: (w) => listOf(w.storeSaves, (s) => s.items.length) },
  { name: 'p_save_items', type: 'text[]', form: 'short', value: (w) => (w.storeSaves.length > 0 ? w.storeSaves.flatMap((s) => s.items) : null) },
  { name: 'p_delete_keys', type: 'varchar[]', form: 'short', value: (w) => (w.storeDeletes.length > 0 ? w.storeDeletes : null) },
  // The delayed columns (null: they stay as they are), delayed items added, due ones deleted, dedup ids.
  { name: 'p_delayed_count', type: 'bigint', form: 'short', value: (w) => w.delayed?.count ?? null },
  { name: 'p_next_due', type: 'double precision', form: 'short', value: (w) => w.delayed?.nextDueAt ?? null },
  { name: 'p_delayed_seq', type: 'bigint', form: 'short', value: (w) => w.delayed?.nextSeq ?? null },
  { name: 'p_dl_due', type: 'double precision[]', form: 'short', value: (w) => listOf(w.delayedInserts, (d) => d.dueAt) },
  { name: 'p_dl_seq', type: 'bigint[]', form: 'short', value: (w) => listOf(w.delayedInserts, (d) => d.seq) },
  { name: 'p_dl_priority', type: 'integer[]', form: 'short', value: (w) => listOf(w.delayedInserts, (d) => d.priority) },
  { name: 'p_dl_item', type: 'text[]', form: 'short', value: (w) => listOf(w.delayedInserts, (d) => d.json) },
  { name: 'p_dl_through_due', type: 'double precision', form: 'short', value: (w) => w.delayedDeleteThrough?.dueAt ?? null },
  { name: 'p_dl_through_seq', type: 'bigint', form: 'short', value: (w) => w.delayedDeleteThrough?.seq ?? null },
  { name: 'p_dedup_ids', type: 'varchar[]', form: 'short', value: (w) => listOf(w.dedupInserts, (d) => d.dedupId) },
  { name: 'p_dedup_expires', type: 'double precision[]', form: 'short', value: (w) => listOf(w.dedupInserts, (d) => d.expiresAt) },
  // Settings (p_settings: written; a created queue gets them anyway).
  { name: 'p_settings', type: 'boolean', form: 'third', unset: false, value: (w) => (w.settingsChanged === true ? true : undefined) },
  {
    name: 'p_lock_mode',
    type: 'text',
    form: 'third',
    unset: 'exclusive',
    value: (w) => (writesSettings(w) && (w.settings.lockMode ?? 'exclusive') !== 'exclusive' ? w.settings.lockMode : undefined),
  },
  {
    name: 'p_max_deliveries',
    type: 'integer',
    form: 'third',
    unset: null,
    value: (w) => (writesSettings(w) ? (w.settings.maxDeliveries ?? undefined) : undefined),
  },
  {
    name: 'p_dead_letter_queue',
    type: 'varchar',
    form: 'third',
    unset: null,
    value: (w) => (writesSettings(w) ? (w.settings.deadLetterQueue ?? undefined) : undefined),
  },
  // Delivery counts of inserted rows (empty: all 0); where the exclusive lock's items were pushed, and their deliveries.
  {
    name: 'p_ins_deliveries',
    type: 'integer[]',
    form: 'third',
    unset: NONE,
    value: (w) => (w.inserts.some((i) => i.deliveries) ? w.inserts.map((i) => i.deliveries ?? 0) : undefined),
  },
  { name: 'p_lock_segments', type: 'bigint[]', form: 'third', unset: null, value: (w) => heldBy(savedLock(w), (i) => i.origin?.segment ?? null) },
  { name: 'p_lock_positions', type: 'integer[]', form: 'third', unset: null, value: (w) => heldBy(savedLock(w), (i) => i.origin?.position ?? null) },
  { name: 'p_lock_deliveries', type: 'integer[]', form: 'third', unset: null, value: (w) => heldBy(savedLock(w), (i) => i.deliveries ?? 1) },
  // The shared-lock columns (null: they stay as they are), shared locks written and deleted.
  { name: 'p_shared_live', type: 'integer', form: 'third', unset: null, value: (w) => w.shared?.live },
  { name: 'p_shared_items', type: 'bigint', form: 'third', unset: null, value: (w) => w.shared?.items },
  { name: 'p_shared_next', type: 'double precision', form: 'third', unset: null, value: (w) => (w.shared ? w.shared.nextExpiry : undefined) },
  { name: 'p_sl_upserts', type: 'jsonb', form: 'third', unset: '[]', value: (w) => sharedLockUpserts(w) },
  { name: 'p_sl_deletes', type: 'varchar[]', form: 'third', unset: NONE, value: (w) => (w.sharedLockDeletes.length > 0 ? w.sharedLockDeletes : undefined) },
  // Given-back items added and deleted.
  { name: 'p_ret_priority', type: 'integer[]', form: 'third', unset: NONE, value: (w) => mapped(w.returnedInserts, (r) => r.priority) },
  { name: 'p_ret_segment', type: 'bigint[]', form: 'third', unset: NONE, value: (w) => mapped(w.returnedInserts, (r) => r.segment) },
  { name: 'p_ret_position', type: 'integer[]', form: 'third', unset: NONE, value: (w) => mapped(w.returnedInserts, (r) => r.position) },
  { name: 'p_ret_item', type: 'text[]', form: 'third', unset: NONE, value: (w) => mapped(w.returnedInserts, (r) => r.json) },
  { name: 'p_ret_deliveries', type: 'integer[]', form: 'third', unset: NONE, value: (w) => mapped(w.returnedInserts, (r) => r.deliveries) },
  { name: 'p_retdel_priority', type: 'integer[]', form: 'third', unset: NONE, value: (w) => mapped(w.returnedDeletes, (r) => r.priority) },
  { name: 'p_retdel_segment', type: 'bigint[]', form: 'third', unset: NONE, value: (w) => mapped(w.returnedDeletes, (r) => r.segment) },
  { name: 'p_retdel_position', type: 'integer[]', form: 'third', unset: NONE, value: (w) => mapped(w.returnedDeletes, (r) => r.position) },
  // Dead letters: the dead-letter queue, the version and layout it gets if the turn creates it, its items, and the turn's time.
  { name: 'p_dlq_id', type: 'varchar', form: 'third', unset: null, value: (w) => w.deadLetters?.queueId },
  { name: 'p_dlq_version', type: 'bigint', form: 'third', unset: null, value: (w) => w.deadLetterDefaults?.version },
  { name: 'p_dlq_segment_size', type: 'integer', form: 'third', unset: null, value: (w) => w.deadLetterDefaults?.segmentSize },
  { name: 'p_dlq_buffer_segments', type: 'integer', form: 'third', unset: null, value: (w) => w.deadLetterDefaults?.bufferSegments },
  {
    name: 'p_dlq_priority',
    type: 'integer[]',
    form: 'third',
    unset: NONE,
    value: (w) => (w.deadLetters ? w.deadLetters.items.map((i) => i.priority) : undefined),
  },
  { name: 'p_dlq_item', type: 'text[]', form: 'third', unset: NONE, value: (w) => (w.deadLetters ? w.deadLetters.items.map((i) => i.json) : undefined) },
  { name: 'p_now', type: 'double precision', form: 'third', unset: null, value: (w) => w.deadLetterDefaults?.now },
  // The queue each item was dead-lettered from (null: never), parallel to the rows inserted, the exclusive lock's items,
  // the given-back items added and the items of the segments saved (in their concatenated order); not given when none was.
  { name: 'p_ins_from', type: 'varchar[]', form: 'third', unset: NONE, value: (w) => fromOf(w.inserts) },
  { name: 'p_lock_from', type: 'varchar[]', form: 'third', unset: null, value: (w) => fromOf(savedLock(w)?.items ?? []) },
  { name: 'p_ret_from', type: 'varchar[]', form: 'third', unset: NONE, value: (w) => fromOf(w.returnedInserts) },
  {
    name: 'p_save_from',
    type: 'varchar[]',
    form: 'third',
    unset: NONE,
    value: (w) => (w.storeSaves.some((s) => s.from) ? w.storeSaves.flatMap((s) => s.from ?? s.items.map(() => null)) : undefined),
  },
  // Redriven items: the queue each goes to, its priority and its item, in order.
  { name: 'p_rd_queue', type: 'varchar[]', form: 'third', unset: NONE, value: (w) => mapped(w.redriven, (r) => r.queueId) },
  { name: 'p_rd_priority', type: 'integer[]', form: 'third', unset: NONE, value: (w) => mapped(w.redriven, (r) => r.priority) },
  { name: 'p_rd_item', type: 'text[]', form: 'third', unset: NONE, value: (w) => mapped(w.redriven, (r) => r.json) },
  // The controls (written with the settings; unset: their defaults).
  { name: 'p_paused', type: 'boolean', form: 'third', unset: false, value: (w) => (writesSettings(w) && w.settings.paused ? true : undefined) },
  {
    name: 'p_retry_delay',
    type: 'integer',
    form: 'third',
    unset: 0,
    value: (w) => (writesSettings(w) && (w.settings.retryDelaySeconds ?? 0) !== 0 ? w.settings.retryDelaySeconds : undefined),
  },
  {
    name: 'p_retry_backoff',
    type: 'text',
    form: 'third',
    unset: 'exponential',
    value: (w) => (writesSettings(w) && (w.settings.retryBackoff ?? 'exponential') !== 'exponential' ? w.settings.retryBackoff : undefined),
  },
  {
    name: 'p_retry_delay_max',
    type: 'integer',
    form: 'third',
    unset: 900,
    value: (w) => (writesSettings(w) && (w.settings.retryDelayMaxSeconds ?? 900) !== 900 ? w.settings.retryDelayMaxSeconds : undefined),
  },
  {
    name: 'p_max_in_flight',
    type: 'integer',
    form: 'third',
    unset: null,
    value: (w) => (writesSettings(w) ? (w.settings.maxInFlight ?? undefined) : undefined),
  },
  {
    name: 'p_max_pops',
    type: 'double precision',
    form: 'third',
    unset: null,
    value: (w) => (writesSettings(w) ? (w.settings.maxPopsPerSecond ?? undefined) : undefined),
  },
  // The pop budget after the turn (null: unchanged).
  { name: 'p_pop_tokens', type: 'double precision', form: 'third', unset: null, value: (w) => w.popBudget?.tokens },
  { name: 'p_pop_tokens_at', type: 'double precision', form: 'third', unset: null, value: (w) => w.popBudget?.at },
  // Origins and deliveries of delayed items given back (waiting out a retry delay), parallel to p_dl_*; unnest pads them with nulls.
  {
    name: 'p_dl_segment',
    type: 'bigint[]',
    form: 'third',
    unset: NONE,
    value: (w) => (w.delayedInserts.some((d) => d.origin) ? w.delayedInserts.map((d) => d.origin?.segment ?? null) : undefined),
  },
  {
    name: 'p_dl_position',
    type: 'integer[]',
    form: 'third',
    unset: NONE,
    value: (w) => (w.delayedInserts.some((d) => d.origin) ? w.delayedInserts.map((d) => d.origin?.position ?? null) : undefined),
  },
  {
    name: 'p_dl_deliveries',
    type: 'integer[]',
    form: 'third',
    unset: NONE,
    value: (w) => (w.delayedInserts.some((d) => d.origin) ? w.delayedInserts.map((d) => (d.origin ? (d.deliveries ?? 0) : null)) : undefined),
  },
  // The queue a delayed given-back item was dead-lettered from, parallel to p_dl_*; unnest pads it with nulls.
  {
    name: 'p_dl_from',
    type: 'varchar[]',
    form: 'third',
    unset: NONE,
    value: (w) => (w.delayedInserts.some((d) => d.from) ? w.delayedInserts.map((d) => d.from ?? null) : undefined),
  },
  // Item headers (JSON texts; null: none), parallel to the rows inserted, the exclusive lock's items, the given-back items
  // added, the items of the segments saved (concatenated), the delayed items added, the dead letters and the redriven
  // items; not given when none has any (unnest pads them with nulls).
  { name: 'p_ins_headers', type: 'text[]', form: 'latest', unset: NONE, value: (w) => headersOf(w.inserts) },
  { name: 'p_lock_headers', type: 'text[]', form: 'latest', unset: null, value: (w) => headersOf(savedLock(w)?.items ?? NONE) },
  { name: 'p_ret_headers', type: 'text[]', form: 'latest', unset: NONE, value: (w) => headersOf(w.returnedInserts) },
  {
    name: 'p_save_headers',
    type: 'text[]',
    form: 'latest',
    unset: NONE,
    value: (w) => (w.storeSaves.some((s) => s.headers) ? w.storeSaves.flatMap((s) => s.headers ?? s.items.map(() => null)) : undefined),
  },
  { name: 'p_dl_headers', type: 'text[]', form: 'latest', unset: NONE, value: (w) => headersOf(w.delayedInserts) },
  { name: 'p_dlq_headers', type: 'text[]', form: 'latest', unset: NONE, value: (w) => headersOf(w.deadLetters?.items ?? NONE) },
  { name: 'p_rd_headers', type: 'text[]', form: 'latest', unset: NONE, value: (w) => headersOf(w.redriven) },
];

const FORM_ORDER: Record<WriteTurnForm, number> = { short: 0, third: 1, latest: 2 };

/** The parameters a form takes, in signature order. */
export function parametersOf(form: WriteTurnForm): readonly WriteTurnParameter[] {
  return WRITE_TURN_PARAMETERS.filter((p) => FORM_ORDER[p.form] <= FORM_ORDER[form]);
}

// Each form's parameters must be a prefix of the next form's: the table lists them form by form.
// Every parameter beyond the short form says what it is when not given.
WRITE_TURN_PARAMETERS.forEach((p, i) => {
  if (i > 0 && FORM_ORDER[p.form] < FORM_ORDER[WRITE_TURN_PARAMETERS[i - 1].form]) throw new Error(`${p.name} comes after a parameter of a longer form`);
  if (p.form !== 'short' && p.unset === undefined) throw new Error(`${p.name} has no value for "not given"`);
});

/** Number of parameters of the short form; a values array longer than this is for the form with every parameter. */
export const SHORT_FORM_LENGTH = parametersOf('short').length;
