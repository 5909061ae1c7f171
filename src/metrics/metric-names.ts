/**
 * Every metric pushpop publishes, in one place. Labels are bounded: operation names, outcomes
 * (`ok` or an error_code) and reasons — never a queue id.
 */
export const METRICS = {
  operations: { name: 'pushpop_operations_total', help: 'HTTP operations by operation and outcome (ok or the error_code)', labels: ['operation', 'outcome'] },
  operationDuration: { name: 'pushpop_operation_duration_seconds', help: 'HTTP operation latency, including long-poll waits', labels: ['operation'] },
  itemsPushed: { name: 'pushpop_items_pushed_total', help: 'Items pushed (committed)' },
  itemsPopped: { name: 'pushpop_items_popped_total', help: 'Items popped, with or without acknowledgement' },
  acknowledgements: {
    name: 'pushpop_acknowledgements_total',
    help: 'Locks named by acknowledge and acknowledge/batch, one per lock id, by result: ok or the error_code that lock was answered',
    labels: ['result'],
  },
  itemsAcknowledged: { name: 'pushpop_items_acknowledged_total', help: 'Items removed for good by acknowledgement' },
  lockExpirations: { name: 'pushpop_lock_expirations_total', help: 'Acknowledgement locks that expired' },
  itemsRedelivered: {
    name: 'pushpop_items_redelivered_total',
    help: 'Items returned to the front of their queue by lock expiry or release',
    labels: ['reason'],
  },
  delayedItemsDue: { name: 'pushpop_delayed_items_due_total', help: 'Delayed items that came due and joined their priority' },
  duplicatesSkipped: {
    name: 'pushpop_duplicates_skipped_total',
    help: 'Pushed items skipped because their dedup_id was accepted within the deduplication window',
  },
  segmentsOffloaded: { name: 'pushpop_segments_offloaded_total', help: 'Segments moved to the offload store' },
  segmentOffloadFailures: { name: 'pushpop_segment_offload_failures_total', help: 'Failed attempts to offload a segment (the segment stayed in state)' },
  segmentsLoaded: { name: 'pushpop_segments_loaded_total', help: 'Segments loaded back from the offload store' },
  segmentLoadFailures: { name: 'pushpop_segment_load_failures_total', help: 'Failed attempts to load a segment back (retried on the next operation)' },
  segmentLoadDuration: { name: 'pushpop_segment_load_duration_seconds', help: 'Time to load one segment back from the offload store' },
  storeDuration: { name: 'pushpop_store_transaction_duration_seconds', help: 'Database time of one actor turn (transaction), by outcome', labels: ['outcome'] },
  activeActors: { name: 'pushpop_active_actors', help: 'Queue actors held in memory' },
  itemsInMemory: { name: 'pushpop_items_in_memory', help: 'Items held in memory over all actors' },
  itemsDeadLettered: {
    name: 'pushpop_items_dead_lettered_total',
    help: "Items moved to their queue's dead-letter queue: they reached max_deliveries when their lock expired or was released, or were released with dead_letter",
  },
  itemsRedriven: {
    name: 'pushpop_items_redriven_total',
    help: 'Items a redrive moved from the front of a queue to the tail of another (POST /queue/{queue_id}/redrive)',
  },
  itemsRetryDelayed: {
    name: 'pushpop_items_retry_delayed_total',
    help: "Items given back by lock expiry or release that waited out their queue's retry delay before they were visible again",
  },
  popsLimited: {
    name: 'pushpop_pops_limited_total',
    help: 'Pops that handed out nothing because of a delivery limit, by reason: in_flight (max_in_flight) or rate (max_pops_per_second)',
    labels: ['reason'],
  },
  fairPops: {
    name: 'pushpop_fair_pops_total',
    help: 'Fair pops over the queues under a prefix (POST /queues/pop?prefix=), by outcome: served (items handed out) or empty',
    labels: ['outcome'],
  },
  fairPopSkips: {
    name: 'pushpop_fair_pop_skips_total',
    help: 'Ready queues fair pops passed over, by reason: empty (emptied since read), paused, limited, locked (exclusive lock), busy, or exclusive (lock mode exclusive, passed over by a pop with lock_per_item)',
    labels: ['reason'],
  },
  schedules: { name: 'pushpop_schedules', help: 'Schedules, paused or not (all processes; refreshed at most every 10 s)' },
  scheduleFirings: {
    name: 'pushpop_schedule_firings_total',
    help: 'Schedule firings this process pushed and claimed (each firing is claimed by one process), made-up ones included',
  },
  scheduleFiringsMadeUp: {
    name: 'pushpop_schedule_firings_made_up_total',
    help: 'Schedule firings pushed late, each one push standing for every firing missed while no process ran',
  },
  enqueueWaiting: {
    name: 'pushpop_enqueue_waiting_items',
    help: 'Items enqueued from SQL (pushpop_enqueue) and committed, not yet carried into their queues (all processes; refreshed at most every 10 s)',
  },
  enqueueOldestAge: {
    name: 'pushpop_enqueue_oldest_age_seconds',
    help: 'Seconds since the oldest transaction whose SQL-enqueued items wait to be carried committed; 0 when none waits (refreshed at most every 10 s)',
  },
  pausedQueues: { name: 'pushpop_paused_queues', help: 'Queues paused: pops hand out nothing (all processes; refreshed at most every 10 s)' },
  liveLocks: {
    name: 'pushpop_live_locks',
    help: 'Acknowledgement locks not yet acknowledged, released or expired, exclusive and shared (all processes; refreshed at most every 10 s)',
  },
  queuedItems: {
    name: 'pushpop_queued_items',
    help: 'Items waiting in all queues to be popped: the sum of their counts, neither delayed nor held by a lock (all processes; refreshed at most every 10 s)',
  },
  delayedItems: { name: 'pushpop_delayed_items', help: 'Delayed items not visible yet (all processes; refreshed at most every 10 s)' },
  offloadedSegments: { name: 'pushpop_offloaded_segments', help: 'Segments currently in the offload store (all processes)' },
  waitingOperations: { name: 'pushpop_waiting_operations', help: 'Operations waiting for a queue turn' },
  longPolls: { name: 'pushpop_long_polls_waiting', help: 'Pops long-polling an empty queue (waiting between their turns)' },
  longPollWakeUps: {
    name: 'pushpop_long_poll_wake_ups_total',
    help: 'Long polls woken, by cause: a turn of this process left items (local), another process made the queue non-empty (notification), the periodic re-check found items (recheck)',
    labels: ['cause'],
  },
  longPollsRefused: {
    name: 'pushpop_long_polls_refused_total',
    help: 'Pops with wait_seconds answered at once because MAX_WAITING_POLLS long polls were waiting',
  },
  longPollRechecks: {
    name: 'pushpop_long_poll_rechecks_total',
    help: 'Re-check statements sent for the queues long polls wait on (one per interval for all of them)',
  },
  notifications: {
    name: 'pushpop_notifications_total',
    help: 'Notifications that a queue went from no items to some, sent to or received from other processes on the database, by direction',
    labels: ['direction'],
  },
  notificationStates: {
    name: 'pushpop_notification_states_total',
    help: 'Queue states carried by notifications: sent with a notification (sent), received for a long poll waiting here (kept), a turn started from one instead of reading the queue (used)',
    labels: ['use'],
  },
  notificationsListening: {
    name: 'pushpop_notifications_listening',
    help: '1 while this process listens for items pushed by other processes (LISTEN/NOTIFY), else 0',
  },
} as const;

/** Prefix of the default Node.js process metrics. */
export const DEFAULT_METRICS_PREFIX = 'pushpop_';
