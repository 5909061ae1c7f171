import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, operations, paths } from './schema.js';

export type { components, operations, paths } from './schema.js';
export type { Client, ClientOptions, FetchResponse, Middleware } from 'openapi-fetch';

type Schemas = components['schemas'];

/** Body of `POST /queue/{queue_id}/push`. */
export type PushItem = Schemas['PushItemDto'];
/** Body of `POST /queue/{queue_id}/push/batch`. */
export type PushBatch = Schemas['PushBatchDto'];
export type PushResponse = Schemas['PushResponseDto'];
export type PushBatchResponse = Schemas['PushBatchResponseDto'];
/** Answer to a pop; `locked`, `lock_id` and `lock_expires_at` come with `require_ack`. */
export type PopResponse = Schemas['PopResponseDto'];
/** Query parameters of `POST /queue/{queue_id}/pop`. */
export type PopQuery = NonNullable<operations['pop']['parameters']['query']>;
/** Body of acknowledge: the lock, and optionally `next` (pop again in the same request). */
export type LockRequest = Schemas['AcknowledgeRequestDto'];
export type ExtendLockRequest = Schemas['ExtendLockRequestDto'];
/** Body of release: the lock, and optionally `delay_seconds` (0-900) replacing the queue's retry delay. */
export type ReleaseRequest = Schemas['ReleaseRequestDto'];
export type AcknowledgeResponse = Schemas['AcknowledgeResponseDto'];
export type ExtendLockResponse = Schemas['ExtendLockResponseDto'];
export type ReleaseResponse = Schemas['ReleaseResponseDto'];
export type QueueInfo = Schemas['QueueInfoDto'];
/** A queue's settings: `GET`/`PUT /queue/{queue_id}/settings`, and `config` of `GET /queue/{queue_id}`. */
export type QueueSettings = Schemas['QueueSettingsDto'];
/** Body of `PUT /queue/{queue_id}/settings`: any of the settings; those left out stay as they are. */
export type QueueSettingsRequest = Schemas['QueueSettingsRequestDto'];
/** `locks` of `GET /queue/{queue_id}` for a queue in shared lock mode. */
export type SharedLocksInfo = Schemas['SharedLocksInfoDto'];
export type QueueList = Schemas['QueueListDto'];
export type QueueSummary = Schemas['QueueSummaryDto'];
export type DeleteQueueResponse = Schemas['DeleteQueueResponseDto'];
/** `POST /queue/{queue_id}/redrive`: where the items go (absent: where each was dead-lettered from) and how many at most. */
export type RedriveRequest = Schemas['RedriveRequestDto'];
export type RedriveResponse = Schemas['RedriveResponseDto'];
/** Every `error_code` the service answers; each operation's error bodies narrow it to the codes that operation can answer. */
export type ErrorCode = Schemas['ErrorCode'];
/** The body of every error answer: `statusCode`, a stable `error_code` to branch on, and `message`. */
export type ErrorResponse = Schemas['ErrorResponseDto'];
/** Error answers of acknowledge, extend-lock and release (they also carry `success: false`). */
export type LockErrorResponse = Schemas['LockErrorResponseDto'];
/** 423 `QUEUE_LOCKED` answer to a pop, with the lock's `lock_expires_at`. */
export type QueueLockedResponse = Schemas['QueueLockedResponseDto'];
/** 503 `SERVICE_UNAVAILABLE` answer of `GET /health/ready`, with the health check in `details`. */
export type ServiceUnavailableResponse = Schemas['ServiceUnavailableResponseDto'];

/** What `GET /whoami` answers: the key's name and scopes. */
export type WhoAmI = Schemas['WhoAmIDto'];

/** A pushpop client: one typed method per HTTP verb (`GET`, `POST`, `DELETE`, ...), paths as in the OpenAPI document. */
export type PushpopClient = Client<paths>;

/** Options of {@link createPushpopClient}: openapi-fetch's, and the API key to send. */
export interface PushpopClientOptions extends Omit<ClientOptions, 'baseUrl'> {
  /** An API key (README "Security"), sent as `Authorization: Bearer <key>` with every call. */
  apiKey?: string;
}

/**
 * Creates a typed client for a pushpop service. Every call resolves (it does not throw on an
 * HTTP error) to `{ data, error, response }`: `data` is the 2xx body, `error` the documented
 * error body of the status received (with its `error_code`), typed per operation from the
 * committed OpenAPI document. Network failures reject.
 *
 * @param baseUrl - where the service listens, e.g. `http://127.0.0.1:8000` (no trailing path)
 * @param options - `apiKey` when the service has keys configured; further openapi-fetch
 *   options: headers, a custom `fetch`, `RequestInit` fields
 * @returns an openapi-fetch client typed with the generated `paths`
 *
 * @example
 * ```ts
 * const client = createPushpopClient('http://127.0.0.1:8000', { apiKey: process.env.PUSHPOP_API_KEY });
 * const { data, error } = await client.POST('/queue/{queue_id}/pop', {
 *   params: { path: { queue_id: 'orders' }, query: { depth: 10, require_ack: true } },
 * });
 * if (error) console.warn(error.error_code);
 * ```
 */
export function createPushpopClient(baseUrl: string, options: PushpopClientOptions = {}): PushpopClient {
  const { apiKey, ...init } = options;
  const client = createClient<paths>({ ...init, baseUrl });
  if (apiKey !== undefined) {
    client.use({
      onRequest: ({ request }) => {
        request.headers.set('authorization', `Bearer ${apiKey}`);
        return request;
      },
    });
  }
  return client;
}
