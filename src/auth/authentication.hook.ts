import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import fastifyPlugin from 'fastify-plugin';
import type { AppConfig } from '../config/app-config.js';
import { Logger } from '@nestjs/common';
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

/**
 * Authentication and authorisation (CONTRACT.md "Authentication and authorisation"): one
 * `onRequest` hook, before any body is read or any queue touched. A route's needs come from
 * its `@Scopes(...)` decorator (in the route's config); routes without one (health, Swagger UI,
 * the console's files) are open. With no keys configured nothing is registered: every route is open.
 *
 * A hook, not a Nest guard: guards run after Fastify has parsed the body, and the contract
 * answers 401/403 before reading it. It is written here rather than taken from a plugin
 * (`@fastify/bearer-auth` knows neither `X-API-Key` nor scopes); it is a lookup and a compare.
 *
 * Keys are found by their SHA-256 digest and the digests compared with `timingSafeEqual`: the
 * time taken depends on the digest of what was sent, never on how much of a real key it matched.
 * Keys are never logged; the request carries the key's name and scopes only ({@link Principal}).
 */
export function registerAuthentication(fastify: FastifyInstance, config: AppConfig): void {
  const logger = new Logger('Auth');
  if (config.apiKeys.length === 0) {
    if (!isLoopback(config.env.HOST)) logger.warn(`No API keys and HOST=${config.env.HOST}: every queue is open to anyone who can reach the port (ALLOW_UNAUTHENTICATED=true)`);
    return;
  }
  logger.log(`API keys: ${config.apiKeys.map((k) => `${k.name} (${k.scopes.join('+')})`).join(', ')}`);
  // A plugin (registered in order with the others: after CORS, whose headers a 401 must carry,
  // before rate limiting, which counts by key name), not wrapped: its hook applies to every route.
  void fastify.register(fastifyPlugin(async (app: FastifyInstance) => addAuthenticationHook(app, config), { name: 'pushpop-authentication' }));
}

function addAuthenticationHook(fastify: FastifyInstance, config: AppConfig): void {
  const known = new Map<string, KnownKey>(
    config.apiKeys.map((k: ApiKey) => {
      const d = digest(k.key);
      return [d.toString('hex'), { digest: d, principal: { name: k.name, scopes: new Set(k.scopes) } }];
    }),
  );
  const open = { METRICS_PUBLIC: config.env.METRICS_PUBLIC };

  fastify.addHook('onRequest', (request, _reply, done) => {
    const auth = request.routeOptions.config?.[ROUTE_AUTH];
    if (auth === undefined || auth === 'public' || (auth.openWhen && open[auth.openWhen])) return done();
    const key = presentedKey(request);
    if (key === undefined) return done(new UnauthorizedError('An API key is required: send Authorization: Bearer <key> or X-API-Key: <key>'));
    const sent = digest(key);
    const found = known.get(sent.toString('hex'));
    if (!found || !timingSafeEqual(found.digest, sent)) return done(new UnauthorizedError('Unknown API key'));
    request.principal = found.principal;
    const { scopes } = found.principal;
    if (auth.scopes.length > 0 && !scopes.has('admin') && !auth.scopes.some((s) => scopes.has(s))) return done(new ForbiddenError(found.principal.name, auth.scopes));
    done();
  });
}
