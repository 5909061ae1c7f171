// How the BullMQ peer (bench/peers/bullmq.mjs) names its queues, shared with the benchmark,
// which counts a queue's jobs in Redis itself.

/** BullMQ's default key prefix. */
export const BULL_PREFIX = 'bull';

/**
 * The BullMQ queue name of a queue id. BullMQ refuses `:` in a name (it separates the parts of
 * its Redis keys); `%` is not in a queue id's alphabet, so `%3A` in its place keeps names apart.
 */
export const bullName = (queueId) => queueId.replaceAll(':', '%3A');

/** Redis keys holding a queue's jobs that wait to be taken: without a priority, and with one. */
export const waitingKeys = (queueId) => ({
  wait: `${BULL_PREFIX}:${bullName(queueId)}:wait`,
  prioritized: `${BULL_PREFIX}:${bullName(queueId)}:prioritized`,
});
