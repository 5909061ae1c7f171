import type { ApiKey } from './api-keys.js';
import { Environment } from './environment.js';

/**
 * The validated configuration, injected wherever settings are read. A class (not a string
 * token) so that consumers get types without casts.
 */
export class AppConfig {
  /** @param apiKeys - the configured API keys; none: every route is open */
  constructor(
    readonly env: Environment,
    readonly apiKeys: readonly ApiKey[] = [],
  ) {}

  get queueDefaults(): { segmentSize: number; bufferSegments: number } {
    return { segmentSize: this.env.SEGMENT_SIZE, bufferSegments: this.env.BUFFER_SEGMENTS };
  }
}
