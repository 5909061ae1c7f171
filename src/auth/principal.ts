import type { Scope } from '../config/api-keys.js';

export { SCOPES, type Scope } from '../config/api-keys.js';

/** Who is calling: the name of the API key a request carried (never the key itself) and its scopes. */
export interface Principal {
  readonly name: string;
  readonly scopes: ReadonlySet<Scope>;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the authentication hook when the request carried a known key; absent when no keys are configured. */
    principal?: Principal;
  }
}
