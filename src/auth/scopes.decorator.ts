import { applyDecorators } from '@nestjs/common';
import { RouteConfig } from '@nestjs/platform-fastify';
import { ApiBearerAuth, ApiExtension, ApiOperation, ApiSecurity } from '@nestjs/swagger';
import type { Scope } from '../config/api-keys.js';

/** The names of the OpenAPI security schemes (declared in `buildOpenApiDocument`). */
export const BEARER_SCHEME = 'bearer';
export const API_KEY_SCHEME = 'api-key';

/** What a route asks of a caller, carried in the Fastify route's `config` for the authentication hook. */
export interface RouteAuth {
  /** Scopes any one of which lets a key in (`admin` always does); empty: any known key. */
  readonly scopes: readonly Scope[];
  /** An environment switch that opens the route to everyone (`METRICS_PUBLIC` for /metrics). */
  readonly openWhen?: 'METRICS_PUBLIC';
}

/** Key of {@link RouteAuth} in a Fastify route's `config`. */
export const ROUTE_AUTH = 'pushpopAuth';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** What the route asks of a caller; absent: open. */
    pushpopAuth?: RouteAuth | 'public';
  }
}

/**
 * Marks a handler as needing an API key with one of `scopes` (`admin` may do everything), when
 * keys are configured. Carried in the Fastify route's config, so that the authentication hook
 * answers 401/403 at `onRequest`, before the body is read; documented in the OpenAPI document
 * (`security` and `x-pushpop-scopes`).
 */
export function Scopes(...scopes: Scope[]): MethodDecorator {
  return scoped({ scopes });
}

/** {@link Scopes}, opened to everyone when the named switch is set. */
export function ScopesUnless(openWhen: RouteAuth['openWhen'], ...scopes: Scope[]): MethodDecorator {
  return scoped({ scopes, openWhen });
}

function scoped(auth: RouteAuth): MethodDecorator {
  const needs = auth.scopes.length > 0 ? [...auth.scopes, ...(auth.scopes.includes('admin') ? [] : ['admin'])] : [];
  return applyDecorators(
    RouteConfig({ [ROUTE_AUTH]: auth }),
    ApiBearerAuth(BEARER_SCHEME),
    ApiSecurity(API_KEY_SCHEME),
    ApiExtension('x-pushpop-scopes', needs),
  );
}

/**
 * Marks a handler as open to everyone, keys or not (health checks), and says so in the OpenAPI
 * document (`security: []`). Put it below any explicit `@ApiOperation`: decorators apply bottom
 * up, and the later one's fields win (the Swagger plugin's summary is added on top).
 */
export function Public(): MethodDecorator {
  return applyDecorators(RouteConfig({ [ROUTE_AUTH]: 'public' }), ApiOperation({ security: [] }));
}
