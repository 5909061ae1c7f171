export { PushpopClient, Queue, retryAfterMs, retryDelayMs, type CallOptions, type PushpopClientOptions, type RetryOptions } from './client.js';
export { BASE_CAPABILITIES, capabilitiesOf, type Capabilities } from './capabilities.js';
export {
  Consumer,
  HandlerTimeoutError,
  type ConsumerEvents,
  type ConsumerOptions,
  type ConsumerStats,
  type GiveUpReason,
  type Handler,
  type ItemEvent,
  type Message,
  type PrefixTarget,
} from './consumer.js';
export type { BackoffOptions } from './failure-policy.js';
export type { PeekResult } from './peek.js';
export { Producer, type ProducerOptions, type PushResult } from './producer.js';
export { isPushpopError, MAX_RETRY_DELAY_SECONDS, PushpopError, RetryLater, UnrecoverableError } from './errors.js';
export type * from './types.js';
