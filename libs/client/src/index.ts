export { PushpopClient, Queue, retryAfterMs, retryDelayMs, type CallOptions, type PushpopClientOptions, type RetryOptions } from './client.js';
export { Consumer, type ConsumerEvents, type ConsumerOptions, type GiveUpReason, type Handler, type Message } from './consumer.js';
export { Producer, type ProducerOptions, type PushResult } from './producer.js';
export { isPushpopError, PushpopError, RetryLater } from './errors.js';
export type * from './types.js';
