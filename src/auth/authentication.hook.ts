import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest, onRequestHookHandler } from 'fastify';
import { Logger } from '@nestjs/common';
import type { AppConfig } from '../config/app-config.js';
import { isLoopback, type ApiKey } from '../config/api-keys.js';
import { ForbiddenError, UnauthorizedError } from '../common/errors.js';
import type { Principal } from './principal.js';
import { ROUTE_AUTH } from './scopes.decorator.js';

const digest = (key: string): Buffer => createHash('sha256').update(key).digest();

interface KnownKey {
  digest: Buffer;
  principal: Principal;
}

/** The key a request carries: `Authorization: Bearer <key>`, else `X-API-Key: <key>`. */
function presentedKey(request: FastifyRequest): string | undefined {
  const authorization = request.headers.authorization;
  if (authorization !== undefined) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    return match ? match[1] : undefined;
  }
  const header = request.headers['x-api-key'];
  return typeof header === 'string' && header !== '' ? header : undefined;
}

/** The two `onRequest` hooks of API keys: who is calling, then whether they may. */
export interface AuthenticationHooks {
  /** Sets `request.principal` from a known key; never refuses. */
  identify: onRequestHookHandler;
  /** Refuses with 401 UNAUTHORIZED or 403 FORBIDDEN what the route's `@Scopes` does not allow. */
  authorise: onRequestHookHandler;
}

/**
 * Authentication and authorisation (CONTRACT.md "Authentication and authorisation"): two
 * `onRequest` hooks, before any body is read or any queue touched (`configureApp` runs the rate
 * limit between them, so that it counts by key name and limits refusals too). A route's needs
 * come from its `@Scopes(...)` decorator (in the route's config); routes without one (health,
 * Swagger UI, the console's files, unknown paths) are open. With no keys configured there are
 * no hooks: every route is open.
 *
 * Hooks, not a Nest guard: guards run after Fastify has parsed the body, and the contract
 * answers 401/403 before reading it. Written here rather than taken from a plugin
 * (`@fastify/bearer-auth` knows neither `X-API-Key` nor scopes); it is a lookup and a compare.
 *
 * Keys are found by their SHA-256 digest and the digests compared with `timingSafeEqual`: the
 * time taken depends on the digest of what was sent, never on how much of a real key it matched.
 * Keys are never logged; the request carries the key's name and scopes only ({@link Principal}).
 */
export function authenticationHooks(config: AppConfig): AuthenticationHooks | undefined {
  const logger = new Logger('Auth');
  if (config.apiKeys.length === 0) {
    if (!isLoopback(config.env.HOST))
      logger.warn(`No API keys and HOST=${config.env.HOST}: every queue is open to anyone who can reach the port (ALLOW_UNAUTHENTICATED=true)`);
    return undefined;
  }
  logger.log(`API keys: ${config.apiKeys.map((k) => `${k.name} (${k.scopes.join('+')})`).join(', ')}`);
  const known = new Map<string, KnownKey>(
    config.apiKeys.map((k: ApiKey) => {
      const d = digest(k.key);
      return [d.toString('hex'), { digest: d, principal: { name: k.name, scopes: new Set(k.scopes) } }];
    }),
  );
  const open = { METRICS_PUBLIC: config.env.METRICS_PUBLIC };
  /** Requests that sent a key the service does not know (for the 401's message). */
  const unknownKey = new WeakSet<FastifyRequest>();

  return {
    identify: (request, _reply, done) => {
      const key = presentedKey(request);
      if (key !== undefined) {
        const sent = digest(key);
        const found = known.get(sent.toString('hex'));
        if (found && timingSafeEqual(found.digest, sent)) request.principal = found.principal;
        else unknownKey.add(request);
      }
      done();
    },
    authorise: (request, _reply, done) => {
      const auth = request.routeOptions.config?.[ROUTE_AUTH];
      if (auth === undefined || auth === 'public' || (auth.openWhen && open[auth.openWhen])) return done();
      const principal = request.principal;
      if (!principal)
        return done(
          new UnauthorizedError(unknownKey.has(request) ? 'Unknown API key' : 'An API key is required: send Authorization: Bearer <key> or X-API-Key: <key>'),
        );
      const { scopes } = principal;
      if (auth.scopes.length > 0 && !scopes.has('admin') && !auth.scopes.some((s) => scopes.has(s)))
        return done(new ForbiddenError(principal.name, auth.scopes));
      done();
    },
  };
}
